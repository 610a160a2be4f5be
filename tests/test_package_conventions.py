"""Conventions every layer keeps (STYLE.md): checked for all packages in one place."""

import ast
import importlib
import inspect
import pathlib
import pkgutil
import subprocess
import sys

import pytest

PACKAGES = [
    "chute_core",
    "chute_sources",
    "chute_samplers",
    "chute_transforms",
    "chute_execution",
    "chute_device",
    "chute_checkpoint",
    "chute",
    "chute_cli",
    "chute_testing",
]
BELOW_DEVICE = [
    "chute_core",
    "chute_sources",
    "chute_samplers",
    "chute_transforms",
    "chute_execution",
]
MAX_LINES = 500


def _modules(name):
    package = importlib.import_module(name)
    return [package] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}.")
    ]


REPO = pathlib.Path(__file__).resolve().parent.parent


def _owner(path):
    """The root package a file belongs to (its tests included), or None.

    The top-level tests test the whole product, the meta-package `chute`.
    """
    parts = path.relative_to(REPO).parts
    if parts[0] == "packages":
        return parts[1].replace("-", "_")
    return "chute" if parts[0] == "tests" else None


def _private_imports(path):
    """`(line, module)` of each import of a private `chute_x._y` module in `path`."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            root, *rest = name.split(".")
            if root in PACKAGES and rest and rest[0].startswith("_"):
                found.append((node.lineno, name))
                break
    return found


def test_tests_and_benchmarks_use_only_public_names_of_other_packages():
    """What the import-linter contract says for sources, here for tests and benchmarks.

    A test of `chute_sources` may import `chute_sources._shm`; a test of any other
    package and the benchmarks may not (the top-level tests are the meta-package's).
    """
    offenders = []
    for folder in ("packages", "tests", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if any(part.endswith("venv") for part in path.parts) or "/src/" in str(path):
                continue
            owner = _owner(path)
            for line, module in _private_imports(path):
                if module.split(".")[0] != owner:
                    offenders.append(f"{path.relative_to(REPO)}:{line}: {module}")
    assert offenders == []


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
