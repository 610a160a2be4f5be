import json
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from chute_cli._bench_plot import check_plot_path, write_plot
from chute_cli._common import CliError

PIPELINE = textwrap.dedent(
    """
    import numpy as np
    import chute

    def square(x):
        return np.full((4,), x * x, np.int64)

    def make():
        return chute.MapDataset.range(10_000).to_iter_dataset().map(square).batch(8)
    """
)
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "pipe.py").write_text(PIPELINE)
    return tmp_path


def svg_texts(path):
    """The texts of an SVG (it must parse as XML), with runs of spaces as one."""
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return [" ".join("".join(node.itertext()).split()) for node in root.iter(f"{SVG}text")]


def test_bench_plot_writes_an_svg_naming_every_stage_and_the_input_wait(run_chute, workdir):
    pytest.importorskip("matplotlib")
    result = run_chute("bench", "pipe:make", "--batches", "50", "--plot", "stages.svg", cwd=workdir)
    assert result.returncode == 0, result.stderr
    assert "chart: stages.svg (time per stage and input wait)" in result.stdout.splitlines()
    texts = svg_texts(workdir / "stages.svg")
    stages = ["to_iter_dataset()", "map(fn=square)", "batch(batch_size=8, drop_remainder=False)"]
    assert set(stages) <= set(texts), texts
    assert "consumer's input wait (in next())" in texts
    assert "chute bench pipe:make: 50 batches in" in " ".join(texts)
    shares = [text for text in texts if text.endswith(" s)") and "%" in text]
    assert len(shares) == len(stages) + 1, texts  # One figure per bar.


def test_bench_plot_png_and_json_report_the_chart_and_the_input_wait(run_chute, workdir):
    pytest.importorskip("matplotlib")
    args = ["bench", "pipe:make", "--batches", "20", "--json", "--plot", "stages.png"]
    result = run_chute(*args, cwd=workdir)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)  # Nothing but the JSON object on stdout.
    assert report["plot"] == "stages.png"
    assert 0 < report["input_wait_seconds"] <= report["seconds"]
    assert (workdir / "stages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_plot_refuses_a_format_it_cannot_write_before_running(run_chute, workdir):
    result = run_chute("bench", "pipe:make", "--plot", "stages.pdf", cwd=workdir)
    assert result.returncode == 2
    assert result.stderr == (
        "chute bench: error: --plot: 'stages.pdf' must end in .svg or .png (the chart's format)\n"
    )
    assert not result.stdout


def test_plot_path_in_a_missing_folder_is_refused(tmp_path):
    with pytest.raises(CliError, match=r"no folder .*nowhere.* to write 'stages.svg' in") as error:
        check_plot_path(str(tmp_path / "nowhere" / "stages.svg"))
    assert error.value.code == 2


def test_without_matplotlib_plot_names_the_extra_to_install(monkeypatch, tmp_path):
    for name in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails.
    expected = "--plot needs matplotlib, which is not installed: pip install 'chute-cli[plot]'"
    with pytest.raises(CliError, match=expected.replace("[", r"\[").replace("]", r"\]")):
        check_plot_path(str(tmp_path / "stages.svg"))
    result = {"target": "t:f", "seconds": 1.0, "elements": 1, "stages": []}
    with pytest.raises(CliError, match="pip install 'chute-cli"):
        write_plot(result, str(tmp_path / "stages.svg"))
    assert not list(tmp_path.iterdir())
