"""Every code block of the READMEs and the documentation site runs, or says why not.

A page's blocks run in order, in one fresh folder, the way a reader would type them:

- ```python blocks run in this process, each in a namespace of its own, with the working
  directory on `sys.path`. A block with a `title="name.py"` is also written to that file
  in the working directory first, for later blocks and commands to import.
- ```bash blocks run in `bash` with `set -eo pipefail`, with this environment's `chute`
  and `python` first on PATH; `uv run CMD` runs CMD from this environment (what `uv run`
  does in a synced checkout). The working directory carries over from one bash block to
  the next, so a `cd` holds for the rest of the page.
- A ```text block right after one of these (blank lines between, nothing else) is what
  the block prints (stdout, and stderr for bash), and must match it.
- In a python block, a comment after a `print(...)` call (on the line that closes it) is
  what that call prints, and must match it: `print(x.shape)  # (8, 4, 4)`. Runs of
  whitespace (newlines too) count as one space, and `...` in the comment stands for any
  text. So a comment there is always output; put prose on the line above the call.

Any other block (JSON, a command too long or too invasive for the test suite, the output
of such a command) is marked on the line before it with an HTML comment, which the site
does not show: `<!-- docs-test skip: REASON -->`. A marked run block's output block is
skipped with it. An unmarked block the test does not run fails
`test_every_block_runs_or_says_why_not`.

Paths under `/tmp/` in blocks are moved into the test's folder, and printed paths are
moved back before comparing. Printed output is compared line by line after `_normalise`,
which replaces figures that differ from run to run (times, rates, shares of time, the
CPU count in a suggested configuration) and nothing else; runs of spaces count as two,
since column widths follow the figures. A line that chute cut at 100 characters
(ending in `...)`) is compared up to its first absolute path, because the test's folder
is longer than /tmp and the cut falls elsewhere.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import dataclasses
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "packages").glob("*/README.md")),
    *sorted((ROOT / "docs" / "pages").rglob("*.md")),
]
RUN = {"python", "bash"}
OUTPUT = "text"
_FENCE = re.compile(r"^```(\S*)(.*)$")
_SKIP = re.compile(r"^<!-- docs-test skip: (.*\S.*) -->$")
_TITLE = re.compile(r'\btitle="([^"]+)"')

# Blocks not run, that a page cannot mark (keyed by page and the start of the SHA-256 of
# the block's text). An entry for no unmarked block fails the test, so it cannot go stale.
NOT_RUN_ELSEWHERE: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, from 1
    lang: str
    info: str  # the fence's info string after the language
    code: str
    skip: str | None  # the reason in the marker before it
    follows_block: bool  # only blank lines since the previous block's closing fence

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()[:12]


def parse(text: str, page: str) -> list[Block]:
    """The fenced blocks of a Markdown text, with their markers."""
    lines = text.splitlines()
    blocks: list[Block] = []
    number, last_close = 0, -1
    while number < len(lines):
        fence = _FENCE.match(lines[number])
        if not fence:
            number += 1
            continue
        start = number
        number += 1
        while number < len(lines) and lines[number].rstrip() != "```":
            number += 1
        if number == len(lines):
            raise AssertionError(f"{page}:{start + 1}: the block has no closing ```")
        before = [line for line in lines[last_close + 1 : start] if line.strip()]
        skip = _SKIP.match(before[-1].strip()) if before else None
        blocks.append(
            Block(
                page=page,
                line=start + 1,
                lang=fence.group(1),
                info=fence.group(2).strip(),
                code="".join(line + "\n" for line in lines[start + 1 : number]),
                skip=skip.group(1) if skip else None,
                follows_block=bool(blocks) and not before,
            )
        )
        last_close = number
        number += 1
    markers = [n + 1 for n, line in enumerate(lines) if line.startswith("<!-- docs-test")]
    marked = {b.line for b in blocks if b.skip}
    for marker in markers:
        after = next((n for n in range(marker, len(lines)) if lines[n].strip()), None)
        if after is None or (after + 1) not in marked:
            raise AssertionError(
                f"{page}:{marker}: a docs-test marker must be the line before a block, as "
                "'<!-- docs-test skip: REASON -->'"
            )
    return blocks


def plan(blocks: list[Block]) -> list[tuple[Block, Block | None]]:
    """The blocks to run, each with the output block that shows what it prints."""
    steps: list[tuple[Block, Block | None]] = []
    for number, block in enumerate(blocks):
        if block.lang in RUN and not block.skip:
            after = blocks[number + 1] if number + 1 < len(blocks) else None
            shown = after if after and after.lang == OUTPUT and after.follows_block else None
            steps.append((block, shown))
    return steps


def unaccounted(blocks: list[Block]) -> list[Block]:
    """Blocks that neither run, nor show a run block's output, nor are marked."""
    accounted = {id(b) for step in plan(blocks) for b in step if b is not None}
    for number, block in enumerate(blocks[1:], start=1):
        previous = blocks[number - 1]
        if block.lang == OUTPUT and block.follows_block and previous.skip:
            accounted.add(id(block))  # The output of a marked block.
    return [b for b in blocks if id(b) not in accounted and not b.skip]


