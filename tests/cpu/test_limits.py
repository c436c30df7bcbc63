"""Limits: a tiny working_memory floors at one row a tile; huge or infinite values refused or capped where
they enter (minkowski's p, ktruss's k, vertex ids in pairs, an overflowing default V); a damaged kernel cache
is rebuilt, not fatal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import oracle

from semiring import graph, tiling
from semiring.distances import pairwise_distances

ROOT = Path(__file__).resolve().parents[2]
TRIANGLE = sp.csr_matrix(np.array([[0, 1, 1], [1, 0, 1], [1, 1, 0]], dtype=float))


@pytest.mark.parametrize("budget", [0, 1, 7, 8 * 499])
def test_a_tiny_budget_floors_at_one_row(budget):
    assert tiling.tile_shape(1000, 500, 8, budget) == (1, 500)
    assert tiling.tile_shape(1000, 500, 8, budget, min_rows=100)[1] >= 5  # a row's worth of entries a tile


def test_a_tiny_working_memory_still_gives_the_right_answer():
    X = sp.random(40, 30, density=0.3, format="csr", random_state=1)
    got = pairwise_distances(X, metric="cityblock", backend="cpu", working_memory=1e-300)
    np.testing.assert_allclose(got, oracle("cityblock", X.toarray(), X.toarray()), rtol=1e-12)


def test_a_huge_working_memory_is_one_tile_in_every_entry():
    """working_memory=1e308 MiB: int() of its bytes overflowed (OverflowError) in the driver's budget, the
    chunked generator's band height and the CLI's memory check; now the largest any machine has, and right."""
    from semiring.distances import NearestNeighbors, pairwise_distances_chunked

    X = sp.random(40, 30, density=0.3, format="csr", random_state=2)
    want = oracle("cityblock", X.toarray(), X.toarray())
    got = pairwise_distances(X, metric="cityblock", backend="cpu", working_memory=1e308)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    chunks = list(pairwise_distances_chunked(X, metric="cityblock", backend="cpu", working_memory=1e308))
    assert len(chunks) == 1
    np.testing.assert_allclose(chunks[0], want, rtol=1e-12)
    nn = NearestNeighbors(n_neighbors=3, metric="cityblock", backend="cpu", working_memory=1e308).fit(X)
    dist, _ = nn.kneighbors()
    np.fill_diagonal(want, np.inf)
    np.testing.assert_allclose(dist, np.sort(want, axis=1)[:, :3], rtol=1e-12)
    from semiring.cli import commands as cli

    assert cli._tiles_bytes("cpu", 1e308, 1000) == 16_000  # the command's memory check: what the entries need


def test_two_hop_working_memory_follows_the_one_rule_and_a_huge_one_is_one_block():
    """two_hop_similarity's working_memory: inf was taken and 1e308 overflowed the block size (OverflowError)."""
    for bad in (float("inf"), float("nan"), 0.0):
        with pytest.raises(ValueError, match="working_memory must be > 0 and finite"):
            graph.two_hop_similarity(TRIANGLE, working_memory=bad, backend="cpu")
    first, second, value = graph.two_hop_similarity(TRIANGLE, working_memory=1e308, backend="cpu")
    assert (first.tolist(), second.tolist()) == ([0, 0, 1], [1, 2, 2])
    np.testing.assert_allclose(value, [1 / 3] * 3)  # each pair shares one of the three vertices


@pytest.mark.parametrize("p", [1025.0, 1e308, np.float64(1e20)])
def test_a_minkowski_p_beyond_the_cap_is_refused(p):
    with pytest.raises(ValueError, match=r"p must be > 0 and <= 1024, or inf .*overflows float64"):
        pairwise_distances(TRIANGLE, metric="minkowski", p=p, backend="cpu")


def test_minkowski_p_inf_is_still_chebyshev():
    got = pairwise_distances(TRIANGLE, metric="minkowski", p=np.inf, backend="cpu")
    np.testing.assert_array_equal(got, oracle("chebyshev", TRIANGLE.toarray(), TRIANGLE.toarray()))


@pytest.mark.parametrize("k", [2**62, 2**63, 2**70, np.uint64(2**64 - 1)])
def test_a_huge_ktruss_k_gives_the_empty_graph(k):
    """k beyond int64 reached the kernel as an OverflowError; every k above n gives the empty graph."""
    assert graph.ktruss(TRIANGLE, k, backend="cpu").nnz == 0
    assert graph.ktruss(TRIANGLE, 3, backend="cpu").nnz == 6


@pytest.mark.parametrize(
    "pairs, match",
    [
        ([[0, 2**63]], r"vertex ids in \[0, 3\), found 0..9.22337e\+18"),
        ([[0, 2**64 - 1]], r"vertex ids in \[0, 3\), found 0..1.84467e\+19"),
        (np.array([[0, 1e300]]), r"vertex ids in \[0, 3\), found 0..1e\+300"),
        ([[0, 2**70]], "integer vertex ids below 3"),
        ([[0, float("nan")]], "fractions or NaN"),
        (np.array([[0, np.inf]]), "fractions or NaN|found 0..inf"),
    ],
)
def test_vertex_ids_beyond_int64_are_refused_as_given_not_wrapped(pairs, match):
    """Ids of 2**63 or 1e300 were wrapped to -2**63 by the int64 cast before their check (and named so)."""
    with pytest.raises((ValueError, TypeError), match=match):
        graph.jaccard(TRIANGLE, pairs=pairs, backend="cpu")


def test_an_overflowing_default_variance_is_named():
    X = np.array([[1e200, 2e200, 1.0], [3e200, 0.0, 2.0], [1.0, 2.0, 3.0]])
    with pytest.raises(ValueError, match="column 0's variance overflows float64 .*pass V="):
        pairwise_distances(X, metric="seuclidean", backend="cpu")


_CHILD = """
import numpy as np, scipy.sparse as sp, semiring
sr = semiring.Semiring(semiring.monoid.plus, semiring.binary_op("x * y + 0.75 * x * y", name="damaged_cache_probe"))
X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 1.0]]))
print(bool(np.allclose(semiring.pairwise(X, X, sr, backend="cpu"), 1.75 * (X @ X.T).toarray())))
"""


def _child(cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(SEMIRING_CACHE_DIR=str(cache), PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", _CHILD], check=False, env=env, capture_output=True, text=True, timeout=600
    )


def test_a_damaged_kernel_cache_is_rebuilt_not_fatal(tmp_path):
    """Numba's cache files overwritten with garbage, then the generated module itself: each run recompiles what
    it cannot read and answers right (an UnpicklingError, then a UnicodeDecodeError, ended the call before)."""
    first = _child(tmp_path)
    assert first.stdout.strip() == "True", first.stderr
    cached = list(tmp_path.rglob("*.nb[ic]"))
    assert cached, "numba wrote no cache files"
    for f in cached:
        f.write_bytes(os.urandom(24))
    second = _child(tmp_path)
    assert second.returncode == 0 and second.stdout.strip() == "True", second.stderr
    for module in tmp_path.glob("cpu/*.py"):
        module.write_bytes(b"\xff\xfe not python")
    third = _child(tmp_path)
    assert third.returncode == 0 and third.stdout.strip() == "True", third.stderr
