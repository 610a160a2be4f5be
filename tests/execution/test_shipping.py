"""What travels to worker processes by value, by reference, or not at all.

pytest imports this module by file name (importlib mode): a worker cannot import it,
so the functions and classes below reach workers by value, as a notebook's would.
"""

import importlib.util
import multiprocessing
import os
import pickle
import socket
import sys
import threading

import pytest

import chute
from chute_execution import (
    MultiprocessingOptions,
    ShippingError,
    WorkerDiedError,
    importable_in_workers,
    ship,
    unship,
)

TWO = MultiprocessingOptions(num_workers=2)


class Tagged(chute.MapTransform):
    """A transform class defined where no worker can import it."""

    def __init__(self, tag):
        self.tag = tag

    def map(self, element):
        return (self.tag, element)


class Pair:
    """A record class: elements made of it come back as this very class."""

    def __init__(self, a, b):
        self.a, self.b = a, b

    def __eq__(self, other):
        return type(other) is Pair and (self.a, self.b) == (other.a, other.b)


def test_importable_modules_are_told_apart_from_the_others(tmp_path):
    assert importable_in_workers("json")
    assert importable_in_workers("chute_execution._shipping")
    assert not importable_in_workers("__main__")
    assert not importable_in_workers("no_such_module_anywhere")
    path = tmp_path / "loaded_by_path.py"
    path.write_text("def f(x):\n    return x + 1\n")
    spec = importlib.util.spec_from_file_location("loaded_by_path", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["loaded_by_path"] = module
    try:
        spec.loader.exec_module(module)
        assert not importable_in_workers("loaded_by_path")  # Not on sys.path.
        sys.path.insert(0, str(tmp_path))
        try:
            assert importable_in_workers("loaded_by_path")  # Now a worker finds it.
        finally:
            sys.path.remove(str(tmp_path))
        assert not importable_in_workers("loaded_by_path")  # Answers follow `sys.path`...
        sys.path.insert(0, str(tmp_path))
        try:
            assert importable_in_workers("loaded_by_path")
            (tmp_path / "elsewhere").mkdir()
            moved = tmp_path / "elsewhere" / "loaded_by_path.py"
            moved.write_text(path.read_text())
            spec = importlib.util.spec_from_file_location("loaded_by_path", moved)
            sys.modules["loaded_by_path"] = importlib.util.module_from_spec(spec)
            assert not importable_in_workers("loaded_by_path")  # ... and the module.
        finally:
            sys.path.remove(str(tmp_path))
    finally:
        del sys.modules["loaded_by_path"]


def test_importable_code_travels_by_reference_the_rest_by_value():
    by_reference = ship(os.path.join)
    assert pickle.loads(by_reference) == (os.path.join, [])
    scale = 3
    closure = ship(lambda x: x * scale)
    assert b"cloudpickle" in closure  # Its code travels, not its name.
    assert unship(closure)(14) == 42
    assert unship(ship(Tagged("t"))).map(1) == ("t", 1)


def test_cell_defined_code_runs_in_workers_as_it_does_in_this_process():
    offset = 100
    ds = (
        chute.MapDataset.range(40)
        .seed(3)
        .to_iter_dataset()
        .map(lambda x: x + offset)  # A lambda closing over a local.
        .map(Tagged("a"))  # An instance of a class defined here.
        .random_map(lambda element, rng: (*element, int(rng.integers(1000))))
        .map(lambda element: Pair(element[1], element[2]))
    )
    expected = list(ds)
    assert [p.a for p in expected] == list(range(100, 140))
    got = list(ds.mp_prefetch(TWO, chunk_size=4))
    assert got == expected
    assert all(type(p) is Pair for p in got)  # This module's class, not a copy.


def _lock_holder():
    return Tagged({"lock": threading.Lock()})


@pytest.mark.parametrize(
    ("make_stage", "stage", "path", "kind", "reason"),
    [
        (_lock_holder, "map(fn=Tagged)", ".tag['lock']", "_thread.lock", "cannot pickle"),
        (
            lambda: lambda x, source=(i for i in range(3)): x,
            "map(fn=<lambda>)",
            ".__defaults__[0]",
            "builtins.generator",
            "cannot pickle 'generator' object",
        ),
    ],
)
def test_what_cannot_travel_is_refused_before_any_worker_starts(
    make_stage, stage, path, kind, reason
):
    ds = chute.MapDataset.range(8).to_iter_dataset().map(make_stage()).mp_prefetch(TWO)
    before = multiprocessing.active_children()
    with pytest.raises(ShippingError) as caught:
        iter(ds)
    assert str(caught.value).startswith(
        f"mp_prefetch: {stage} cannot be sent to worker processes: its {path} is a {kind}, "
        f"which cannot be pickled (TypeError: {reason}"
    )
    assert "create it in the worker instead" in str(caught.value)
    # No worker started (an earlier test's stopped workers may still be exiting).
    assert set(multiprocessing.active_children()) <= set(before)


def test_an_open_file_and_a_socket_are_refused_naming_where_they_are(tmp_path):
    handle = open(tmp_path / "data.txt", "w")  # noqa: SIM115
    connection = socket.socket()
    try:

        def read(x):
            return handle.name, x

        ds = chute.MapDataset.range(4).to_iter_dataset().map(read).mp_prefetch(TWO)
        with pytest.raises(ShippingError, match=r"^mp_prefetch: map\(fn=read\) cannot be sent"):
            iter(ds)
        # A closure variable: the path names it.
        with pytest.raises(ShippingError, match=r"its \.<closure variable handle> is a _io\."):
            iter(ds)
        source = chute.MapDataset.source([connection, connection]).to_iter_dataset()
        with pytest.raises(
            ShippingError,
            match=r"^mp_prefetch: to_iter_dataset\(\) cannot be sent to worker processes: its "
            r"\._sequence\[0\] is a socket\.socket",
        ):
            iter(source.mp_prefetch(TWO))
    finally:
        handle.close()
        connection.close()


def test_the_data_loader_names_itself_and_its_operations():
    sampler = chute.IndexSampler(8, shard_options=chute.NoSharding(), num_epochs=1)
    loader = chute.DataLoader(
        data_source=chute.RangeSource(8),
        sampler=sampler,
        operations=[Tagged("x"), _lock_holder()],
        worker_count=2,
    )
    with pytest.raises(
        ShippingError,
        match=r"^DataLoader\(worker_count=2\): operations\[1\] \(Tagged\) cannot be sent to "
        r"worker processes: its \.tag\['lock'\] is a _thread\.lock",
    ):
        iter(loader)
    with pytest.raises(ValueError, match=r"^DataLoader: worker_count must be >= 0, got -1\.$"):
        chute.DataLoader(data_source=chute.RangeSource(8), sampler=sampler, worker_count=-1)


def test_a_worker_that_cannot_load_the_plan_raises_its_own_error_from_next(tmp_path):
    (tmp_path / "vanishing_module.py").write_text("def plus_one(x):\n    return x + 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        from vanishing_module import plus_one  # Importable here: it travels by reference.

        # A worker forked from here would hold the module already: the fork server's
        # workers import it afresh.
        options = MultiprocessingOptions(num_workers=2, start_method="forkserver")
        ds = chute.MapDataset.range(8).to_iter_dataset().map(plus_one).mp_prefetch(options)
        it = iter(ds)
        (tmp_path / "vanishing_module.py").unlink()  # Gone before the workers start.
        with pytest.raises(ModuleNotFoundError, match="No module named 'vanishing_module'") as e:
            next(it)
        notes = "\n".join(e.value.__notes__)
        assert "chute: worker 0 could not load the pipeline sent to it" in notes
        assert "chute: raised while starting worker 0:" in notes
        assert "Traceback (most recent call last)" in notes  # The worker's own traceback.
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("vanishing_module", None)


def _exit_with_3(x):
    if x == 5:
        os._exit(3)
    return x


def test_a_worker_that_exits_is_not_said_to_have_run_out_of_memory():
    ds = chute.MapDataset.range(8).to_iter_dataset().map(_exit_with_3)
    it = iter(ds.mp_prefetch(TWO, chunk_size=4))
    with pytest.raises(WorkerDiedError) as caught:
        list(it)
    message = str(caught.value)
    assert message.startswith("mp_prefetch: chute worker 1 (pid ")
    assert "exited with code 3 while running chunk 1" in message
    assert "memory" not in message
    assert "Its own error output (above, on stderr) says why" in message


class _FussyFinder:
    """A meta-path finder like asv's: `target` is required, and it raises for others."""

    def find_spec(self, fullname, path, target):
        raise RuntimeError("not mine")


def test_a_finder_that_cannot_answer_is_passed_over():
    sys.meta_path.insert(0, _FussyFinder())
    try:
        assert importable_in_workers("chute_execution._shipping")
        assert unship(ship(os.path.join)) is os.path.join
    finally:
        del sys.meta_path[0]


def test_importable_answers_follow_the_package_path_the_finders_and_the_file(tmp_path):
    """The answers are kept between calls, but not past a change a new import would see."""
    package = tmp_path / "kept_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module("kept_pkg.sub")
        assert importable_in_workers("kept_pkg.sub")
        other = tmp_path / "other"
        other.mkdir()
        (other / "sub.py").write_text("X = 2\n")
        sys.modules["kept_pkg"].__path__.insert(0, str(other))  # Another sub.py first.
        assert not importable_in_workers("kept_pkg.sub")
        sys.modules["kept_pkg"].__path__.pop(0)
        assert importable_in_workers("kept_pkg.sub")

        class Elsewhere:  # A finder that would send a new import somewhere else.
            @staticmethod
            def find_spec(name, path, target=None):
                if name == "kept_pkg.sub":
                    return importlib.util.spec_from_file_location(name, other / "sub.py")
                return None

        sys.meta_path.insert(0, Elsewhere)
        try:
            assert not importable_in_workers("kept_pkg.sub")
        finally:
            sys.meta_path.remove(Elsewhere)
        assert importable_in_workers("kept_pkg.sub")
        (package / "sub.py").unlink()  # Its file gone: a worker could not import it.
        assert not importable_in_workers("kept_pkg.sub")
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("kept_pkg.sub", "kept_pkg"):
            sys.modules.pop(name, None)