# --- comparing printed output ------------------------------------------------------------

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_VARYING = [
    # Durations and rates: "in 4.60 s", "23,101.5 us", "34.2 batches/s", "2,175 elements/s".
    (re.compile(rf"{_NUMBER}(?= (?:s|ms|us)\b)"), "<time>"),
    (re.compile(rf"{_NUMBER}(?= (?:batches|elements|steps)/s\b)"), "<rate>"),
    # Shares of the time: "74%".
    (re.compile(r"\d+(?:\.\d+)?%"), "<share>"),
    # `chute bench`'s stage table: the seconds and elem/s columns.
    (
        re.compile(rf"^(  \S.*?) +(\d+) +{_NUMBER} +{_NUMBER} +<share>$", re.MULTILINE),
        r"\1 \2 <time> <rate> <share>",
    ),
    # The suggested worker count is the machine's CPU count.
    (re.compile(r"(= chute\.MultiprocessingOptions\(num_workers=)\d+"), r"\1<cpus>"),
]


def _normalise(text: str) -> list[str]:
    """The lines of `text`, with the figures that vary between runs replaced."""
    for pattern, replacement in _VARYING:
        text = pattern.sub(replacement, text)
    lines = [re.sub(r" {2,}", "  ", line.rstrip()) for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _same_line(shown: str, printed: str) -> bool:
    # chute cuts a source's repr at 100 characters ("...)"). The test's folder is longer
    # than /tmp, so the cut falls elsewhere: such lines are compared up to the first path.
    if shown.endswith("...)") and printed.endswith("...)") and "'/" in shown:
        return shown.split("'/")[0] == printed.split("'/")[0]
    return shown == printed


def assert_prints(shown: Block, printed: str, folder: Path) -> None:
    printed = printed.replace(f"{folder}/", "/tmp/").replace(str(folder), "/tmp")
    expected, got = _normalise(shown.code), _normalise(printed)
    if len(expected) != len(got) or not all(map(_same_line, expected, got)):
        raise AssertionError(
            f"{shown.where}: the block above it prints something else (compared after "
            "normalising times, rates and shares)\n--- shown\n"
            + "\n".join(expected)
            + "\n--- printed\n"
            + "\n".join(got)
            + "\n--- printed, as is\n"
            + printed
        )


# --- running a page ----------------------------------------------------------------------

_UV = """uv() {
    [ "$1" = run ] || { echo "docs test: only 'uv run' runs here" >&2; return 2; }
    shift
    while [ "${1#--}" != "$1" ]; do shift; done
    "$@"
}
"""


def print_comments(code: str) -> dict[int, str]:
    """The comments after `print(...)` calls, by the lines of the call (from 1).

    Example: `print(x)  # [1 2]` on line 3 gives `{3: "[1 2]"}`.
    """
    comments = {
        token.start[0]: token.string[1:].strip()
        for token in tokenize.generate_tokens(io.StringIO(code).readline)
        if token.type == tokenize.COMMENT
    }
    found = {}
    for node in ast.walk(ast.parse(code)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
            and node.end_lineno in comments
        ):
            for line in range(node.lineno, node.end_lineno + 1):
                found[line] = comments[node.end_lineno]
    return found


def _same_as_comment(comment: str, printed: str) -> bool:
    """Whether `printed` is what `comment` shows (whitespace runs as one, `...` as any)."""
    wanted, got = " ".join(comment.split()), " ".join(printed.split())
    pattern = ".*".join(re.escape(part.strip()) for part in wanted.split("..."))
    return re.fullmatch(rf"\s*{pattern}\s*", got) is not None


def checking_print(block: Block, comments: dict[int, str]) -> Callable[..., None]:
    """A `print` that also checks what each call prints against the comment after it."""

    def print_and_check(*args: Any, **kwargs: Any) -> None:
        caller = sys._getframe(1)
        comment = comments.get(caller.f_lineno)
        if caller.f_code.co_filename != block.where or comment is None:
            builtins.print(*args, **kwargs)
            return
        text = io.StringIO()
        builtins.print(*args, **{**kwargs, "file": text})
        builtins.print(text.getvalue(), end="", file=kwargs.get("file"))
        if not _same_as_comment(comment, text.getvalue()):
            raise AssertionError(
                f"{block.page}:{block.line + caller.f_lineno}: print(...) printed "
                f"{text.getvalue().rstrip()!r} but the comment after it shows {comment!r}"
            )

    return print_and_check


def _run_python(block: Block, code: str, cwd: Path) -> str:
    title = _TITLE.search(block.info)
    if title:
        (cwd / title.group(1)).write_text(code, encoding="utf-8")
    out = io.StringIO()
    namespace = {
        "__name__": "__docs_example__",
        "print": checking_print(block, print_comments(code)),
    }
    with contextlib.redirect_stdout(out):
        exec(compile(code, block.where, "exec"), namespace)
    return out.getvalue()


def _run_bash(block: Block, code: str, cwd: Path, cwd_file: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CHUTE_TRACEBACK", "COLUMNS")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    script = f"set -eo pipefail\ntrap 'pwd > \"{cwd_file}\"' EXIT\n{_UV}{code}"
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise AssertionError(f"{block.where}: exit code {done.returncode}\n{done.stdout}")
    return done.stdout


def run_page(blocks: list[Block], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Examples may write files with `tempfile` or under /tmp; keep them in the folder.
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    cwd, cwd_file = folder, folder / ".docs-test-cwd"
    try:
        for block, shown in plan(blocks):
            code = block.code.replace("/tmp/", f"{folder}/")
            monkeypatch.chdir(cwd)
            if block.lang == "python":
                # As in `python` started there: modules in the folder are importable.
                monkeypatch.syspath_prepend(str(cwd))
                printed = _run_python(block, code, cwd)
            else:
                printed = _run_bash(block, code, cwd, cwd_file)
                cwd = Path(cwd_file.read_text().strip())
            if shown is not None:
                assert_prints(shown, printed, folder)
    finally:
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(f"{folder}/"):
                del sys.modules[name]


def _pages(*, exempt: bool = True) -> dict[str, list[Block]]:
    found = {}
    for path in PAGES:
        name = path.relative_to(ROOT).as_posix()
        blocks = parse(path.read_text(encoding="utf-8"), name)
        if exempt:
            blocks = [
                dataclasses.replace(b, skip=NOT_RUN_ELSEWHERE.get((name, b.digest), b.skip))
                for b in blocks
            ]
        found[name] = blocks
    return found


@pytest.mark.parametrize("page", [name for name, blocks in _pages().items() if plan(blocks)])
def test_page_examples_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(_pages()[page], tmp_path, monkeypatch)


def test_every_block_runs_or_says_why_not() -> None:
    pages = _pages()
    missing = [b for blocks in pages.values() for b in unaccounted(blocks)]
    assert not missing, "blocks that the test does not run, unmarked:\n" + "\n".join(
        f"  {b.where} ```{b.lang} (mark it '<!-- docs-test skip: REASON -->' if it cannot run)"
        for b in missing
    )
    unmarked = {
        (b.page, b.digest) for blocks in _pages(exempt=False).values() for b in blocks if not b.skip
    }
    stale = sorted(set(NOT_RUN_ELSEWHERE) - unmarked)
    assert not stale, f"NOT_RUN_ELSEWHERE entries for no unmarked block (delete them): {stale}"


def test_docs_run_bash_and_compare_outputs() -> None:
    pages = _pages()
    steps = [step for blocks in pages.values() for step in plan(blocks)]
    assert {"README.md", "docs/pages/guides/command-line.md"} <= {b.page for b, _ in steps}
    assert sum(1 for b, shown in steps if b.lang == "bash" and shown) >= 8
    assert sum(1 for b, shown in steps if b.lang == "python" and shown) >= 2


# --- the harness itself --------------------------------------------------------------------

_SAMPLE = """\
Prose.

```bash
echo hi
```

```text
hi
```

<!-- docs-test skip: needs a GPU -->
```bash
nvidia-smi
```

```text
a table
```

```json
{"a": 1}
```

Prose.

```text
not after a block
```
"""


def test_harness_pairs_outputs_and_reports_unmarked_blocks() -> None:
    blocks = parse(_SAMPLE, "x.md")
    assert [(b.lang, b.line, b.skip, b.follows_block) for b in blocks] == [
        ("bash", 3, None, False),
        ("text", 7, None, True),
        ("bash", 12, "needs a GPU", False),
        ("text", 16, None, True),
        ("json", 20, None, True),
        ("text", 26, None, False),
    ]
    assert [(run.line, shown.line if shown else None) for run, shown in plan(blocks)] == [(3, 7)]
    assert [b.line for b in unaccounted(blocks)] == [20, 26]


def test_harness_rejects_a_marker_away_from_a_block() -> None:
    with pytest.raises(AssertionError, match=r"x\.md:1: a docs-test marker must be"):
        parse("<!-- docs-test skip: why -->\n\nProse.\n\n```bash\nls\n```\n", "x.md")


def test_harness_normalises_only_figures_that_vary() -> None:
    shown = (
        "chute bench: m:f (IterDataset), 40 batches in 0.37 s\n"
        "throughput: 109.5 batches/s = 7,010 elements/s (64 elements per batch)\n"
        "  map(fn=augment)                                2560     0.222       11,535    61%\n"
        "  multiprocessing_options = chute.MultiprocessingOptions(num_workers=2, x=8)\n"
    )
    other_run = (
        shown.replace("0.37", "1.02")
        .replace("109.5", "39.2")
        .replace("7,010", "2,509")
        .replace("0.222     11,535    61%", "1.010      2,535    88%")
        .replace("num_workers=2", "num_workers=16")
    )
    assert _normalise(shown) == _normalise(other_run)
    for changed in (
        shown.replace("40 batches", "41 batches"),
        shown.replace("(64 elements", "(63 elements"),
        shown.replace("2560", "2561"),
        shown.replace("x=8", "x=9"),
    ):
        assert _normalise(shown) != _normalise(changed)


def test_harness_checks_the_output_written_after_print() -> None:
    code = "x = [1, 2]\nprint(x)  # [1, 2]\nprint(\n    len(x),\n)  # 2\nprint(x)\n"
    assert print_comments(code) == {2: "[1, 2]", 3: "2", 4: "2", 5: "2"}
    block = Block("x.md", 10, "python", "", code, None, False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, block.where, "exec"), {"print": checking_print(block, {2: "[1, 2]"})})
    assert out.getvalue() == "[1, 2]\n2\n[1, 2]\n"
    assert _same_as_comment("(8, 4) [ 6 51 ...]", "(8, 4) [ 6 51 57\n 26]\n")
    assert _same_as_comment("... belongs to filter: ...", "MapDataset.map: belongs to filter: x")
    stale = Block("x.md", 10, "python", "", "print([3, 1])  # [1, 3]\n", None, False)
    with pytest.raises(AssertionError, match=r"^x\.md:11: print\(\.\.\.\) printed '\[3, 1\]' but"):
        _run_python(stale, stale.code, Path())


def test_harness_compares_output(tmp_path: Path) -> None:
    block = Block("x.md", 3, "text", "", "records: 10\n", None, True)
    assert_prints(block, "records: 10\n\n", tmp_path)
    with pytest.raises(AssertionError, match=r"x\.md:3: the block above it prints something"):
        assert_prints(block, "records: 11\n", tmp_path)
