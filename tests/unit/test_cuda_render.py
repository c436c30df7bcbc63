"""Every rendered CUDA kernel compiles with NVRTC for sm_90 — no GPU needed.

Covers each built-in semiring and every distance's terms, norms and expansion,
for float32/int32 and float64/int64, unmasked and masked.  Rendering is also
checked to be pure: it imports no GPU library.

Kernels compile through the project's compile cache (``compile_cached``, as the GPU engine's do), whose key is
the source, the architecture, the options and NVRTC's version: a source rendered by two tests compiles once, and
a later run reads the cubins NVRTC made from the very same text.  The four render test files took 128 s of a
run on the 2-core development machine compiling every kernel each time; 97 s cold, 2 s warm through the cache.
"""

from __future__ import annotations

import numpy as np
import pytest

import semiring
from semiring import expr as E
from semiring.distances.specs import DISTANCES, NORMS
from semiring.kernels.cuda import compile as cuda_compile
from semiring.kernels.cuda import coo_source
from semiring.kernels.cuda import source as cuda_source

TYPES = [("float32", "int32"), ("float64", "int64")]


def _semirings():
    """Every built-in and every distance's semirings, each once (the same key renders the same source)."""
    seen = {}
    for sr in semiring.BUILTIN_SEMIRINGS.values():
        seen.setdefault(sr.key, sr)
    for d in DISTANCES:
        for sr in (*d.terms, *([d.refine.semiring] if d.refine and d.refine.semiring else [])):
            seen.setdefault(sr.key, sr)
    return list(seen.values())


SEMIRINGS = _semirings()


