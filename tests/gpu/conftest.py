"""What the GPU tests' Dask modules share: one cluster and its client a module: ``LocalCUDACluster`` (a worker per
GPU) where dask-cuda is installed, else ``distributed``'s own ``LocalCluster`` of one single-threaded worker
process (on the default GPU: the lent GPU machines have ``distributed`` and no dask-cuda)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    try:
        import dask_cuda
    except ImportError:
        cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=None)
    else:
        cluster = dask_cuda.LocalCUDACluster(dashboard_address=None)
    with cluster, distributed.Client(cluster) as client:
        yield client
