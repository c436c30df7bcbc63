"""``pairwise_distances``: a measure from ``distances.specs`` run on an engine."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from semiring import backend as _backend
from semiring import validation
from semiring.ops import Semiring

from .specs import NORMS, Distance, expression, get_metric


def _check_params(spec: Distance, params: dict) -> dict:
    unknown = set(params) - set(spec.params)
    if unknown:
        takes = f"it takes {', '.join(spec.params)}" if spec.params else "it takes no parameters"
        raise TypeError(f"metric {spec.name!r} got unexpected parameter(s) {sorted(unknown)}; {takes}")
    values = {**spec.params, **params}
    if "p" in values:
        values["p"] = validation.check_positive(values["p"], "p", "> 0 for minkowski (p = inf gives chebyshev)")
    return values


def resolve_metric(metric, params: dict) -> tuple[Distance, dict]:
    """The measure's spec and its parameter values, checked (minkowski with p = inf is chebyshev)."""
    spec = get_metric(metric)
    values = _check_params(spec, params)
    if spec.name == "minkowski" and math.isinf(values["p"]):
        spec, values = get_metric("chebyshev"), {}
    return spec, values


def prepare(A: sp.csr_matrix, how: str) -> sp.csr_matrix:
    """The rows as a measure reads them; a new matrix sharing A's index arrays, A untouched."""
    if how == "none":
        return A
    if how == "binary":
        data = (A.data != 0).astype(A.dtype)
    elif how == "l1":
        counts = np.diff(A.indptr)
        rows = np.repeat(np.arange(A.shape[0]), counts)
        sums = np.bincount(rows, weights=A.data[: A.indptr[-1]], minlength=A.shape[0])
        per_value = np.repeat(sums, counts)
        data = np.divide(A.data[: A.indptr[-1]], per_value, out=np.zeros(per_value.size), where=per_value != 0)
    else:
        raise ValueError(f"unknown row preparation {how!r}")
    return sp.csr_matrix((data, A.indices, A.indptr), shape=A.shape, copy=False)


def _prepared(engine, spec: Distance, A, acc):
    """A's rows as the measure reads them, on the engine's device, with their row norms."""
    Ap = engine.to_device(prepare(A, spec.prepare))
    return Ap, [engine.row_norm(Ap, expression(NORMS[name], ("x",)), acc) for name in spec.norms]


def pairwise_distances(
    X, Y=None, metric: str = "euclidean", *, backend: str = "auto", working_memory: float | None = None, **params
) -> np.ndarray:
    """Distances between the rows of X and the rows of Y (X itself when Y is None).

    ``metric`` takes SciPy/scikit-learn names and aliases (see
    ``distances.METRICS``); the result equals ``scipy.spatial.distance.cdist`` on
    the densified input where SciPy defines the measure, except where the docs
    state otherwise.  Inputs are SciPy sparse matrices/arrays or dense arrays;
    the result is a dense array, float32 when both inputs are float32.  CuPy
    inputs (``cupy`` arrays, ``cupyx.scipy.sparse``) give a ``cupy.ndarray``,
    which, computed on the GPU, never leaves it (the inputs are validated on a
    host copy).

    ``working_memory`` (MiB, as scikit-learn) bounds the engine's temporaries:
    rows of X are processed in batches whose buffers fit it.  The default is
    1024 MiB on the CPU and half the free memory on the GPU, so a result larger
    than the GPU is computed batch by batch into host memory.

    >>> import numpy as np
    >>> from semiring import distances
    >>> X = np.array([[0.0, 3.0, 4.0], [0.0, 0.0, 0.0]])
    >>> distances.pairwise_distances(X, metric="euclidean")
    array([[0., 5.],
           [5., 0.]])
    >>> distances.pairwise_distances(X, metric="minkowski", p=1)
    array([[0., 7.],
           [7., 0.]])
    """
    spec, values = resolve_metric(metric, params)
    engine = _backend.engine(backend)
    cupy_input = validation.is_cupy(X) or validation.is_cupy(Y)
    X, Y = validation.check_pair(validation.from_cupy(X), validation.from_cupy(Y))
    if spec.nonnegative:
        validation.check_nonnegative(X, "X", spec.name)
        if Y is not X:
            validation.check_nonnegative(Y, "Y", spec.name)
    if working_memory is not None:
        working_memory = validation.check_positive(working_memory, "working_memory")
    keep = cupy_input and engine.DEVICE_RESULTS
    D = _compute(engine, spec, values, X, Y, validation.result_dtype(X, Y), working_memory, keep)
    return validation.as_cupy(D) if cupy_input and not keep else D


