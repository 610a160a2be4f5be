"""Mutated `chute convert` inputs, read in a child: `fuzz_cli_inputs_run.py KIND SEED N DIR`.

KIND is `jsonl` (a JSON Lines file) or `images` (an image folder: class subfolders of
PNG and JPEG files). It writes one valid input, then N mutations of it, and for each
1. opens it as `chute convert` does (`open_input`) and reads every record through the
   source itself (`chute_sources.JsonLinesSource` / `ImageFolderSource`, not the
   wrapper that turns any exception into a CLI error), then
2. converts it (`chute convert SRC DST --overwrite -q`, in this process).
Each may succeed or fail with a clear error naming the input: opening and converting
with a `CliError` for bad data (exit code 1), reading through the source with one of
chute's errors (`ChuteError`). Anything else (another exception, another exit code, a
message that does not say which file) is printed as `UNEXPECTED ...`. The test runs
this in a child so that a crash (a signal) or a hang is seen as such.

Mutations: first one of each aimed at the format (JSON Lines: a line nested 100,000
deep, a number of 5,000 digits, invalid UTF-8, a raw NUL; images: a class folder
emptied, a symbolic link looping back to the root, a text file or an empty file named
`.png`), then bytes flipped, a range overwritten, the file truncated or its tail zeroed
(for images: of one image file).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sys

from chute_testing import corrupt, png

JSONL_LINES = 40
IMAGES_PER_CLASS = 3


def _jpeg(rng: random.Random) -> bytes | None:
    try:
        from PIL import Image
    except ImportError:
        return None
    buffer = io.BytesIO()
    Image.frombytes("L", (16, 12), rng.randbytes(16 * 12)).save(buffer, "JPEG")
    return buffer.getvalue()


def write_valid(kind: str, folder: str, rng: random.Random) -> str:
    if kind == "jsonl":
        path = os.path.join(folder, "valid.jsonl")
        with open(path, "w") as file:
            for i in range(JSONL_LINES):
                record = {"i": i, "text": f"line {i} é", "x": [i, i / 2, None], "ok": i % 2 == 0}
                file.write(json.dumps(record, ensure_ascii=False) + ("\n\n" if i % 9 else "\n"))
        return path
    root = os.path.join(folder, "valid")
    for label in ("cat", "dog"):
        os.makedirs(os.path.join(root, label))
        for i in range(IMAGES_PER_CLASS):
            jpeg = _jpeg(rng) if i == 0 else None
            if jpeg:
                name, data = f"{i}.jpg", jpeg
            else:  # A grey PNG of random pixels.
                rows = (rng.randbytes(8 + i) for _ in range(6))
                name, data = f"{i}.png", png(8 + i, 6, rows, rgb=False)
            with open(os.path.join(root, label, name), "wb") as file:
                file.write(data)
    return root


_JSONL_LINES = [
    b"[" * 100_000 + b"]" * 100_000,  # Deeper than Python's recursion limit.
    b'{"n": ' + b"7" * 5000 + b"}",  # More digits than int() takes by default.
    b'{"s": "\xff\xfe"}',  # Not UTF-8.
    b'{"s": "a\x00b"}',  # A raw NUL inside a string.
]


_IMAGE_FOLDER_CHANGES = ["class emptied", "symlink loop", "text named .png", "empty .png"]


def mutate(kind: str, valid: str, target: str, number: int, rng: random.Random) -> None:
    """Writes mutation `number` of the input `valid` to `target`: the first few are the
    aimed ones, one each; the rest change bytes (of one file, for images)."""
    aimed = _JSONL_LINES if kind == "jsonl" else _IMAGE_FOLDER_CHANGES
    if kind == "jsonl":
        with open(valid, "rb") as file:
            data = file.read()
        if number < len(aimed):
            lines = data.split(b"\n")
            lines.insert(rng.randrange(len(lines)), _JSONL_LINES[number])
            data = b"\n".join(lines)
        else:
            data = corrupt(data, rng)
        with open(target, "wb") as file:
            file.write(data)
        return
    shutil.copytree(valid, target)
    label = rng.choice(["cat", "dog"])
    files = sorted(os.listdir(os.path.join(target, label)))
    how = _IMAGE_FOLDER_CHANGES[number] if number < len(aimed) else "bytes"
    if how == "bytes":
        path = os.path.join(target, label, rng.choice(files))
        with open(path, "rb") as file:
            data = corrupt(file.read(), rng)
        with open(path, "wb") as file:
            file.write(data)
    elif how == "class emptied":
        for name in files:
            os.unlink(os.path.join(target, label, name))
    elif how == "symlink loop":
        os.symlink(os.path.abspath(target), os.path.join(target, label, "loop"))
    elif how == "text named .png":
        with open(os.path.join(target, label, "notes.png"), "w") as file:
            file.write("not an image")
    else:
        open(os.path.join(target, label, "empty.png"), "wb").close()


def check(kind: str, path: str, out: str, number: int, outcomes: dict[str, int]) -> None:
    from chute_cli._common import EXIT_DATA, CliError
    from chute_cli._convert import run_convert
    from chute_cli._inputs import open_input
    from chute_core import ChuteError

    def unexpected(stage: str, what: str) -> None:
        print(f"UNEXPECTED {number} {stage}: {what}", flush=True)

    def clear(stage: str, error: CliError | ChuteError) -> bool:
        code = error.code if isinstance(error, CliError) else EXIT_DATA
        if code != EXIT_DATA or os.path.basename(path) not in str(error):
            what = f"CliError (exit {code})" if isinstance(error, CliError) else repr(error)
            unexpected(stage, f"{what} not naming the input: {error}")
            return False
        return True

    try:
        opened = open_input(path, kind)
        records = opened.source.__getitems__(list(range(len(opened.source))))
        assert len(records) == len(opened.source)
        outcomes["read"] += 1
    except (CliError, ChuteError) as error:
        outcomes["read error"] += clear("read", error)
    except Exception as error:
        unexpected("read", f"{type(error).__module__}.{type(error).__name__}: {error}")
    args = argparse.Namespace(
        src=path,
        dst=out,
        shards=None,
        records_per_shard=None,
        format=kind,
        verify_samples=8,
        overwrite=True,
        quiet=True,
    )
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            code = run_convert(args)
        if code != 0:
            unexpected("convert", f"exit code {code}")
        outcomes["converted"] += 1
    except CliError as error:
        outcomes["convert error"] += clear("convert", error)
    except Exception as error:
        unexpected("convert", f"{type(error).__module__}.{type(error).__name__}: {error}")


def main() -> None:
    kind, seed, count, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(seed)
    valid = write_valid(kind, folder, rng)
    outcomes = {"read": 0, "read error": 0, "converted": 0, "convert error": 0}
    check(kind, valid, os.path.join(folder, "out", "valid"), -1, outcomes)
    if outcomes != {"read": 1, "read error": 0, "converted": 1, "convert error": 0}:
        raise SystemExit(f"the valid input did not convert: {outcomes}")
    outcomes = dict.fromkeys(outcomes, 0)
    for number in range(count):
        target = os.path.join(folder, f"mutated-{number}{os.path.splitext(valid)[1]}")
        mutate(kind, valid, target, number, rng)
        check(kind, target, os.path.join(folder, "out", "mutated"), number, outcomes)
        if os.path.isdir(target):
            shutil.rmtree(target)
        else:
            os.unlink(target)
    print(f"OUTCOMES {json.dumps(outcomes)}", flush=True)


if __name__ == "__main__":
    main()
