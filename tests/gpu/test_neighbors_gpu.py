"""NearestNeighbors on the GPU engine: the selection kernel, tiles, every measure (marked ``gpu``).

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_neighbors_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import NONNEGATIVE, assert_neighbors_up_to_ties, oracle, reference_knn
from strategies import dense

from semiring import distances
from semiring.distances.specs import DISTANCES


def gpu_knn(X, query, k, metric, **kw):
    nn = distances.NearestNeighbors(k, metric, backend="cuda", verbose=False, **kw).fit(X)
    return nn.kneighbors(query)


# --------------------------------------------------------------------------- the selection itself


@pytest.mark.parametrize("k", [1, 5, 8, 9, 33, 100, 128, 130])  # every list capacity, and the sort beyond 128
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_topk_push_over_tiles_equals_the_stable_sort(k, dtype, largest, exclude_self):
    """Blocks full of ties, NaN and ±inf, pushed in tiles of every width (some narrower than k)."""
    import cupy

    from semiring.kernels.cuda import ENGINE as cuda

    rng = np.random.default_rng(k)
    m, n = 70, 300
    D = rng.choice(np.array([0.0, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf, 0.5]), size=(m, n)).astype(dtype)
    D[3] = np.nan  # a row of NaN only: ordered by index
    want_d, want_i = reference_knn(D[:, :n], k, largest=largest, exclude_self=exclude_self)
    for width in (3, 64, n):
        selection = cuda.topk_init(m, k, dtype)
        for c0 in range(0, n, width):
            block = cupy.asarray(D[:, c0 : c0 + width])
            cuda.topk_push(block, c0, 0 if exclude_self else -1, largest, selection)
        got_d, got_i = (a.get() for a in cuda.topk_finish(selection, largest, dtype))  # on the device
        np.testing.assert_array_equal(got_i, want_i, err_msg=f"width {width}")
        np.testing.assert_array_equal(got_d, want_d.astype(dtype))


@pytest.mark.parametrize("k", [1, 9, 33, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("largest", [False, True])
@pytest.mark.parametrize("exclude_self", [False, True])
def test_rows_cut_into_segments_equal_the_stable_sort(monkeypatch, k, dtype, largest, exclude_self):
    """Few rows of many candidates: each row cut into segments (a warp each, here forced on small blocks, as
    many as 2 to 300 a row), their lists merged into the running selection, over tiles of every width."""
    import cupy

    from semiring.kernels.cuda import ENGINE as cuda
    from semiring.kernels.cuda import topk

    monkeypatch.setattr(topk, "SEGMENT_MIN_ENTRIES", 1)
    monkeypatch.setattr(topk, "SEGMENT_WARPS_PER_SM", 10**6)
    rng = np.random.default_rng(k + 1)
    m, n = 5, 300
    D = rng.choice(np.array([0.0, 1.0, 2.0, -1.0, np.nan, np.inf, -np.inf, 0.5]), size=(m, n)).astype(dtype)
    D[3] = np.nan
    want_d, want_i = reference_knn(D, k, largest=largest, exclude_self=exclude_self)
    for width in (2, 64, n):
        assert topk.segments(m, width) == width
        selection = cuda.topk_init(m, k, dtype)
        for c0 in range(0, n, width):
            cuda.topk_push(cupy.asarray(D[:, c0 : c0 + width]), c0, 0 if exclude_self else -1, largest, selection)
        got_d, got_i = (a.get() for a in cuda.topk_finish(selection, largest, dtype))
        np.testing.assert_array_equal(got_i, want_i, err_msg=f"width {width}")
        np.testing.assert_array_equal(got_d, want_d.astype(dtype))


@pytest.mark.parametrize("metric", ["cosine", "inner_product", "euclidean"])
def test_segmented_selection_of_fused_measures_matches_the_oracle(monkeypatch, metric):
    """A few queries against many rows, each row's candidates in segments (forced): the fused expansion
    evaluated in the segment kernel, the answers as the float64 reference's up to ties."""
    from semiring.kernels.cuda import topk

    monkeypatch.setattr(topk, "SEGMENT_MIN_ENTRIES", 64)
    X = sp.random(3000, 40, density=0.1, format="csr", random_state=3, dtype=np.float64)
    Q = X[:7].copy()
    assert topk.segments(7, 3000) > 1
    dist, ind = gpu_knn(X, Q, 10, metric)
    D = oracle(metric, Q.toarray(), X.toarray())
    assert_neighbors_up_to_ties(dist, ind, D, 10, largest=distances.get_metric(metric).similarity, rtol=1e-6)


def test_indices_beyond_int32():
    import cupy

    from semiring.kernels.cuda import ENGINE as cuda

    col0 = 3 * 2**31  # an index tile far past int32
    block = cupy.asarray(np.array([[3.0, 1.0, 2.0, 1.0]]))
    selection = cuda.topk_init(1, 3, np.float64)
    cuda.topk_push(block, col0, -1, False, selection)
    d, i = (a.get() for a in cuda.topk_finish(selection, False, np.float64))
    assert i.dtype == np.int64
    np.testing.assert_array_equal(i, [[col0 + 1, col0 + 3, col0 + 2]])
    np.testing.assert_array_equal(d, [[1.0, 1.0, 2.0]])


