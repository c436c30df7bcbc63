"""State shared with the caller on the GPU engine (marked ``gpu``; skipped without a GPU): an estimator fitted
on CuPy or host rows answers from those rows after the caller changes them in place.

Run on a GPU machine with ``python -m pytest -m gpu tests/gpu/test_shared_state_gpu.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from oracles import reference_knn
from scipy.spatial.distance import cdist

from semiring.distances import NearestNeighbors


@pytest.mark.parametrize("metric", ["euclidean", "cosine", "correlation"])
@pytest.mark.parametrize("where", ["host", "cupy"])
def test_changing_the_fitted_rows_in_place_does_not_reach_the_estimator(metric, where):
    import cupyx.scipy.sparse as cusp

    X = sp.csr_matrix(sp.random(50, 16, density=0.4, format="csr", random_state=3) + sp.eye(50, 16))
    original = X.toarray()
    Q = original[:6] + 0.5
    given = cusp.csr_matrix(X) if where == "cupy" else X
    nn = NearestNeighbors(n_neighbors=4, metric=metric, backend="cuda").fit(given)
    given.data *= -3.0  # the caller reuses its buffer, on the device or the host
    dist, ind = nn.kneighbors(Q)
    dist, ind = (a.get() if hasattr(a, "get") else np.asarray(a) for a in (dist, ind))
    ref = cdist(Q, original, metric)
    want, _ = reference_knn(ref, 4)
    np.testing.assert_allclose(dist, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.take_along_axis(ref, ind, axis=1), want, rtol=1e-9, atol=1e-12)
