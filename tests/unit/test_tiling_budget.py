"""The tiling loop's default budget, without a GPU: on a device engine it is sized from the device's free memory."""

from __future__ import annotations

import pytest

from semiring import tiling

MiB = 2**20


class FakeDevice:
    """An engine as the driver sees it: results on a device whose engine limit is half of what is free."""

    device_results = True

    def __init__(self, free_bytes: int):
        self.free_bytes = free_bytes

    def memory_limit_bytes(self) -> int:
        return self.free_bytes // 2


class FakeHost:
    device_results = False

    def memory_limit_bytes(self):
        return None


@pytest.mark.parametrize(
    "free_mib, want_mib",
    [
        (128, tiling.DEVICE_FLOOR_MIB),  # a nearly full device: the floor (within the engine's limit, below)
        (8 * 1024, 8 * 1024 * tiling.DEVICE_FREE_SHARE),  # a share of what is free
        (140 * 1024, tiling.DEVICE_CAP_MIB),  # an H200: capped
    ],
)
def test_default_device_budget_is_a_share_of_free_memory_within_floor_and_cap(free_mib, want_mib):
    engine = FakeDevice(free_mib * MiB)
    expected = min(int(want_mib * MiB) // 2, engine.memory_limit_bytes())  # half to the tiles, within the limit
    assert tiling.budget_bytes(engine, None) == expected


def test_working_memory_overrides_the_default_on_both_engines():
    assert tiling.budget_bytes(FakeDevice(140 * 1024 * MiB), 100) == 50 * MiB  # half of it to the tiles
    assert tiling.budget_bytes(FakeHost(), 100) == 100 * MiB
    assert tiling.budget_bytes(FakeHost(), None) == tiling.DEFAULT_WORKING_MEMORY_MIB * MiB


def test_the_call_cache_lives_as_long_as_the_outermost_budget():
    from semiring.interfaces import CALL_CACHE

    assert CALL_CACHE.get() is None
    with tiling.scratch_budget(10):
        outer = CALL_CACHE.get()
        outer["made"] = 1
        with tiling.scratch_budget(5):  # a nested budget keeps the call's cache
            assert CALL_CACHE.get() is outer
    assert CALL_CACHE.get() is None


def test_a_held_cache_outlives_its_calls_and_keeps_what_the_last_one_used():
    """A fitted index's DerivedCache: the driver uses it instead of opening its own, it survives the call, and
    each call drops what it neither used nor made (another tiling's layouts)."""
    from semiring.interfaces import CALL_CACHE, DerivedCache, held

    cache = DerivedCache()
    with held(cache), tiling.scratch_budget(10):
        assert CALL_CACHE.get() is cache
        cache["tile 0"], cache["tile 1"] = "layout 0", "layout 1"
    assert CALL_CACHE.get() is None and dict(cache) == {"tile 0": "layout 0", "tile 1": "layout 1"}
    with held(cache), tiling.scratch_budget(10):
        assert "tile 0" in cache and cache["tile 0"] == "layout 0"  # used again
        cache["tile 2"] = "layout 2"  # made
    assert dict(cache) == {"tile 0": "layout 0", "tile 2": "layout 2"}  # tile 1 was not used: dropped
    with pytest.raises(RuntimeError), held(cache):
        raise RuntimeError("a call that fails")
    assert dict(cache) == {}  # it used nothing
