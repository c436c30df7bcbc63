"""The CSR check kernel (``render_csr_check``) compiles with NVRTC for sm_90 for every value and index type —
no GPU needed; ``tests/gpu/test_check_gpu.py`` runs it against the host checks."""

from __future__ import annotations

import pytest

from semiring.kernels.cuda import compile as cuda_compile
from semiring.kernels.cuda.source import render_csr_check


@pytest.mark.parametrize("value_type", ["float32", "float64"])
@pytest.mark.parametrize("index_type", ["int32", "int64"])
def test_csr_check_compiles(value_type, index_type):
    kernel = render_csr_check(value_type, index_type)
    assert kernel.name == f"sr_csr_check_{value_type}_{index_type}"
    assert len(cuda_compile.compile_kernel(kernel)) > 0
