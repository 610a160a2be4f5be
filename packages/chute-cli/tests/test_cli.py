import subprocess
import sys

import pytest

from chute_cli import main


def _chute(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chute_cli", *args], capture_output=True, text=True, timeout=300
    )


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
    with pytest.raises(SystemExit) as info:
        main(["demo", "--steps", "0"])
    assert info.value.code == 2
    assert "argument --steps: must be positive, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


@pytest.mark.parametrize("command", ["convert", "inspect", "bench", "demo"])
def test_every_command_has_help_with_an_example(command):
    result = subprocess.run(
        [sys.executable, "-m", "chute_cli", command, "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert result.stdout.startswith(f"usage: chute {command}")
    assert "\nexample" in result.stdout
    if command != "demo":
        assert "  130  interrupted (Ctrl-C)" in result.stdout