def _compute(engine, spec: Distance, values: dict, X, Y, dtype, working_memory, on_device: bool = False):
    """The measure for X against Y, batch by batch; on the engine's device when ``on_device``."""
    m, p = X.shape[0], Y.shape[0]
    acc = engine.accumulate_dtype(dtype)  # float64 on the CPU; the result's type on the GPU
    Yp, ynorms = _prepared(engine, spec, Y, acc)
    # Temporaries per result entry: the terms, and the result itself when it has its own buffer.
    per_entry = len(spec.terms) * acc.itemsize + np.dtype(dtype).itemsize
    rows = engine.batch_rows(m, p, per_entry, working_memory)
    collect = (lambda a: a) if on_device else engine.to_host
    if rows >= m:  # one batch: X against itself shares Y's preparation and norms
        Xp, xnorms = (Yp, ynorms) if Y is X else _prepared(engine, spec, X, acc)
        return collect(_block(engine, spec, values, Xp, xnorms, Yp, ynorms, acc, dtype))
    out = engine.empty((m, p), dtype) if on_device else np.empty((m, p), dtype)
    for r0 in range(0, m, rows):
        Xp, xnorms = _prepared(engine, spec, X[r0 : r0 + rows], acc)
        out[r0 : r0 + rows] = collect(_block(engine, spec, values, Xp, xnorms, Yp, ynorms, acc, dtype))
    return out


def _block(engine, spec: Distance, values: dict, Xp, xnorms, Yp, ynorms, acc, dtype):
    """The measure for the rows of Xp against all of Yp, on the engine's device."""
    (m, n), p = Xp.shape, Yp.shape[0]
    param_array = np.array(list(values.values()), dtype=np.float64)
    terms = [engine.pairwise(Xp, Yp, _bind(sr, values), acc) for sr in spec.terms]
    flagged = None
    if spec.refine is not None and m and p:
        when = expression(spec.refine.when, engine.EXPANSION_VARIABLES)
        flagged = engine.select(when, (), param_array, terms, xnorms, ynorms, n, (m, p))
    # One term already in the result's type: expand in place, no second m×p buffer.
    out = terms[0] if (len(terms) == 1 and acc == dtype) else engine.empty((m, p), dtype)
    engine.expand(spec.expansion_tree, spec.param_names, param_array, terms, xnorms, ynorms, n, out)
    if flagged is not None and engine.mask_size(flagged):
        _refine(engine, spec, Xp, Yp, flagged, out, acc)
    return out


def _refine(engine, spec: Distance, X, Y, flagged, out, acc) -> None:
    """Recompute the flagged entries exactly (see ``Refinement``)."""
    exact = engine.pairwise(X, Y, spec.refine.semiring, acc, mask=flagged)
    tree = expression(spec.refine.expansion, engine.EXPANSION_VARIABLES)
    fixed = engine.expand(
        tree, (), np.zeros(0), [exact[None, :]], [], [], X.shape[1], engine.empty((1, exact.size), acc)
    )
    engine.scatter(out, flagged, fixed[0])


def _bind(sr: Semiring, values: dict) -> Semiring:
    own = {k: v for k, v in values.items() if k in sr.mult.param_names}
    return sr.with_params(**own) if own else sr
