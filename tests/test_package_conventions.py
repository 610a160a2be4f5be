"""Conventions every layer keeps (STYLE.md): checked for all packages in one place."""

import importlib
import inspect
import pkgutil
import subprocess
import sys

import pytest

PACKAGES = [
    "chute_sources",
    "chute_samplers",
    "chute_transforms",
    "chute_execution",
    "chute_device",
    "chute_checkpoint",
    "chute",
]
BELOW_DEVICE = ["chute_sources", "chute_samplers", "chute_transforms", "chute_execution"]
MAX_LINES = 500


def _modules(name):
    package = importlib.import_module(name)
    return [package] + [
        importlib.import_module(f"{name}.{info.name}")
        for info in pkgutil.iter_modules(package.__path__)
    ]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_explicit_sorted_and_complete(name):
    package = importlib.import_module(name)
    names = package.__all__
    assert names == sorted(names)
    missing = [n for n in names if not hasattr(package, n)]
    assert missing == []


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_class_and_function_has_an_example(name):
    package = importlib.import_module(name)
    lacking = [
        public
        for public in package.__all__
        if (inspect.isclass(obj := getattr(package, public)) or inspect.isfunction(obj))
        and "Example" not in (obj.__doc__ or "")
    ]
    assert lacking == []


@pytest.mark.parametrize("name", PACKAGES)
def test_modules_stay_small(name):
    large = []
    for module in _modules(name):
        with open(module.__file__) as file:
            lines = sum(1 for _ in file)
        if lines > MAX_LINES:
            large.append((module.__name__, lines))
    assert large == []


@pytest.mark.parametrize("name", BELOW_DEVICE)
def test_layers_below_the_device_layer_never_import_jax(name):
    code = f"import sys, {name}; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
