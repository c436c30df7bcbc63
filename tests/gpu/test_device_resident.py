"""CuPy in, CuPy out, nothing through the host: every public entry on CuPy input (marked ``gpu``).

Each call runs under :class:`HostCopyGuard`, which records every device-to-host
copy of more than ``LIMIT`` elements that Python code asks for
(``cupy.ndarray.get``, ``cupy.asnumpy``, ``cupyx.scipy.sparse`` ``.get``):
validation, preparation, the product, the top-k and the results must all stay
on the GPU.  Scalars (a reduction's verdict, a row pointer's last entry) may
come back.  The results are then checked, off the guard, against the CPU
engine on host copies and the float64 oracles.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_device_resident.py``.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import assert_neighbors_up_to_ties, oracle
from strategies import dense, random_graph, weighted_graph

import semiring
from semiring import distances, graph
from semiring.distances.specs import DISTANCES

LIMIT = 64  # elements: more than any scalar verdict or row-pointer pair, far less than any input or result


class HostCopyGuard:
    """Records device-to-host copies of more than ``LIMIT`` elements made while it is active (this thread).

    CuPy's arrays are extension types whose methods cannot be patched, so the
    guard is a profile hook: every Python-level call of ``cupy.ndarray.get``
    (seen as a C call of the bound method), ``cupy.asnumpy`` and a
    ``cupyx.scipy.sparse`` matrix's ``get`` is inspected for the size it moves.
    """

    def __init__(self):
        import cupy

        self.cupy = cupy
        self.copies: list[str] = []

    def _size(self, obj) -> int:
        if isinstance(obj, self.cupy.ndarray):
            return obj.size
        data = getattr(obj, "data", None)  # a cupyx.scipy.sparse matrix: its values and indices move
        return data.size if isinstance(data, self.cupy.ndarray) else 0

    def _profile(self, frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", "") in ("get", "tolist", "__array__"):
            owner = getattr(arg, "__self__", None)
            if isinstance(owner, self.cupy.ndarray) and owner.size > LIMIT:
                self.copies.append(f"ndarray.{arg.__name__} of {owner.size} elements from {_caller(frame)}")
        elif event == "call" and frame.f_code.co_name in ("asnumpy", "get"):
            module = frame.f_globals.get("__name__", "")
            if module.startswith(("cupy", "cupyx")):
                obj = frame.f_locals.get("a", frame.f_locals.get("self"))
                if self._size(obj) > LIMIT:
                    self.copies.append(f"{module}.{frame.f_code.co_name} of {self._size(obj)} from {_caller(frame)}")

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)
        return False


def _caller(frame) -> str:
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("cupy", "cupyx")):
        frame = frame.f_back
    return "?" if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def on_device(fn, *args, **kw):
    """``fn(*args, **kw)`` under the guard; fails naming every large copy to the host it made."""
    with HostCopyGuard() as guard:
        result = fn(*args, **kw)
    assert not guard.copies, "device-to-host copies: " + "; ".join(guard.copies)
    return result


def to_gpu(A):
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix(A)


def host(a):
    return a.get()


def test_the_guard_sees_a_copy():
    """The check can fail: a large ``.get()``, ``cupy.asnumpy`` and a sparse ``.get()`` are all caught."""
    import cupy

    big = cupy.arange(10_000, dtype=np.float64)
    for copy in (lambda: big.get(), lambda: cupy.asnumpy(big), lambda: to_gpu(sp.eye(500, format="csr")).get()):
        with HostCopyGuard() as guard:
            copy()
        assert guard.copies, "the guard missed a copy"
    with HostCopyGuard() as guard:
        int(big.sum()), float(big[3])  # scalars are allowed
    assert not guard.copies


# --------------------------------------------------------------------------- inputs


def data(seed: int = 0, m: int = 300, n: int = 60, dtype=np.float64) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = sp.random(m, n, density=0.15, format="csr", random_state=rng, dtype=dtype)
    X.data = (np.round(X.data * 6) + 1).astype(dtype)
    X[7] = 0  # an empty row
    X.eliminate_zeros()
    return X


# --------------------------------------------------------------------------- semiring.pairwise


@pytest.mark.parametrize("sr", ["plus_times", "min_plus", "max_times"])
def test_pairwise_dense_and_masked(sr):
    import cupy
    import cupyx.scipy.sparse as csp

    X, Y = data(1), data(2, m=120)
    got = on_device(semiring.pairwise, to_gpu(X), to_gpu(Y), sr)
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(host(got), semiring.pairwise(X, Y, sr, backend="cpu"), rtol=1e-12)
    M = sp.random(300, 120, density=0.05, format="csr", random_state=3)
    got = on_device(semiring.pairwise, to_gpu(X), to_gpu(Y), sr, mask=to_gpu(M))
    assert isinstance(got, csp.csr_matrix)
    want = semiring.pairwise(X, Y, sr, mask=M, backend="cpu")
    np.testing.assert_array_equal(host(got.indptr), want.indptr)
    np.testing.assert_array_equal(host(got.indices), want.indices)
    np.testing.assert_allclose(host(got.data), want.data, rtol=1e-12)


def test_pairwise_small_working_memory_stays_on_device():
    X = data(4)
    got = on_device(semiring.pairwise, to_gpu(X), None, "plus_times", working_memory=0.01)
    np.testing.assert_allclose(host(got), (X @ X.T).toarray(), rtol=1e-12)


# --------------------------------------------------------------------------- pairwise_distances, every measure


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_measure_on_device(name, dtype):
    import cupy

    X, Y = data(5, dtype=dtype), data(6, m=90, dtype=dtype)
    got = on_device(distances.pairwise_distances, to_gpu(X), to_gpu(Y), metric=name)
    assert isinstance(got, cupy.ndarray) and got.dtype == dtype
    tol = {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-7, "atol": 1e-9}
    want = oracle(name, dense(X), dense(Y))
    np.testing.assert_allclose(host(got), want, equal_nan=True, **tol)


def test_input_forms_on_device_equal_scipy_input():
    """Dense CuPy arrays, CSC, COO, duplicates and unsorted indices are canonicalised on the device."""
    import cupy
    import cupyx.scipy.sparse as csp

    X = data(8)
    want = distances.pairwise_distances(X, metric="cityblock", backend="cpu")
    coo = X.tocoo()
    dup = sp.coo_matrix(  # every entry split in two halves: duplicates to be summed
        (np.concatenate([coo.data / 2, coo.data / 2]), (np.tile(coo.row, 2), np.tile(coo.col, 2))), shape=X.shape
    )
    unsorted = X.copy()
    for r in range(X.shape[0]):
        a, b = unsorted.indptr[r], unsorted.indptr[r + 1]
        unsorted.indices[a:b], unsorted.data[a:b] = unsorted.indices[a:b][::-1], unsorted.data[a:b][::-1]
    unsorted.has_sorted_indices = False
    forms = {
        "dense": cupy.asarray(X.toarray()),
        "csc": csp.csc_matrix(X.tocsc()),
        "coo": csp.coo_matrix(coo),
        "duplicates": csp.coo_matrix(dup),
        "unsorted": csp.csr_matrix(
            (cupy.asarray(unsorted.data), cupy.asarray(unsorted.indices), cupy.asarray(unsorted.indptr)),
            shape=X.shape,
        ),
        "integers": cupy.asarray(X.toarray().astype(np.int64)),
    }
    for form, A in forms.items():
        got = on_device(distances.pairwise_distances, A, metric="cityblock")
        np.testing.assert_allclose(host(got), want, rtol=1e-12, err_msg=form)


def test_bad_cupy_input_refused_with_the_host_messages():
    import cupy
    import cupyx.scipy.sparse as csp

    X = data(9)
    bad = X.copy()
    bad.data[3] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        distances.pairwise_distances(to_gpu(bad))
    bad.data[3] = np.inf
    with pytest.raises(ValueError, match="X contains infinity"):
        distances.pairwise_distances(to_gpu(bad))
    with pytest.raises(ValueError, match="X contains negative values"):
        distances.pairwise_distances(to_gpu(-X), metric="jensenshannon")
    with pytest.raises(ValueError, match="same number of columns"):
        distances.pairwise_distances(to_gpu(X), to_gpu(X[:, :10]))
    with pytest.raises(ValueError, match="must be 2-D"):
        distances.pairwise_distances(cupy.arange(5.0))
    broken = csp.csr_matrix(X)
    broken.indices[0] = 10_000  # out of range: would read out of bounds in a kernel
    with pytest.raises(ValueError, match=r"column indices must lie in \[0, 60\)"):
        distances.pairwise_distances(broken)


# --------------------------------------------------------------------------- NearestNeighbors


@pytest.mark.parametrize("metric", ["cosine", "cityblock", "jensenshannon"])
def test_nearest_neighbors_fit_and_query_on_device(metric):
    import cupy
    import cupyx.scipy.sparse as csp

    X, Q = data(10, m=400), data(11, m=70)
    spec = distances.get_metric(metric)
    nn = on_device(distances.NearestNeighbors(5, metric=metric).fit, to_gpu(X))
    for query, exclude in ((to_gpu(Q), False), (None, True)):
        d, i = on_device(nn.kneighbors, query)
        assert isinstance(d, cupy.ndarray) and isinstance(i, cupy.ndarray) and i.dtype == np.int64
        D = oracle(metric, dense(Q if query is not None else X), dense(X))
        assert_neighbors_up_to_ties(host(d), host(i), D, 5, largest=spec.similarity, exclude_self=exclude, rtol=1e-9)
        G = on_device(nn.kneighbors_graph, query, mode="distance")
        assert isinstance(G, csp.csr_matrix)
        np.testing.assert_array_equal(host(G.indices).reshape(-1, 5), host(i))
        np.testing.assert_allclose(host(G.data).reshape(-1, 5), host(d))
        check_radius_on_device(nn, query, D, spec.similarity, exclude)
    small = distances.NearestNeighbors(5, metric=metric, working_memory=0.01).fit(to_gpu(X))
    d, i = on_device(small.kneighbors, to_gpu(Q))  # tiles of a few rows, merged into the selection on the device
    assert_neighbors_up_to_ties(host(d), host(i), oracle(metric, dense(Q), dense(X)), 5, largest=spec.similarity)


def check_radius_on_device(nn, query, D, similarity: bool, exclude_self: bool):
    """``radius_neighbors_graph`` and ``radius_neighbors`` stay on the GPU and find the oracle's pairs within a
    radius that about a tenth of the pairs satisfy (membership checked away from the radius itself)."""
    import cupy
    import cupyx.scipy.sparse as csp

    radius = float(np.nanquantile(D, 0.9 if similarity else 0.1))
    R = on_device(nn.radius_neighbors_graph, query, radius, mode="distance")
    assert isinstance(R, csp.csr_matrix)
    found = R.get().tocoo()
    inside = (D >= radius) if similarity else (D <= radius)  # NaN is never within
    if exclude_self:
        np.fill_diagonal(inside, False)
    mine = np.zeros_like(inside)
    mine[found.row, found.col] = True
    near = np.isclose(D, radius, rtol=1e-9, atol=1e-12)
    assert inside.any() and not ((mine != inside) & ~near).any()
    np.testing.assert_allclose(found.data, D[found.row, found.col], rtol=1e-9, atol=1e-12)
    dist, ind = nn.radius_neighbors(query, radius)  # not guarded: its row pointer comes to the host to cut rows
    assert all(isinstance(a, cupy.ndarray) for a in (*dist, *ind)) and ind.size == D.shape[0]
    np.testing.assert_array_equal(np.concatenate([host(a) for a in ind]), found.col)
    np.testing.assert_allclose(np.concatenate([host(a) for a in dist]), found.data)


def test_scipy_index_gpu_queries_and_back():
    """A SciPy index queried with CuPy rows gives CuPy; a CuPy index queried with SciPy rows gives NumPy."""
    import cupy

    X, Q = data(12, m=200), data(13, m=30)
    d, i = distances.NearestNeighbors(3, metric="euclidean").fit(X).kneighbors(to_gpu(Q))
    assert isinstance(d, cupy.ndarray)
    d2, i2 = distances.NearestNeighbors(3, metric="euclidean").fit(to_gpu(X)).kneighbors(Q)
    assert isinstance(d2, np.ndarray)
    np.testing.assert_array_equal(host(i), i2)


# --------------------------------------------------------------------------- graph measures


@pytest.fixture(scope="module")
def graphs():
    A = random_graph(300, 1500, seed=1)
    W = weighted_graph(200, 900, seed=2)
    return A, W


GRAPH_CALLS = {
    "jaccard": lambda A, W, b: graph.jaccard(A, backend=b),
    "sorensen": lambda A, W, b: graph.sorensen(A, backend=b),
    "overlap": lambda A, W, b: graph.overlap(A, backend=b),
    "cosine": lambda A, W, b: graph.cosine(A, backend=b),
    "weighted-jaccard": lambda A, W, b: graph.jaccard(W, weighted=True, backend=b),
    "scan": lambda A, W, b: graph.scan_similarity(A, backend=b),
    "common-neighbors": lambda A, W, b: graph.common_neighbors(A, backend=b),
    "triangles-edge": lambda A, W, b: graph.triangle_count(A, per="edge", backend=b),
    "triangles-vertex": lambda A, W, b: graph.triangle_count(A, per="vertex", backend=b),
    "triangles-total": lambda A, W, b: graph.triangle_count(A, per="total", backend=b),
    "ktruss": lambda A, W, b: graph.ktruss(A, 4, backend=b),
    "truss-decomposition": lambda A, W, b: graph.truss_decomposition(A, backend=b),
}


@pytest.mark.parametrize("name", list(GRAPH_CALLS))
def test_graph_measures_on_device(graphs, name):
    import cupy
    import cupyx.scipy.sparse as csp

    A, W = graphs
    call = GRAPH_CALLS[name]
    got = on_device(call, to_gpu(A), to_gpu(W), "cuda")
    want = call(A, W, "cpu")
    if sp.issparse(want):
        assert isinstance(got, csp.csr_matrix)
        np.testing.assert_allclose(host(got).toarray(), want.toarray(), rtol=1e-12)
    elif isinstance(want, np.ndarray):
        assert isinstance(got, cupy.ndarray)
        np.testing.assert_allclose(host(got), want, rtol=1e-12)
    else:
        assert got == want


def test_graph_pairs_and_normalize_on_device(graphs):
    import cupy

    A, _ = graphs
    rng = np.random.default_rng(0)
    pairs = rng.integers(0, A.shape[0], size=(500, 2))
    got = on_device(graph.jaccard, to_gpu(A), cupy.asarray(pairs))
    assert isinstance(got, cupy.ndarray)
    np.testing.assert_allclose(host(got), graph.jaccard(A, pairs, backend="cpu"), rtol=1e-12)
    directed = sp.triu(A, format="csr") + sp.eye(A.shape[0], format="csr")  # one direction, and self-loops
    got = on_device(graph.triangle_count, to_gpu(directed), normalize=True)
    assert got == graph.triangle_count(A, backend="cpu")


# --------------------------------------------------------------------------- sparse results


@pytest.mark.parametrize("sr", ["plus_times", "min_plus", "plus_pair", "max_times"])
@pytest.mark.parametrize("memory", [None, 0.01])  # 0.01 MiB: bands of a few rows
def test_sparse_result_on_the_gpu_equals_the_cpu_engines(sr, memory):
    """``sparse=True`` on the GPU: the pattern of pairs sharing a stored column (explicit zeros count) and the
    values, equal to the CPU engine's (itself checked against python-graphblas ``mxm`` in the CPU tier)."""
    import cupyx.scipy.sparse as csp

    X, Y = data(14, m=200), data(15, m=150)
    X.data[::7] = 0.0  # stored zeros: their pairs are produced
    got = on_device(semiring.pairwise, to_gpu(X), to_gpu(Y), sr, sparse=True, working_memory=memory)
    want = semiring.pairwise(X, Y, sr, sparse=True, backend="cpu")
    assert isinstance(got, csp.csr_matrix)
    np.testing.assert_array_equal(host(got.indptr), want.indptr)
    np.testing.assert_array_equal(host(got.indices), want.indices)
    np.testing.assert_allclose(host(got.data), want.data, rtol=1e-12)
    host_in = semiring.pairwise(X, Y, sr, sparse=True, backend="cuda")  # SciPy in, SciPy out
    assert sp.issparse(host_in)
    np.testing.assert_allclose(host_in.toarray(), want.toarray(), rtol=1e-12)
