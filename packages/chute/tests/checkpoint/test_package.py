"""The layer stays cheap to import, and asks JAX about processes only when JAX is loaded."""

import subprocess
import sys
import types

import chute
from chute_checkpoint import make_document
from chute_checkpoint._format import process_position


def test_importing_chute_and_the_checkpoint_layer_loads_neither_jax_nor_orbax():
    code = (
        "import sys, chute, chute_checkpoint\n"
        "chute_checkpoint.save, chute.checkpoint.restore\n"
        "print('jax' in sys.modules, 'orbax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_orbax_names_load_orbax_on_first_use():
    code = "import sys, chute\nchute.checkpoint.CheckpointSave\nprint('orbax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"]


def test_the_process_comes_from_jax_when_it_is_imported(monkeypatch):
    fake = types.SimpleNamespace(process_index=lambda: 3, process_count=lambda: 4)
    monkeypatch.setitem(sys.modules, "jax", fake)
    assert process_position() == (3, 4)
    assert process_position(1, None) == (1, 4)
    it = iter(chute.MapDataset.range(3).to_iter_dataset())
    assert make_document(it)["process_index"] == 3
    monkeypatch.delitem(sys.modules, "jax")
    assert process_position() == (0, 1)
