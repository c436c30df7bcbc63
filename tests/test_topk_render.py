"""The kNN top-k selection kernels compile with NVRTC for sm_90 (no GPU needed), and rendering is pure."""

from __future__ import annotations

import subprocess
import sys

import pytest

from semiring.kernels import cuda, cuda_topk_source


@pytest.mark.parametrize("capacity", cuda_topk_source.CAPACITIES)
@pytest.mark.parametrize("value_type", ["float32", "float64"])
@pytest.mark.parametrize("largest", [False, True], ids=["smallest", "largest"])
def test_topk_kernel_compiles(capacity, value_type, largest):
    kernel = cuda_topk_source.render_topk(value_type, capacity, largest)
    assert f'extern "C" __global__ void {kernel.name}(' in kernel.source
    assert ("(a > b)" in kernel.source) == largest  # a similarity keeps the largest values
    assert len(cuda.compile_kernel(kernel)) > 0


def test_capacity_choice_and_bad_arguments():
    assert [cuda_topk_source.capacity_for(k) for k in (1, 8, 9, 100, 128)] == [8, 8, 16, 128, 128]
    assert cuda_topk_source.capacity_for(129) is None  # selected by sorting instead
    with pytest.raises(ValueError, match="capacity must be one of"):
        cuda_topk_source.render_topk("float32", 12)
    with pytest.raises(ValueError, match="value_type must be one of"):
        cuda_topk_source.render_topk("float16", 16)


def test_empty_slot_matches_the_cpu_engine():
    from semiring.kernels import cpu_topk

    assert cuda_topk_source.EMPTY == cpu_topk.EMPTY


def test_rendering_imports_no_gpu_library():
    code = (
        "import sys, semiring.kernels.cuda_topk_source as s\n"
        "s.render_topk('float64', 32, True)\n"
        "bad = [m for m in ('cupy', 'cuda', 'cuda.bindings', 'numba.cuda') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
