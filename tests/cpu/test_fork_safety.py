"""Fork after a call (issue 12, item 7): a multiprocessing fork pool gets results or a clear error, never a hang.

Each case runs in a fresh process (the threading layer is chosen once per process): the parent computes cosine
distances, then a fork pool computes them again in its workers.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = """
import multiprocessing as mp, numpy as np, scipy.sparse as sp
from scipy.spatial.distance import cdist
from semiring.distances import pairwise_distances
X = sp.random(30, 12, density=0.5, format="csr", random_state=0)
want = cdist(X.toarray(), X.toarray(), "cosine")

def work(i):
    return pairwise_distances(X, metric="cosine")

assert np.allclose(pairwise_distances(X, metric="cosine"), want)
with mp.get_context("fork").Pool(2) as pool:
    try:
        results = pool.map(work, range(3))
    except RuntimeError as exc:
        print("ERROR", exc)
    else:
        print("OK", all(np.allclose(r, want) for r in results))
"""


def run(env_extra: dict) -> str:
    env = {**os.environ, **env_extra}
    try:
        out = subprocess.run(
            [sys.executable, "-c", CHILD], check=False, env=env, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a fork pool after a call hung")
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def test_fork_pool_after_a_call_gives_results_or_a_clear_error():
    line = run({})
    import numba

    if line.startswith("ERROR"):  # GNU OpenMP: refused, naming the ways out
        assert "forked after the CPU engine had run on GNU OpenMP" in line and "spawn" in line and "tbb" in line
    else:  # TBB (or Intel OpenMP): the workers compute
        assert line == "OK True", line
    assert numba.config.THREADING_LAYER == "default"  # the library leaves numba's choice to the user


def test_fork_pool_after_a_call_computes_on_the_workqueue_layer():
    assert run({"NUMBA_THREADING_LAYER": "workqueue"}) == "OK True"
