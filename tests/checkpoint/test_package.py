"""The layer stays cheap to import, and asks JAX about processes only when JAX is loaded."""

import subprocess
import sys


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