@pytest.mark.parametrize("sr", SEMIRINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("value_type, index_type", TYPES)
@pytest.mark.parametrize("masked", [False, True])
def test_pairwise_kernel_compiles(sr, value_type, index_type, masked):
    kernel = cuda_source.render_pairwise_merge(sr, value_type, index_type, masked=masked)
    assert f'extern "C" __global__ void {kernel.name}(' in kernel.source
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("d", DISTANCES, ids=lambda d: d.name)
@pytest.mark.parametrize("value_type", ["float32", "float64"])
def test_expansion_kernel_compiles(d, value_type):
    kernels = [cuda_source.render_expansion(d.expansion_tree, d.param_names, d.name, value_type)]
    if d.refine:
        when = E.parse(d.refine.when, tuple(cuda_source.EXPANSION_ARGS))[0]
        for index_type in ("int32", "int64"):
            kernels.append(cuda_source.render_expansion(when, (), f"{d.name}_when", value_type, True, index_type))
        if d.refine.semiring is not None:  # else recomputed by array operations (correlation's centred sums)
            exact = E.parse(d.refine.expansion, tuple(cuda_source.EXPANSION_ARGS))[0]
            kernels.append(cuda_source.render_expansion(exact, (), f"{d.name}_exact", value_type))
    for kernel in kernels:
        assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("name", NORMS)
@pytest.mark.parametrize("value_type, index_type", TYPES)
@pytest.mark.parametrize("data_type", [None, "float32"])
def test_row_norm_kernel_compiles(name, value_type, index_type, data_type):
    """Norms in their own type, and float64 norms of float32 values read as they are (no float64 copy)."""
    tree = E.parse(NORMS[name], ("x",))[0]
    kernel = cuda_source.render_row_norm(tree, name, value_type, index_type, "sum", data_type)
    assert ("const float* __restrict__ data" in kernel.source) == (value_type == "float32" or data_type == "float32")
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("d", [d for d in DISTANCES if d.norms], ids=lambda d: d.name)
@pytest.mark.parametrize("value_type, index_type", TYPES)
@pytest.mark.parametrize("data_type", [None, "float32"])
def test_row_norms_kernel_compiles(d, value_type, index_type, data_type):
    """A measure's norms in one pass, and its row terms from them where it has them (correlation's)."""
    trees = tuple(E.parse(NORMS[name], ("x",))[0] for name in d.norms)
    terms = tuple(E.parse(t, tuple(cuda_source.EXPANSION_ARGS))[0] for t in d.row_terms)
    kernel = cuda_source.render_row_norms(trees, terms, d.name, value_type, index_type, data_type)
    assert kernel.source.count("__shfl_down_sync") == len(trees)
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("value_type, index_type", TYPES)
@pytest.mark.parametrize("root", [False, True])
def test_row_shares_kernel_compiles(value_type, index_type, root):
    """jensenshannon's and hellinger's rows divided by their sums (square-rooted for hellinger) in one pass."""
    kernel = cuda_source.render_row_shares(value_type, index_type, root)
    assert ("sqrt(v / sum)" in kernel.source) == root
    assert len(cuda_compile.compile_cached(kernel)) > 0


def test_compile_error_shows_numbered_source_and_log():
    bad = cuda_source.KernelSource("broken", 'extern "C" __global__ void broken() {\n  int x = ;\n}\n')
    with pytest.raises(cuda_compile.CompileError) as info:
        cuda_compile.compile_kernel(bad)
    message = str(info.value)
    assert "error" in message and "expected an expression" in message
    assert "   2    int x = ;" in message


def test_user_semiring_renders_its_own_op():
    sr = semiring.Semiring(semiring.monoid.max, semiring.binary_op(lambda x, y: abs(x - y) / (1 + y * y)))
    kernel = cuda_source.render_pairwise_merge(sr, "float64", "int64")
    assert "(fabs((x - y)) / (T(1.0) + (y * y)))" in kernel.source
    assert "fmax(x, y)" in kernel.source
    assert "sr_mult(xv[a], T(0), params)" in kernel.source  # a union semiring: one-sided columns count
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("sr", SEMIRINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_rowvec_kernels_compile(sr, value_type, index_type):
    passes = (False, True) if sr.is_union else (False,)
    for second in passes:
        for group in (1, 8, 32):
            kernel = cuda_source.render_pairwise_rowvec(sr, value_type, index_type, group, second_pass=second)
            assert len(cuda_compile.compile_cached(kernel)) > 0
    with pytest.raises(ValueError, match="group must be a power of two"):
        cuda_source.render_pairwise_rowvec(sr, value_type, index_type, group=3)


@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_densify_kernel_compiles(value_type, index_type):
    assert len(cuda_compile.compile_cached(cuda_source.render_densify(value_type, index_type))) > 0


@pytest.mark.parametrize("value_type", ["float32", "float64"])
def test_mirror_kernel_compiles(value_type):
    """The dense GEMM path's mirror of a SYRK's upper triangle (X against itself)."""
    assert len(cuda_compile.compile_cached(cuda_source.render_mirror_upper(value_type))) > 0


def _margin_splits():
    splits = {}
    for sr in SEMIRINGS:
        for nonnegative in (False, True):
            split = sr.margin_split(nonnegative)
            if split is not None:
                splits.setdefault(split.cross.key, split)
    return list(splits.values())


@pytest.mark.parametrize("split", _margin_splits(), ids=lambda s: s.cross.name)
@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_margin_split_kernels_compile(split, value_type, index_type):
    """The GPU's plus-monoid union path: the cross op's intersection kernels and the margins' row norms."""
    kernels = [
        cuda_source.render_pairwise_rowvec(split.cross, value_type, index_type, 8),
        cuda_source.render_pairwise_merge(split.cross, value_type, index_type),
    ]
    for label, tree in (("x", split.x_margin), ("y", split.y_margin)):
        for t in (tree, E.Node("call", ("abs", tree))):
            kernels.append(cuda_source.render_row_norm(t, f"{label}{len(kernels)}", value_type, index_type))
    for kernel in kernels:
        assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("sr", [sr for sr in SEMIRINGS if sr.is_union and sr.add.kind in ("max", "min")], ids=str)
@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_extrema_kernels_compile(sr, value_type, index_type):
    """The GPU's max- and min-union path: the rows' extrema of f(x, 0) and f(0, y) and the expansion writing
    the larger (or smaller) of the two."""
    kernels = [
        cuda_source.render_row_norm(t, f"{sr.name}_{side}", value_type, index_type, sr.add.kind)
        for side, t in zip("xy", sr.mult.margins, strict=True)
    ]
    tree = E.parse(f"{sr.add.kind}({sr.add.kind}(0.0, nx0), ny0)", tuple(cuda_source.EXPANSION_ARGS))[0]
    kernels.append(cuda_source.render_expansion(tree, (), f"{sr.name}_extrema", value_type))
    for kernel in kernels:
        assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize(
    "sr", [sr for sr in SEMIRINGS if sr.add.op.text == "x + y" and not sr.is_union], ids=lambda s: s.name
)
@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_inverted_kernels_compile(sr, value_type, index_type):
    """The inverted kernel and its row-range form (sums in shared memory), for every semiring they take."""
    for render in (cuda_source.render_pairwise_inverted, cuda_source.render_pairwise_ranges):
        assert len(cuda_compile.compile_cached(render(sr, value_type, index_type))) > 0


@pytest.mark.parametrize(
    "d",
    [d for d in DISTANCES if len(d.terms) == 1 and d.terms[0].add.kind == "plus" and not d.terms[0].is_union],
    ids=lambda d: d.name,
)
@pytest.mark.parametrize("value_type, index_type", [("float32", "int32"), ("float64", "int64")])
def test_ranges_kernel_with_the_expansion_compiles(d, value_type, index_type):
    """The row-range kernel writing a one-term measure's expansion (and listing its refinement's entries)."""
    sr = d.terms[0]
    when = None if d.refine is None else E.parse(d.refine.when, tuple(cuda_source.EXPANSION_ARGS))[0]
    kernel = cuda_source.render_pairwise_ranges(
        sr, value_type, index_type, d.expansion_tree, tuple(d.param_names), when, d.name, index_type
    )
    assert d.name in kernel.name and ("atomicAdd(count" in kernel.source) == (when is not None)
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("render", [cuda_source.render_pairwise_inverted, cuda_source.render_pairwise_ranges])
def test_inverted_kernels_refuse_what_they_cannot_add(render):
    with pytest.raises(ValueError, match="plus-monoid intersection"):
        render(semiring.min_plus)
    with pytest.raises(ValueError, match="plus-monoid intersection"):
        render(semiring.plus_absdiff)


def test_inverted_kernel_takes_plus_however_written():
    """``y + x`` is plus (``Monoid.kind``), so the inverted kernel renders for it as for ``x + y``."""
    sr = semiring.Semiring(semiring.Monoid(semiring.binary_op("y + x"), 0.0), semiring.binary_op("x * y"))
    assert len(cuda_compile.compile_cached(cuda_source.render_pairwise_inverted(sr))) > 0


@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_postings_kernel_compiles(value_type, index_type):
    assert len(cuda_compile.compile_cached(cuda_source.render_postings(value_type, index_type))) > 0


@pytest.mark.parametrize("index_type", ["int32", "int64"])
def test_column_counts_kernel_compiles(index_type):
    assert len(cuda_compile.compile_cached(cuda_source.render_column_counts(index_type))) > 0


# The CSR + COO kernel of the ``coo`` and ``hash`` strategies: an intersection, a union and a structural
# semiring over every table, stream, pass, mask and type pair (rows held per block is a constant of the
# source, so only the most is compiled).
COO_SEMIRINGS = [semiring.plus_times, semiring.max_absdiff, semiring.plus_pair]
INDEX_PAIRS = [(v, i) for v in ("float32", "float64") for i in ("int32", "int64")]


@pytest.mark.parametrize("sr", COO_SEMIRINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("value_type, index_type", INDEX_PAIRS)
@pytest.mark.parametrize("table", coo_source.TABLES)
@pytest.mark.parametrize("masked", [False, True])
def test_coo_kernels_compile(sr, value_type, index_type, table, masked):
    passes = (False, True) if sr.is_union else (False,)
    rows = (1,) if table == "dense" or masked else (coo_source.MAX_ROWS,)
    streams = ("coo",) if masked else coo_source.STREAMS
    for second in passes:
        for r in rows:
            for stream in streams:
                kernel = coo_source.render_pairwise_coo(
                    sr, value_type, index_type, table, second, masked, r, 8, stream=stream
                )
                assert f"__launch_bounds__({coo_source.BLOCK_THREADS}) {kernel.name}(" in kernel.source
                assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("split", _margin_splits(), ids=lambda s: s.cross.name)
@pytest.mark.parametrize("value_type, index_type", TYPES)
def test_margin_split_hash_kernels_compile(split, value_type, index_type):
    """The hash kernel's margin-split form (margins once per stored entry) and the entrywise margins."""
    union = next(sr for sr in SEMIRINGS if sr.margin_split(True) is split or sr.margin_split(False) is split)
    for stream in coo_source.STREAMS:
        kernel = coo_source.render_pairwise_coo(
            split.cross, value_type, index_type, "hash", rows=4, split_of=union, stream=stream
        )
        assert "(sr_union(x, y, params) - mx) - bm[k]" in kernel.source
        assert len(cuda_compile.compile_cached(kernel)) > 0
    for tree in (split.x_margin, split.y_margin):
        assert len(cuda_compile.compile_cached(coo_source.render_entrywise(tree, "m", value_type))) > 0


def test_coo_kernel_semantics_follow_the_semiring():
    """Intersections add only where the held row stores the column; a union's first pass reads a missing
    held entry as 0 and its second pass adds ``x ⊗ 0`` where the held row lacks the column, by structure."""
    inter = coo_source.render_pairwise_coo(semiring.plus_times, table="hash").source
    assert "if (found) { v = sr_mult(x, y, params); hit = true; }" in inter
    assert "atomicAdd(addr, v)" in inter  # plus combines with atomicAdd
    first = coo_source.render_pairwise_coo(semiring.max_absdiff, table="hash").source
    assert "v = sr_mult(found ? x : T(0), y, params); hit = true;" in first
    assert "atomicCAS(w, seen" in first  # any other monoid: a compare-and-swap loop
    second = coo_source.render_pairwise_coo(semiring.max_absdiff, table="dense", second_pass=True).source
    assert "if (!found) { v = sr_mult(y, T(0), params); hit = true; }" in second
    assert "present[c >> 5]" in second  # a dense row's stored columns from its bitmap


def test_coo_kernel_refuses_bad_shapes():
    with pytest.raises(ValueError, match="table must be one of"):
        coo_source.render_pairwise_coo(semiring.plus_times, table="tree")
    with pytest.raises(ValueError, match="rows must be 1 for a dense table"):
        coo_source.render_pairwise_coo(semiring.plus_times, table="dense", rows=2)
    with pytest.raises(ValueError, match="a second pass completes a union"):
        coo_source.render_pairwise_coo(semiring.plus_times, second_pass=True)
    with pytest.raises(ValueError, match="group must be a power of two"):
        coo_source.render_pairwise_coo(semiring.plus_times, masked=True, group=6)
    with pytest.raises(ValueError, match="stream must be one of"):
        coo_source.render_pairwise_coo(semiring.plus_times, stream="csc")
    with pytest.raises(ValueError, match="a margin split's cross op runs in hash tables"):
        coo_source.render_pairwise_coo(semiring.plus_times, table="dense", split_of=semiring.plus_absdiff)


@pytest.mark.parametrize("index_type", ["int32", "int64"])
def test_entry_rows_kernel_compiles(index_type):
    kernel = cuda_source.render_entry_rows(index_type)
    assert f"typedef {cuda_source.INDEX_TYPES[index_type]} I;" in kernel.source
    assert len(cuda_compile.compile_cached(kernel)) > 0


def test_renderings_are_kept_for_the_same_trees_and_told_apart_by_the_others():
    """``memo_by_identity``: the same objects give the kernel rendered before; another tree, equal in value or
    not, or another value type, is rendered for itself (and renders the same text where its value is equal)."""
    d = next(d for d in DISTANCES if d.name == "correlation")
    when = E.parse(d.refine.when, tuple(cuda_source.EXPANSION_ARGS))[0]
    args = (d.terms[0], "float32", "int32", d.expansion_tree, tuple(d.param_names), when, d.name, "int32")
    first = cuda_source.render_pairwise_ranges(*args)
    assert cuda_source.render_pairwise_ranges(*args) is first
    equal = E.parse(d.refine.when, tuple(cuda_source.EXPANSION_ARGS))[0]  # a new tree of the same value
    again = cuda_source.render_pairwise_ranges(*args[:5], equal, *args[6:])
    assert again is not first and again.source == first.source
    other = cuda_source.render_pairwise_ranges(*args[:5], None, *args[6:])
    assert "atomicAdd(count" in first.source and "atomicAdd(count" not in other.source
    double = cuda_source.render_pairwise_ranges(args[0], "float64", *args[2:])
    assert "typedef double T;" in double.source and "typedef float T;" in first.source


@pytest.mark.parametrize("value_type, index_type", [("float32", "int32"), ("float64", "int64")])
@pytest.mark.parametrize("rows", [1, cuda_source.RANKED_ROWS, 8])
def test_ranked_kernel_compiles_for_max_and_min_unions_and_refuses_others(value_type, index_type, rows):
    """The ranked kernel for chebyshev (its expansion written as each entry is) and for a min-union product, at
    each number of held rows; sums, intersections and a table beyond shared memory are refused by name."""
    chebyshev = next(d for d in DISTANCES if d.name == "chebyshev")
    lowest = semiring.Semiring(semiring.monoid.min, semiring.binary_op("-abs(x - y)"))
    measure = (chebyshev.expansion_tree, (), None, "chebyshev", index_type)
    kernels = [
        cuda_source.render_pairwise_ranked(chebyshev.terms[0], value_type, index_type, *measure, rows=rows),
        cuda_source.render_pairwise_ranked(lowest, value_type, index_type, rows=rows),
    ]
    for kernel in kernels:
        assert f"#define SR_R {rows}" in kernel.source and "__ffsll" in kernel.source
        assert len(cuda_compile.compile_cached(kernel)) > 0
    for sr in (semiring.plus_absdiff, semiring.plus_times, semiring.max_times):
        with pytest.raises(ValueError, match="max- or min-monoid union"):
            cuda_source.render_pairwise_ranked(sr, value_type, index_type)
    with pytest.raises(ValueError, match="rows must be 1, 2, 4 or 8"):
        cuda_source.render_pairwise_ranked(lowest, value_type, index_type, rows=16)


@pytest.mark.parametrize("value_type, index_type", [("float32", "int32"), ("float64", "int64")])
def test_extrema_kernel_compiles_for_max_and_min_unions_and_refuses_others(value_type, index_type):
    """The extrema kernel for chebyshev (with its expansion written as each entry is) and for a min-union
    product; sums and intersections are refused by name."""
    chebyshev = next(d for d in DISTANCES if d.name == "chebyshev")
    lowest = semiring.Semiring(semiring.monoid.min, semiring.binary_op("-abs(x - y)"))
    kernels = [
        cuda_source.render_pairwise_extrema(
            chebyshev.terms[0], value_type, index_type, chebyshev.expansion_tree, (), None, "chebyshev", index_type
        ),
        cuda_source.render_pairwise_extrema(lowest, value_type, index_type),
    ]
    for kernel in kernels:
        assert "sr_merged(" in kernel.source and len(cuda_compile.compile_cached(kernel)) > 0
    for sr in (semiring.plus_absdiff, semiring.plus_times, semiring.max_times):
        with pytest.raises(ValueError, match="max- or min-monoid union"):
            cuda_source.render_pairwise_extrema(sr, value_type, index_type)


@pytest.mark.parametrize("value_type", ["float32", "float64"])
@pytest.mark.parametrize("norms", [(), ("sumsq",), ("sum", "sumsq")])
def test_dense_rows_kernel_compiles(value_type, norms):
    """The dense rows' check and norms in one pass: a sum and a store for each norm, none for an absent one."""
    trees = tuple(E.parse(NORMS[name], ("x",))[0] for name in norms)
    kernel = cuda_source.render_dense_rows(trees, "_".join(norms) or "none", value_type)
    for k in range(2):
        assert (f"norm{k}[row] = acc{k};" in kernel.source) == (k < len(norms))
    assert len(cuda_compile.compile_cached(kernel)) > 0
    three = tuple(E.parse(NORMS[name], ("x",))[0] for name in ("sum", "sumsq", "sum"))
    with pytest.raises(ValueError, match="at most two row norms"):
        cuda_source.render_dense_rows(three, "three", value_type)


@pytest.mark.parametrize("value_type", ["float32", "float64"])
def test_transpose_kernel_compiles(value_type):
    """The all-pairs selection's transposed pushes: one kernel a value type, its square in shared memory."""
    kernel = cuda_source.render_transpose(value_type)
    assert kernel.name == f"sr_transpose_{value_type}" and "__shared__" in kernel.source
    assert len(cuda_compile.compile_cached(kernel)) > 0


def _dense_measures():
    from semiring.distances.bound import _dense_form

    return [d for d in DISTANCES if _dense_form(d)]


@pytest.mark.parametrize("d", _dense_measures(), ids=lambda d: d.name)
@pytest.mark.parametrize("value_type", ["float32", "float64"])
@pytest.mark.parametrize("symmetric", [False, True])
def test_dense_measure_kernel_compiles(d, value_type, symmetric):
    """Every measure the dense path takes, over GEMM's product and SYRK's triangle: the expansion, and where the
    measure refines, the exact recomputation from the rows in the thread that flags the entry."""
    when = refine = None
    if d.refine is not None:
        when = E.parse(d.refine.when, tuple(cuda_source.EXPANSION_ARGS))[0]
        refine = (d.refine.semiring, E.parse(d.refine.expansion, tuple(cuda_source.EXPANSION_ARGS))[0])
    kernel = cuda_source.render_dense_measure(
        d.expansion_tree, tuple(d.param_names), when, refine, d.name, value_type, symmetric
    )
    assert ("sr_mult(x[k], y[k], rparams)" in kernel.source) == (d.refine is not None)
    assert ("__shared__" in kernel.source) == symmetric
    assert len(cuda_compile.compile_cached(kernel)) > 0


@pytest.mark.parametrize("T, bits", [(np.float32, np.uint32), (np.float64, np.uint64)])
def test_dense_verdict_reads_the_magnitudes_from_their_bits(T, bits):
    """The dense check's slots as validation reads them: counts as they are, the smallest magnitude from its
    bits' complement (a subnormal too) and the largest from its bits, ``(inf, 0)`` where no value is nonzero
    (every slot left at its start, 0)."""
    from semiring.kernels.cuda.dense import _verdict

    low, high = np.array([np.finfo(T).smallest_subnormal, 3.5], T).view(bits).astype(np.int64)
    found = _verdict(np.array([2, 1, cuda_source.DENSE_NO_VALUE - low, high], np.int64), T)
    assert found == {"nan": 2, "inf": 1, "magnitudes": (float(np.finfo(T).smallest_subnormal), 3.5)}
    empty = _verdict(np.zeros(len(cuda_source.DENSE_VERDICT), np.int64), T)
    assert empty == {"nan": 0, "inf": 0, "magnitudes": (np.inf, 0.0)}


def test_dense_path_takes_one_plain_product_and_leaves_host_rows_to_csr():
    """The measures the dense rows' path computes (one ``plus_times`` of the rows as given, refined by a semiring
    if at all), and NumPy rows left to the CSR route (``dense_device_pair`` is for CuPy arrays)."""
    from semiring import validation

    assert [d.name for d in _dense_measures()] == ["cosine", "euclidean", "inner_product", "seuclidean", "sqeuclidean"]
    assert validation.dense_device_pair(np.ones((2, 3)), None) is None
