"""What the GPU tests' Dask modules share: one ``LocalCUDACluster`` (a worker per GPU) and its client a module."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    with dask_cuda.LocalCUDACluster(dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        yield client
