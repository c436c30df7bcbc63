"""The compile cache: keyed by what changes the binary, atomic, self-healing (NVRTC, no GPU needed)."""

from __future__ import annotations

import pytest

import semiring
from semiring import Semiring, binary_op, monoid, settings
from semiring.kernels.cuda import compile as cuda
from semiring.kernels.cuda import source as cuda_source


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(settings.CACHE_DIR.name, str(tmp_path / "kernels"))
    cuda.clear_memory_cache()
    yield tmp_path / "kernels"
    cuda.clear_memory_cache()


def kernel_of(sr):
    return cuda_source.render_pairwise_merge(sr, "float32", "int32")


def compiles(fn) -> int:
    before = cuda.compile_count
    fn()
    return cuda.compile_count - before


def test_cache_dir_follows_the_environment(cache):
    assert cuda.cache_dir() == settings.cache_dir() == cache


def test_same_spec_compiles_once(cache):
    k = kernel_of(semiring.plus_absdiff)
    assert compiles(lambda: cuda.compile_cached(k)) == 1
    assert compiles(lambda: cuda.compile_cached(k)) == 0  # memory
    cuda.clear_memory_cache()
    assert compiles(lambda: cuda.compile_cached(kernel_of(semiring.plus_absdiff))) == 0  # disk
    assert len(list(cache.glob("*.cubin"))) == 1


def test_an_equal_spec_declared_again_hits_the_cache(cache):
    a = Semiring(monoid.plus, binary_op(lambda x, y: abs(x - y) ** 3))
    b = Semiring(monoid.plus, binary_op("abs(x - y) ** 3"))
    cuda.compile_cached(kernel_of(a))
    assert compiles(lambda: cuda.compile_cached(kernel_of(b))) == 0


def test_parameter_values_share_one_kernel(cache):
    sr = Semiring(monoid.plus, binary_op("abs(x - y) ** p", p=2.0))
    cuda.compile_cached(kernel_of(sr))
    assert cuda.cache_key(kernel_of(sr.with_params(p=5.0))) == cuda.cache_key(kernel_of(sr))


def test_changed_op_types_arch_or_options_recompile(cache):
    base = kernel_of(semiring.plus_absdiff)
    other_op = kernel_of(Semiring(monoid.plus, binary_op("abs(x - y) * 2")))
    other_type = cuda_source.render_pairwise_merge(semiring.plus_absdiff, "float64", "int32")
    keys = {
        cuda.cache_key(base),
        cuda.cache_key(other_op),
        cuda.cache_key(other_type),
        cuda.cache_key(base, arch="sm_80"),
        cuda.cache_key(base, options=("-lineinfo",)),
    }
    assert len(keys) == 5
    cuda.compile_cached(base)
    assert compiles(lambda: cuda.compile_cached(other_op)) == 1


def test_corrupt_entry_is_recompiled_not_fatal(cache):
    k = kernel_of(semiring.max_absdiff)
    good = cuda.compile_cached(k)
    (entry,) = cache.glob("*.cubin")
    blob = bytearray(entry.read_bytes())
    blob[-10] ^= 0xFF  # flip bits inside the cubin
    entry.write_bytes(bytes(blob))
    cuda.clear_memory_cache()
    assert compiles(lambda: cuda.compile_cached(k)) == 1
    assert cuda.compile_cached(k) == good
    entry.write_bytes(b"not a cubin at all")
    cuda.clear_memory_cache()
    assert compiles(lambda: cuda.compile_cached(k)) == 1
    assert entry.read_bytes().endswith(good)  # replaced by a good entry


def test_writes_leave_no_temporary_files(cache):
    for sr in (semiring.plus_times, semiring.min_plus, semiring.plus_sqdiff):
        cuda.compile_cached(kernel_of(sr))
    names = sorted(p.name for p in cache.iterdir())
    assert len(names) == 3 and all(n.endswith(".cubin") and not n.startswith(".tmp") for n in names)


def test_unwritable_cache_still_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv(settings.CACHE_DIR.name, str(blocker / "kernels"))
    cuda.clear_memory_cache()
    assert len(cuda.compile_cached(kernel_of(semiring.plus_pair))) > 0
    cuda.clear_memory_cache()
