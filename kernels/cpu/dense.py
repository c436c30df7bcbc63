"""Dense blocks on the CPU engine: BLAS for dot products, a tiled dense kernel for unions.

Dense input (an embedding, an image, most tabular data) reaches the engine as
CSR with every entry stored.  Where a block is dense enough, walking its
entries one by one loses to reading it as a dense array:

* **intersection ``plus_times``** (the products of the expanded measures:
  euclidean, sqeuclidean, cosine, correlation, inner product, dice, jaccard's
  binary rows...) — the block's rows densified in float64 (the engine's
  accumulation type, whatever the result's) and multiplied by NumPy's BLAS
  (``X @ Y.T``), when ``density(X) · density(Y) ≥ BLAS_MIN_DENSITY_PRODUCT``
  (the sparse kernels' work is about that share of the dense product's);
  the measure's expansion and its exact recomputation of cancelling entries
  (``Refinement``) follow on the product as for the sparse kernels.  A
  float32 result of float32 rows (a measure's expansion of the product, not
  the product itself) is multiplied in float32 instead (``float32_blocks``:
  sgemm, twice dgemm's rate, as scikit-learn multiplies float32 rows; in
  tiles, each of the engine's threads calling BLAS on its own), each
  entry known to within ``FLOAT32_ERROR`` · √n · 2⁻²⁴ · ‖x‖‖y‖ (and n · 2⁻¹²⁶
  where products underflow); the engine's
  kernel expands it and recomputes in float64, from the rows, every entry
  whose expansion that uncertainty could move by more than
  ``FLOAT32_TOLERANCE`` of its value (a cancelling entry: near-identical
  directions for cosine, near-duplicates for euclidean; or one that
  overflowed float32), so those stay as exact as the float64 path's;
* **unions** (cityblock, chebyshev, minkowski, canberra, hamming, braycurtis's
  terms, any semiring whose multiply does not annihilate; a column in neither
  row adds ``0 ⊗ 0``, neutral by construction, ``semiring.ops``) —
  ``dense_template.tiled_kernel``:
  every column visited, Y transposed so the innermost loop runs over
  independent accumulators (vectorised), a tile of Y held in cache while every
  row of X passes, in float64; when ``density(X) + density(Y) ≥
  UNION_MIN_DENSITY_SUM`` (a merge of two rows reads both).

The choice is made from the densities of the call's whole inputs, which the
call sets (``semiring.interfaces.CALL_DENSITY``: ``pairwise_distances``,
``NearestNeighbors``' queries and ``semiring.pairwise`` do), so every tile of
a call takes the same path and results do not depend on the tiling beyond
rounding (the paths sum in different orders; the sparse kernels sum each
pair in column order whatever the tile, bit for bit, while BLAS's own order
depends on the block's shape, so a value may differ in its last bits).  A block outside such a call
(the engine called directly, the graph engine's masked products) takes the
sparse kernels.  ``SEMIRING_CPU_DENSE`` = ``"never"`` or ``"always"`` forces it
(tests run both ways).  The BLAS runs on NumPy's BLAS threads (which
``threadpoolctl`` limits, as it limits the engine's); the tiled kernel on the
engine's.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import cache

import numpy as np
import scipy.sparse as sp

from semiring import settings, validation
from semiring.interfaces import CALL_DENSITY

from .jit import generate, scalar_source

__all__ = [
    "applies",
    "block_bytes",
    "float32_blocks",
    "multiplies_in_float32",
    "one_blas_thread",
    "pays",
    "product",
    "runs",
]

DENSE_ENV = settings.CPU_DENSE.name
# Where the dense paths pay (benchmarks/dense_bench.py's crossover, 2,000 x 300 random rows, 2 threads,
# benchmarks/results/dense_2core_0b8af6f.json; docs/cpu-engine.md): cosine through BLAS 0.82x the sparse kernels at
# density 0.15 each, 0.99x at 0.2, 1.66x at 0.3; cityblock's tiled kernel 0.64x at 0.2 each, 1.16x at 0.3.  So
# BLAS from density(X) · density(Y) = 0.05 (0.22 each) ...
BLAS_MIN_DENSITY_PRODUCT = 0.05
# ... and the tiled union kernel, which visits every column where a merge reads the stored entries of both rows,
# from density(X) + density(Y) = 0.55.
UNION_MIN_DENSITY_SUM = 0.55
# Columns of Y (transposed) a tile: 128 measured fastest of 32-256 (1,000 x 300 float64 rows: 119 ms, 64: 178 ms).
TILE = 128
# Rows and columns of a float32 product's tile, multiplied by one thread's BLAS and expanded while in cache
# (256 x 256 float32: 256 KiB); against BLAS on both threads over the whole block, then the expansion apart,
# 0.165 against 0.235 s (3,000 x 300 cosine, 2 loaded threads: the pool's spinning threads slowed the pass after
# it) and 2.89 against 3.08 s (8,000 x 768).
FLOAT32_TILE = 256
# A float32 product's error on one entry, against the exact x·y, measured: at most 1.43 · √n · 2⁻²⁴ · ‖x‖‖y‖ over
# uniform, normal, offset (100 + normal) and lognormal rows of 30, 300, 768 and 4,096 columns (1,000 rows each,
# all pairs; OpenBLAS 0.3.31 sgemm, 1 and 2 threads alike), falling as n grows (0.32 at 4,096: BLAS sums in
# several partial sums); Cauchy–Schwarz bounds Σ|x_k y_k| by ‖x‖‖y‖ whatever the signs.  The bound taken, with
# room to spare:
FLOAT32_ERROR = 4.0
# An entry is recomputed from the rows where that uncertainty could move its value by more than this share of
# it: the rest are within half of it (a float32 result's tests compare at 1e-4, tests/oracles.py).
FLOAT32_TOLERANCE = 1e-4


def _forced() -> str:
    return settings.CPU_DENSE.read()


def _is_dot(sr) -> bool:
    return sr.key == _dot_key()


@cache
def _dot_key():
    from semiring.ops import BUILTIN_SEMIRINGS

    return BUILTIN_SEMIRINGS["plus_times"].key


def runs(X: sp.csr_matrix, Y: sp.csr_matrix, sr) -> bool:
    """Whether a dense path can compute the block: ``plus_times`` on finite values, or a union, neither empty."""
    if not (_is_dot(sr) or sr.is_union) or X.shape[1] == 0 or 0 in (X.shape[0], Y.shape[0]):
        return False
    # A dense row reads a missing entry as 0, and 0 × ±inf is NaN where the intersection has none.
    return not _is_dot(sr) or all_finite(X, Y)


def all_finite(X: sp.csr_matrix, Y: sp.csr_matrix) -> bool:
    """Whether every value of X and Y is finite: what validation proved of them (``validation.Facts``), else
    found."""
    return validation.all_hold("finite", _finite_values, (X, X.data), (Y, Y.data))


def _finite_values(*values) -> bool:
    return all(bool(np.isfinite(v).all()) for v in values)


def pays(sr) -> bool:
    """Whether the call's whole inputs (``CALL_DENSITY``) are dense enough for the dense path of ``sr``: so every
    tile of a call takes the same path; a block outside a call that declared its inputs takes the sparse
    kernels, as it always had."""
    whole = CALL_DENSITY.get()
    if whole is None:
        return False
    dx, dy = whole
    return dx * dy >= BLAS_MIN_DENSITY_PRODUCT if _is_dot(sr) else dx + dy >= UNION_MIN_DENSITY_SUM


def applies(X: sp.csr_matrix, Y: sp.csr_matrix, sr) -> bool:
    """Whether the block ``X`` × ``Y`` takes a dense path (see the module docstring): it ``runs``, and
    ``$SEMIRING_CPU_DENSE`` forces it or (``auto``) it ``pays`` (the engine's strategies ask the same, one part
    at a time)."""
    if not runs(X, Y, sr):
        return False
    forced = _forced()
    return forced == "always" if forced != "auto" else pays(sr)


def product(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype) -> np.ndarray:
    """The dense ``(m, p)`` product of the block (``applies`` holds), in ``out_dtype``."""
    if _is_dot(sr):
        Xd = densified(X).astype(np.float64, copy=False)
        Yd = Xd if Y is X else densified(Y).astype(np.float64, copy=False)
        out = Xd @ Yd.T
        return out if out.dtype == out_dtype else out.astype(out_dtype)
    Xd = densified(X)
    YT = np.ascontiguousarray(densified(Y).T)
    out = np.empty((X.shape[0], Y.shape[0]), dtype=out_dtype)
    _union_kernels(sr.key, sr.add.op.tree, sr.mult.tree, sr.mult.param_names).tiled_kernel(
        Xd, YT, float(sr.start(X.shape[1])), sr.params, TILE, out
    )
    return out


def densified(A: sp.csr_matrix) -> np.ndarray:
    """Canonical CSR ``A`` as a dense array, to be read only: a view of its values where it stores every entry
    (dense input: sorted, unique columns, so row i's are 0 .. n-1 in order), else ``A.toarray()``."""
    m, n = A.shape
    if A.indptr[0] == 0 and A.indptr[-1] == m * n:
        return A.data[: m * n].reshape(m, n)
    return A.toarray()


def multiplies_in_float32(X: sp.csr_matrix, Y: sp.csr_matrix, out_dtype, tree) -> bool:
    """Whether a measure's expansion ``tree`` of the product of this block (``applies`` holds) is computed from
    a float32 product: a float32 result of float32 rows, and an expansion that is not the product itself (a
    product near 0 has no relative accuracy in float32: the engine would recompute most of a centred block's)."""
    narrow = np.dtype(out_dtype) == np.float32 and X.dtype == np.float32 and Y.dtype == np.float32
    return narrow and _not_the_product(tree)


def _not_the_product(tree) -> bool:
    return not (tree.kind == "var" and tree.args == ("c0",))


def float32_blocks(
    X: sp.csr_matrix, Y: sp.csr_matrix
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, float]:
    """``(X, Y, ‖x‖, ‖y‖, gamma, floor)`` for a product in float32: the blocks densified (float32 values), the
    rows' Euclidean norms (float64), and the bound on each product entry's distance from the exact
    one, ``gamma · ‖x_i‖ · ‖y_j‖ + floor``: ``FLOAT32_ERROR``'s rounding, and where products fall below
    float32's normal numbers (x·y under 1.2e-38, rows of 1e-20), up to 2⁻¹²⁶ a term lost (flushed to zero, at
    worst)."""
    Xd = densified(X)
    Yd = Xd if Y is X else densified(Y)
    xa = np.sqrt(np.einsum("ij,ij->i", Xd, Xd, dtype=np.float64))
    ya = xa if Y is X else np.sqrt(np.einsum("ij,ij->i", Yd, Yd, dtype=np.float64))
    n = X.shape[1]
    return Xd, Yd, xa, ya, FLOAT32_ERROR * np.sqrt(n) * 2.0**-24, n * 2.0**-126


@contextmanager
def one_blas_thread():
    """BLAS held to one thread (threadpoolctl's limit, where it is installed): the engine's threads each call it
    on their own tiles.  Without threadpoolctl BLAS keeps its threads: the same results, the cores shared."""
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


@cache
def _blas_controller():
    """threadpoolctl's view of the process's BLAS libraries, found once (``threadpool_limits`` looks for them in
    every loaded library at each use: 1.06 ms, against 0.016 ms for a limit through the controller), after SciPy's
    BLAS, the one numba's kernels call, is loaded; None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS, which numba's np.dot calls)

    return ThreadpoolController()


def block_bytes(X: sp.csr_matrix, Y: sp.csr_matrix, sr, out_dtype, rows: int, cols: int) -> int:
    """Host bytes ``product`` makes for a tile of ``rows`` rows of X against ``cols`` rows of Y (the call's whole
    inputs, within its ``CALL_DENSITY``) beyond the tile's result, where the call's tiles take a dense path
    (``applies`` on the whole inputs, as each tile asks it), else 0.

    BLAS: both blocks in float64, one block at a time also in its own type while converted, and the float64
    product of a result of another type; the union kernel: X's block, Y's and its transposed copy.  A block of
    every column: these are what ``working_memory`` does not bound (the tiles are cut by result entries).

    >>> import numpy as np, scipy.sparse as sp, semiring
    >>> from semiring.interfaces import call_density
    >>> X = sp.csr_matrix(np.ones((4, 1000)))
    >>> with call_density(X, X):
    ...     block_bytes(X, X, semiring.plus_times, np.float64, 4, 4)  # X's 4 rows densified once, in float64
    32000
    """
    stored = (int(X.indptr[-1]), int(Y.indptr[-1]))
    if (stored == (0, 0) if sr.is_union else 0 in stored) or not applies(X, Y, sr):
        return 0  # nothing to combine: the strategies' "constant" entry, no block
    width = X.shape[1]
    if not _is_dot(sr):
        return width * (rows * X.dtype.itemsize + 2 * cols * Y.dtype.itemsize)
    shared = Y is X and rows >= X.shape[0] and cols >= Y.shape[0]  # X against itself in one tile: one block
    blocks = 8 * width * (rows + (0 if shared else cols))
    converted = width * max(rows * _narrower(X), cols * _narrower(Y))
    product = 8 * rows * cols if np.dtype(out_dtype) != np.float64 else 0
    return blocks + max(converted, product)


def _narrower(A) -> int:
    """Bytes a value of A's densified block takes in its own type before it is widened to float64 (0: none)."""
    return 0 if A.dtype == np.float64 else A.dtype.itemsize


@cache
def _union_kernels(key: tuple, add_tree, mult_tree, param_names: tuple[str, ...]):
    return generate(
        "dense_template",
        {
            "add": scalar_source("add", add_tree, ("x", "y"), ()),
            "mult": scalar_source("mult", mult_tree, ("x", "y"), param_names),
        },
    )
