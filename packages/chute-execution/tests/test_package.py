import doctest
import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

import chute_execution

MODULES = [chute_execution] + [
    importlib.import_module(f"chute_execution.{info.name}")
    for info in pkgutil.iter_modules(chute_execution.__path__)
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_all_is_sorted_and_every_name_exists():
    names = chute_execution.__all__
    assert names == sorted(names)
    assert all(hasattr(chute_execution, name) for name in names)


@pytest.mark.parametrize("name", chute_execution.__all__)
def test_every_public_class_has_a_docstring_example(name):
    obj = getattr(chute_execution, name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert "Example:" in (obj.__doc__ or ""), name


def test_modules_stay_small():
    for module in MODULES[1:]:
        with open(module.__file__) as f:
            assert sum(1 for _ in f) < 330, module.__name__


def test_importing_the_layer_does_not_import_jax():
    code = "import sys, chute_execution; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
