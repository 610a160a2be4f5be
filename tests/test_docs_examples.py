"""Every ```python block of the README and the documentation site runs as written."""

import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "pages").rglob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _examples() -> list:
    params = []
    for page in PAGES:
        name = page.relative_to(ROOT).as_posix()
        for number, block in enumerate(_BLOCK.findall(page.read_text(encoding="utf-8"))):
            params.append(pytest.param(name, block, id=f"{name}[{number}]"))
    return params


def test_docs_have_python_examples():
    pages = {param.values[0] for param in _examples()}
    assert {"README.md", "docs/pages/concepts/sources.md"} <= pages


@pytest.mark.parametrize(("page", "code"), _examples())
def test_docs_python_example_runs(page, code, tmp_path, monkeypatch):
    # Examples may write files with `tempfile` or under /tmp; keep them in this test's folder.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    code = code.replace('"/tmp/', f'"{tmp_path}/')
    exec(compile(code, page, "exec"), {"__name__": "__docs_example__"})
