import os
import subprocess
import sys

import pytest

from chute._cli import main


def _chute(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute._cli", *args], capture_output=True, text=True, timeout=300
    )


def test_demo_writes_reads_and_checks_every_record(tmp_path):
    result = _chute("demo", "--records", "600", "--shards", "3", "--dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "chute demo: 600 records of (32, 32, 3) uint8 images + labels"
    assert "wrote 3 ArrayRecord files" in lines[1]
    assert any(line.startswith("  read random") and "records/s" in line for line in lines)
    assert lines[-1] == "  checked: all 1,200 records read back equal the ones written"
    assert sorted(os.listdir(tmp_path)) == [f"demo-0000{i}-of-00003.array_record" for i in range(3)]


def test_help_and_version():
    result = _chute("--help")
    assert result.returncode == 0
    assert "demo" in result.stdout
    assert _chute("demo", "--help").stdout.startswith("usage: chute demo")
    assert _chute("--version").stdout.startswith("chute ")


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "usage: chute" in capsys.readouterr().out


def test_bad_arguments_exit_2(capsys):
    assert main(["demo", "--records", "0"]) == 2
    assert "must be positive" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


@pytest.mark.parametrize("command", ["convert", "inspect", "bench", "demo"])
def test_every_command_has_help_with_an_example(command):
    result = subprocess.run(
        [sys.executable, "-m", "chute", command, "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: chute {command}")
    assert "\nexample" in result.stdout
    if command != "demo":
        assert "  130  interrupted (Ctrl-C)" in result.stdout