# --------------------------------------------------------------------------- every measure, end to end


@pytest.mark.parametrize("name", [d.name for d in DISTANCES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_metric_against_float64_oracle(name, dtype):
    rng = np.random.default_rng(7)
    X = sp.random(150, 30, density=0.3, format="csr", random_state=rng)
    X.data = np.round(X.data * 4) + 1  # small integers: exact ties, which must come in index order
    X = X.astype(dtype)
    X[5] = 0  # an empty row (NaN for cosine, hellinger, ...)
    X.eliminate_zeros()
    Q = X[:40].copy()
    Q.data = Q.data + dtype(0.5) * (np.arange(Q.nnz) % 3 == 0)
    spec = distances.get_metric(name)
    params = {"V": np.linspace(0.5, 2.0, X.shape[1])} if name == "seuclidean" else {}  # a V for every column
    tol = {"rtol": 2e-4, "atol": 2e-5} if dtype == np.float32 else {"rtol": 1e-7, "atol": 1e-9}
    for query, exclude in ((Q, False), (None, True)):
        D = oracle(name, dense(Q if query is not None else X), dense(X), **params)
        for memory in (None, 0.01):  # 0.01 MiB: tiles of a few rows against a few dozen index rows
            d, i = gpu_knn(X, query, 7, name, working_memory=memory, metric_params=params or None)
            assert d.dtype == dtype and i.dtype == np.int64
            assert_neighbors_up_to_ties(d, i, D, 7, largest=spec.similarity, exclude_self=exclude, **tol)


@pytest.mark.parametrize("name", ["inner_product", "cityblock", "euclidean", "chebyshev", "jaccard"])
@pytest.mark.parametrize("k", [1, 10, 40, 129])
def test_same_neighbours_as_the_cpu_engine(name, k):
    """Integer data in float64: both engines compute the same exact values, so the same neighbours."""
    rng = np.random.default_rng(k)
    X = sp.random(400, 50, density=0.2, format="csr", random_state=rng)
    X.data = np.round(X.data * 5)  # stored zeros included
    kw = {"n_neighbors": k, "metric": name, "verbose": False}
    for query in (X[:60], None):
        want = distances.NearestNeighbors(**kw, backend="cpu").fit(X).kneighbors(query)
        for memory in (None, 0.05):
            got = distances.NearestNeighbors(**kw, backend="cuda", working_memory=memory).fit(X).kneighbors(query)
            np.testing.assert_array_equal(got[1], want[1], err_msg=f"{name} k={k} memory={memory}")
            np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


def test_matches_scikit_learn_on_the_gpu():
    from sklearn.neighbors import NearestNeighbors as SkNN

    rng = np.random.default_rng(3)
    X = sp.random(2000, 300, density=0.05, format="csr", random_state=rng, dtype=np.float32)
    for metric in ("cosine", "manhattan", "euclidean"):
        sk = SkNN(n_neighbors=10, metric=metric, algorithm="brute").fit(X.astype(np.float64))
        _, i_sk = sk.kneighbors()
        d, i = gpu_knn(X, None, 10, metric, working_memory=1)
        D = distances.pairwise_distances(X.astype(np.float64), metric=metric, backend="cpu")
        assert_neighbors_up_to_ties(d, i, D, 10, exclude_self=True, rtol=1e-4, atol=1e-5)
        same = (i == i_sk).mean()
        assert same > 0.99, f"{metric}: {same:.4f} of the neighbours as scikit-learn's"


def test_fit_takes_cupy_rows_as_users_pass_them():
    """A CuPy CSR matrix and a CuPy dense array fitted as they are (the index owns a copy of the caller's device
    arrays: changing them in place after fit changes no answer); neighbours against SciPy's float64 distances."""
    import cupy
    import cupyx.scipy.sparse as csp
    from scipy.spatial.distance import cdist

    X = sp.random(500, 80, density=0.1, format="csr", random_state=5, dtype=np.float32)
    D = cdist(X.toarray().astype(np.float64), X.toarray().astype(np.float64), "cosine")
    for given in (csp.csr_matrix(X), cupy.asarray(X.toarray())):
        nn = distances.NearestNeighbors(n_neighbors=10, metric="cosine").fit(given)
        d, i = (cupy.asnumpy(a) for a in nn.kneighbors())
        assert_neighbors_up_to_ties(d, i, D, 10, exclude_self=True, rtol=1e-4, atol=1e-5)
        (given.data if hasattr(given, "indptr") else given)[...] = 1  # the caller's arrays changed in place
        d2, i2 = (cupy.asnumpy(a) for a in nn.kneighbors())
        np.testing.assert_array_equal(i2, i)
        np.testing.assert_array_equal(d2, d)


def test_peak_memory_within_working_memory_plus_inputs_and_outputs():
    import cupy

    rng = np.random.default_rng(0)
    X = sp.random(20_000, 5_000, density=0.01, format="csr", random_state=rng, dtype=np.float32)
    budget_mib = 64
    pool = cupy.get_default_memory_pool()
    gpu_knn(X[:100], None, 10, "cosine")  # compile outside the measurement
    pool.free_all_blocks()
    hook = _PeakHook()
    with hook:
        d, i = gpu_knn(X, None, 10, "cosine", working_memory=budget_mib)
    inputs = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    outputs = d.nbytes + i.nbytes
    assert hook.peak <= budget_mib * 2**20 + 3 * inputs + 2 * outputs, (hook.peak / 2**20, inputs / 2**20)


class _PeakHook:
    """Bytes taken from CuPy's pool at once (what the code holds, not what the pool caches)."""

    def __init__(self):
        import cupy

        outer = self

        class Hook(cupy.cuda.MemoryHook):
            name = "peak"

            def malloc_postprocess(self, **kw):
                outer.live += kw["mem_size"]
                outer.peak = max(outer.peak, outer.live)

            def free_postprocess(self, **kw):
                outer.live -= kw["mem_size"]

        self.live = self.peak = 0
        self._hook = Hook()

    def __enter__(self):
        self._hook.__enter__()
        return self

    def __exit__(self, *exc):
        return self._hook.__exit__(*exc)


def test_nonnegative_measures_refuse_negative_queries():
    X = sp.random(20, 5, density=0.5, format="csr", random_state=0)
    for name in sorted(NONNEGATIVE):
        nn = distances.NearestNeighbors(2, name, backend="cuda").fit(X)
        with pytest.raises(ValueError, match="X contains negative values"):
            nn.kneighbors(-X)


@pytest.mark.parametrize("metric", ["cosine", "euclidean", "inner_product", "cityblock", "kldivergence"])
def test_all_pairs_once_on_the_gpu(metric, monkeypatch):
    """The GPU engine's all-pairs top-k with each pair computed once (``all_pairs_once``, the default; set
    here so the test holds whatever the default): the blocks above the diagonal pushed transposed to the other rows' selections, Expansions
    included (the selection kernel expands the terms with the two sides' norms exchanged), in batches of a
    tiny working memory; the same neighbours as the float64 reference, ties allowed."""
    from semiring.kernels.cuda import ENGINE as cuda

    monkeypatch.setattr(cuda, "all_pairs_once", True)
    rng = np.random.default_rng(11)
    X = sp.random(300, 50, density=0.2, format="csr", random_state=rng)
    spec = distances.get_metric(metric)
    D = oracle(metric, dense(X), dense(X))
    for query, exclude in ((None, True), (X, False)):
        nn = distances.NearestNeighbors(6, metric, backend="cuda", verbose=False, working_memory=0.05).fit(X)
        dist, ind = nn.kneighbors(query)
        assert_neighbors_up_to_ties(dist, ind, D, 6, largest=spec.similarity, exclude_self=exclude, rtol=1e-9)


@pytest.mark.parametrize("metric", ["cosine", "euclidean", "inner_product", "cityblock"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_two_blocks_select_each_other_from_one_pass_on_the_gpu(metric, dtype):
    """The Dask all-pairs part of one pair of shards on the GPU engine: rows A against a model fitted on rows B
    give A's k best among B and B's among A from one pass, Expansions included (the selection kernel reads
    the terms transposed with the norms exchanged), in tiles of a tiny working memory; k beyond A's rows."""
    from semiring.distances import neighbors

    rng = np.random.default_rng(5)
    X = sp.random(9 + 400, 50, density=0.2, format="csr", random_state=rng, dtype=dtype)
    A, B = X[:9], X[9:]
    spec = distances.get_metric(metric)
    model = distances.NearestNeighbors(12, metric, backend="cuda", verbose=False, working_memory=0.02).fit(B)
    (da_, ia), (db, ib) = neighbors._shard_kneighbors_both(model, A, 12, 1000, 500)
    D = oracle(metric, dense(A), dense(B))
    tol = {"rtol": 1e-4, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-12}
    assert da_.dtype == dtype and ib.shape == (400, 9)
    assert_neighbors_up_to_ties(da_, ia - 1000, D, 12, largest=spec.similarity, **tol)
    assert_neighbors_up_to_ties(db, ib - 500, D.T, 9, largest=spec.similarity, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_transposed_columns_equal_numpy(dtype):
    """The GPU engine's transposed columns (shared-memory squares) against NumPy's, on shapes no multiple of 32,
    at column offsets, empty sides; other types take CuPy's copy."""
    import cupy

    from semiring.kernels.cuda import ENGINE as cuda

    rng = np.random.default_rng(3)
    for m, n, c0, c1 in (
        (1, 1, 0, 1),
        (33, 70, 5, 70),
        (100, 257, 31, 200),
        (64, 64, 0, 64),
        (0, 9, 2, 5),
        (7, 9, 4, 4),
    ):
        a = (rng.random((m, n)) * 100).astype(dtype)
        got = cuda.transposed_columns(cupy.asarray(a), c0, c1)
        assert got.flags.c_contiguous and got.dtype == dtype and got.shape == (c1 - c0, m)
        np.testing.assert_array_equal(got.get(), a[:, c0:c1].T)
