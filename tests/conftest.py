"""Test settings for every tier: one hypothesis profile (HYPOTHESIS_EXAMPLES overrides) and the GPU marker.

Tiers: ``tests/unit`` (no engine runs: rendering, NVRTC compiles, semantics,
the architecture), ``tests/cpu`` (the CPU engine against the oracles),
``tests/gpu`` (the GPU engine; every test there is marked ``gpu`` and skipped,
with the reason, where the GPU engine cannot run).  Shared: ``oracles.py``
(independent references) and ``strategies.py`` (hypothesis inputs).
"""

import os
import pathlib

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "default",
    max_examples=int(os.environ.get("HYPOTHESIS_EXAMPLES", "40")),
    deadline=None,  # the first call of a kernel includes its numba compile
    # function_scoped_fixture: the GPU tests' strategy fixture only sets an environment variable, the same for every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
settings.load_profile("default")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


GPU_TIER = pathlib.Path(__file__).parent / "gpu"


def pytest_collection_modifyitems(config, items):
    """Mark everything under tests/gpu ``gpu``, and skip what is marked where the GPU engine cannot run."""
    gpu_items = []
    for item in items:
        if GPU_TIER in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.gpu)
        if item.get_closest_marker("gpu"):
            gpu_items.append(item)
    if not gpu_items:
        return
    from semiring import backend

    reason = backend.unavailable_reason("cuda")
    if reason is not None:
        skip = pytest.mark.skip(reason=f"no GPU: {reason}")
        for item in gpu_items:
            item.add_marker(skip)
