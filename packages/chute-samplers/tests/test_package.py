import doctest
import importlib
import inspect
import json
import pkgutil

import pytest

import chute_samplers

MODULES = [chute_samplers] + [
    importlib.import_module(f"chute_samplers.{info.name}")
    for info in pkgutil.iter_modules(chute_samplers.__path__)
]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_docstring_examples_run(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


def test_all_is_sorted_and_every_name_exists():
    names = chute_samplers.__all__
    assert names == sorted(names)
    assert all(hasattr(chute_samplers, name) for name in names)


@pytest.mark.parametrize("name", chute_samplers.__all__)
def test_every_public_class_has_a_docstring_example(name):
    obj = getattr(chute_samplers, name)
    if isinstance(obj, type) or inspect.isfunction(obj):
        assert "Example:" in (obj.__doc__ or ""), name


def test_modules_stay_small():
    for module in MODULES[1:]:
        with open(module.__file__) as f:
            assert sum(1 for _ in f) < 330, module.__name__


def test_states_are_json():
    it = iter(chute_samplers.IndexSampler(3, 1))
    next(it)
    assert json.loads(json.dumps(it.get_state())) == it.get_state()
