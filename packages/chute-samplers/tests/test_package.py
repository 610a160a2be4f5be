"""Package-wide checks specific to the samplers (the shared conventions are checked in
tests/test_package_conventions.py for every layer; doctests run via --doctest-modules)."""

import json

import chute_samplers


def test_states_are_json():
    it = iter(chute_samplers.IndexSampler(3, 1))
    next(it)
    assert json.loads(json.dumps(it.get_state())) == it.get_state()
