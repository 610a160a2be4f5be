"""Test-wide setup: eight simulated CPU devices for the device-layer tests.

Set before anything imports jax, so every test sees `jax.devices()` of 8 (CPU) devices,
as on a host with 8 accelerators. Code under test never depends on this count.
"""

import os

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}".strip()
