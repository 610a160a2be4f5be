"""`chute demo --text`: a language model's data, end to end, preempted and resumed exactly.

1. The standard library's docstrings (shipped with Python: no download) become a JSON
   Lines corpus (every 20th held out), and a byte-level BPE tokenizer (1024 tokens) is
   trained on it.
2. A tiny decoder-only transformer trains on a chute pipeline: a global shuffle every
   epoch, tokenization in 2 worker processes (one `encode_batch` per chunk), best-fit
   packing into rows of 128 tokens with segment ids and positions, batches of 16,
   device prefetch; model, optimizer and data iterator are checkpointed together.
3. The same training runs again, is killed (SIGKILL) part way and resumed.
4. The runs' token batches and losses are compared step by step; tokens/s, the padding
   ratio and the held-out loss are printed, and the loss curves go to a PNG.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path

from ._demo import preempt_and_compare

__all__ = ["run_text_demo"]

print = functools.partial(print, flush=True)  # Keeps lines in order with tqdm's.

_EXTRAS = ("optax", "matplotlib", "orbax.checkpoint", "tokenizers")


def run_text_demo(
    folder: str | None = None, steps: int = 200, save_every: int = 25, kill_at: int | None = None
) -> int:
    """Runs the text demo (see the module docs); returns the exit code (0: runs matched).

    Example:
        >>> callable(run_text_demo)
        True
    """
    import importlib.util

    missing = [name for name in _EXTRAS if importlib.util.find_spec(name.split(".")[0]) is None]
    if missing:
        print(
            f"chute demo --text: error: needs {', '.join(missing)}: "
            "pip install 'chute[demo]' 'chute-transforms[text]'",
            file=sys.stderr,
        )
        return 2
    import numpy as np

    from ._demo_text_data import BATCH, SEQUENCE, VOCAB, train_tokenizer, write_corpus

    if kill_at is None:
        kill_at = steps * 11 // 20 + save_every // 2  # Between two checkpoints.
    work = Path(folder or tempfile.mkdtemp(prefix="chute-demo-text-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    train, held_out, documents = write_corpus(str(work / "data"))
    tokenizer = train_tokenizer(train, str(work / "tokenizer.json"))
    lengths = _lengths(train, tokenizer)
    info = {
        "train": train,
        "held_out": held_out,
        "tokenizer": tokenizer,
        "train_tokens": int(np.sum(lengths)),
    }
    (work / "data.json").write_text(json.dumps(info))
    print(f"chute demo --text, in {work}")
    print(
        f"  data: the standard library's docstrings -> {documents} training texts, "
        f"{info['train_tokens']} tokens (median {int(np.median(lengths))} a text), "
        f"a byte-level BPE tokenizer of {VOCAB} tokens trained on them"
    )
    print(
        "  pipeline: global shuffle per epoch -> tokenize (2 worker processes) -> "
        f"best-fit packing into rows of {SEQUENCE} -> batch({BATCH}) -> device prefetch"
    )
    print(
        f"  model: a 2-layer transformer (width 64, 4 heads), Adam; Orbax checkpoints "
        f"(model + iterator) every {save_every} steps"
    )
    outcome = preempt_and_compare(
        "chute_cli._demo_text_train", work, steps, save_every, kill_at, ("data.json",)
    )
    print()
    print("| run | first step after | then steps/s | tokens/s | input wait | held-out loss |")
    print("|---|---|---|---|---|---|")
    for label, summary in (("uninterrupted", outcome.reference), ("resumed", outcome.resumed)):
        print(
            f"| {label} | {summary['first_step_s']:.1f} s | {summary['steps_per_s']:.0f} | "
            f"{summary['tokens_per_s']:,.0f} | {summary['wait_fraction']:.1%} | "
            f"{summary['held_out_loss']:.2f} |"
        )
    print(f"padding: {_padding(train, tokenizer):.1%} of the packed rows' tokens (one epoch)")
    plot = work / "loss.png"
    outcome.plot(plot)
    print(f"\nloss curves: {plot}")
    return 0 if outcome.identical else 1


def _lengths(corpus: str, tokenizer: str) -> list[int]:
    """How many tokens each text of the corpus has, its `<eos>` included."""
    import chute

    from ._demo_text_data import EOS

    tokenize = chute.Tokenize(tokenizer, eos_id=EOS)
    ds = chute.MapDataset.source(chute.JsonLinesSource(corpus)).map(tokenize)
    return [len(element["text"]) for element in ds]


def _padding(corpus: str, tokenizer: str) -> float:
    """The share of padding in one epoch of the demo's packed rows."""
    import numpy as np

    from ._demo_text_data import text_pipeline

    segments = [
        np.asarray(batch["text_segment_ids"])
        for batch in text_pipeline(corpus, tokenizer, epochs=1, workers=0)
    ]
    total = sum(s.size for s in segments)
    return float(sum(np.count_nonzero(s == 0) for s in segments) / max(total, 1))
