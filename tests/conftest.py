"""Test settings: one hypothesis profile for the whole suite (HYPOTHESIS_EXAMPLES overrides)."""

import os

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
