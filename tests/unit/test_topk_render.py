"""The kNN top-k selection kernels compile with NVRTC for sm_90 (no GPU needed), and rendering is pure."""

from __future__ import annotations

import pytest

from semiring.distances.specs import DISTANCES, get_metric
from semiring.kernels.cuda import compile as cuda_compile
from semiring.kernels.cuda import topk_source as cuda_topk_source


@pytest.mark.parametrize("capacity", cuda_topk_source.CAPACITIES)
@pytest.mark.parametrize("value_type", ["float32", "float64"])
@pytest.mark.parametrize("largest", [False, True], ids=["smallest", "largest"])
def test_topk_kernel_compiles(capacity, value_type, largest):
    kernel = cuda_topk_source.render_topk(value_type, capacity, largest)
    assert f'extern "C" __global__ void {kernel.name}(' in kernel.source
    assert ("(a > b)" in kernel.source) == largest  # a similarity keeps the largest values
    # up to 32 pairs one list across the warp (its inserts found by a ballot), beyond them a list a lane
    one_list = capacity <= cuda_topk_source.WARP_LIST
    assert ("__ballot_sync" in kernel.source) == one_list and ("sr_insert(v, id" in kernel.source) != one_list
    assert len(cuda_compile.compile_cached(kernel)) > 0


def test_capacity_choice_and_bad_arguments():
    assert [cuda_topk_source.capacity_for(k) for k in (1, 8, 9, 100, 128)] == [8, 8, 16, 128, 128]
    assert cuda_topk_source.capacity_for(129) is None  # selected by sorting instead
    with pytest.raises(ValueError, match="capacity must be one of"):
        cuda_topk_source.render_topk("float32", 12)
    with pytest.raises(ValueError, match="value_type must be one of"):
        cuda_topk_source.render_topk("float16", 16)


def test_empty_slot_is_the_shared_vocabulary():
    """The kernel's empty slot is ``semiring.interfaces.TOPK_EMPTY``, the one both engines use."""
    from semiring.interfaces import TOPK_EMPTY

    assert f"#define SR_EMPTY {TOPK_EMPTY}LL" in cuda_topk_source.render_topk("float32", 8).source


FUSED = [(d.name, "float32") for d in DISTANCES if d.refine is None] + [("jensenshannon", "float64")]


@pytest.mark.parametrize("name, value_type", FUSED)
def test_fused_expansion_kernels_compile(name, value_type):
    """Every measure the selection fuses (no entry recomputed) renders its expansion into the kernel."""
    spec = get_metric(name)
    kernel = cuda_topk_source.render_topk(value_type, 16, spec.similarity, spec.expansion_tree, spec.param_names, name)
    assert "c0[t]" in kernel.source or "nx0[i]" in kernel.source  # the candidate is read from the operands
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("mode", ["segment", "merge"])
@pytest.mark.parametrize("value_type", ["float32", "float64"])
def test_segmented_selection_kernels_compile(mode, value_type):
    """A long row's segments, a warp each, and the merge of their lists into the running selection."""
    spec = get_metric("cosine")
    tree = spec.expansion_tree if mode == "segment" else cuda_topk_source.BLOCK
    kernel = cuda_topk_source.render_topk(value_type, 16, False, tree, spec.param_names, "cosine", mode=mode)
    assert kernel.name.endswith(f"_{mode}")
    assert ("cand_i[row * p + j" in kernel.source) == (mode == "merge")  # the merge reads each candidate's index
    assert len(cuda_compile.compile_cached(kernel)) > 0
    with pytest.raises(ValueError, match="mode must be one of"):
        cuda_topk_source.render_topk(value_type, 16, mode="rows")
