"""Every distance measure as a declaration: semiring products + row norms + an expansion.

A measure is computed in four steps, each generated from this table:

1. ``prepare`` the rows: ``"binary"`` (x ≠ 0 → 1), ``"l1"`` (divide each
   row by its sum) or ``"sqrt_l1"`` (then take square roots), or leave them;
2. ``terms``: one semiring product per term, ``c0[i, j]``, ``c1[i, j]``;
3. ``norms``: row reductions of X (``nx0``, ``nx1``) and of Y (``ny0``, ``ny1``);
4. ``expansion``: an elementwise expression of those and ``n`` (the number of
   columns) that gives the result.

``refine`` (euclidean, sqeuclidean) recomputes, exactly, the entries where the
expanded form cancels catastrophically (near-duplicate rows): the reference
implementation zeroed such results; we compute them over the union instead.

A row also declares what the rest of the package reads about the measure: its
aliases, its name for SciPy's ``cdist`` (the command line's ``--check`` and the
tests' oracles use it), its parameters with their defaults, rules and
command-line flags (``Param``), and the parameter values at which it is
another measure (``Rewrite``).  ``resolve_metric`` applies them.  Adding a
measure is one row here and one oracle in ``tests/oracles.py``.

The docs' table of measures is generated from ``DISTANCES`` (see
``distances.measures_table``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache

import numpy as np
import scipy.sparse as sp

from semiring import Semiring, arrays, binary_op, monoid, validation
from semiring import expr as _expr
from semiring.expr import root_of_product
from semiring.interfaces import EXPANSION_VARIABLES
from semiring.ops import BUILTIN_SEMIRINGS as B

from .exact import centred_correlation

# Row norms: Σ_k f(x_k) over each row's stored values.
NORMS = {"sum": "x", "sumsq": "x * x"}


@cache
def expression(text: str, variables: tuple[str, ...]) -> _expr.Node:
    """A spec's expression (expansion, norm, refinement) parsed once, not on every call and batch."""
    return _expr.parse(text, variables)[0]


def _sr(name: str, mult: str, add=monoid.plus, **params: float) -> Semiring:
    return Semiring(add, binary_op(mult, name=name, **params), name=f"{add.name}_{name}")


@dataclass(frozen=True)
class Refinement:
    """Where ``when`` holds (the expanded form cancels, or a norm overflowed), recompute the entry exactly: as
    ``expansion(c0)`` with ``c0`` from the union product ``semiring`` (euclidean's ``Σ(x−y)²``), or, where no
    semiring product is exact (correlation's row means), as ``exact(X, Y, rows, cols)``: an array function
    of the prepared rows and the listed entries, NumPy or CuPy alike (``semiring.distances.exact``)."""

    when: str
    semiring: Semiring | None = None
    expansion: str = "c0"
    exact: Callable | None = None


@dataclass(frozen=True)
class Param:
    """A measure's parameter: its default, the rule a value must satisfy, and the command line's flag for it.

    ``check(value, name, rule)`` returns the value as a float or raises naming
    the parameter and the rule (``semiring.validation.check_positive``).
    """

    name: str
    default: float
    rule: str = "> 0"
    check: Callable[[object, str, str], float] = validation.check_positive
    flag: str | None = None  # the ``semiring`` command's option, None where it has none
    help: str = ""
    # SciPy's ``param=None``: left out of the checked values unless given, as SciPy's cdist takes no such
    # keyword (jensenshannon's base); the measure reads the default then (``Distance.param_values``)
    optional: bool = False


@dataclass(frozen=True)
class ColumnParam:
    """A parameter with one value per column (SciPy's ``w``, seuclidean's ``V``) that enters as a column scaling.

    Column ``k`` of X and Y is multiplied by ``scale(values, params)[k]`` before the measure: SciPy's weighted
    minkowski is ``(Σ w|x−y|^p)^(1/p)``, the unweighted one on columns scaled by ``w^(1/p)``.  Measures whose
    weighted form is not a column scaling (hamming's ``Σw[x≠y]/Σw``, canberra, correlation's weighted means,
    the boolean measures) declare none and refuse ``w`` with that reason.  ``default`` ``"variance"``: SciPy's
    default ``V``, each column's variance (``ddof=1``) over the rows of X and Y stacked (of X alone for
    X against itself, as ``pdist``).
    """

    name: str
    rule: str  # every value's rule, as the error states it: ">= 0" or "> 0"
    scale: Callable[[np.ndarray, dict], np.ndarray]
    default: str | None = None

    def check(self, value, n_features: int, metric: str) -> np.ndarray:
        """The values as a float64 vector of one per column, or an error naming the parameter and the rule."""
        try:
            v = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"{self.name} must be an array of real numbers, got {type(value).__name__}") from None
        if v.ndim != 1 or v.size != n_features:
            raise ValueError(
                f"{self.name} must be 1-D with one value per column ({n_features}) for {metric}, got shape {v.shape}"
            )
        good = np.isfinite(v) & ((v > 0) if self.rule == "> 0" else (v >= 0))
        if not good.all():
            k = int(np.flatnonzero(~good)[0])
            raise ValueError(
                f"{self.name} must be finite and {self.rule} for {metric}, got {float(v[k])!r} at column {k}"
            )
        return v

    def default_values(self, X: sp.csr_matrix, Y: sp.csr_matrix, metric: str) -> np.ndarray:
        """SciPy's default: each column's variance (ddof=1) over the rows of X and Y stacked; a constant column
        (its variance 0, a division by 0) is refused, checked without n-sized work where a column has no value.

        Sums over a chunk of entries at a time (``validation.entry_chunks``), so the temporaries stay bounded:
        in one piece the float64 copies took 540 MiB of an H200 on scRNA-like rows.  Two passes (the mean,
        then the squared deviations from it), as NumPy's ``var`` does, not Σx² − m·mean², which cancels.
        """
        xp = arrays.array_module(X)  # computed where the rows are: NumPy, or CuPy on the GPU
        parts = [(A.indices, A.data, int(A.indptr[-1])) for A in ((X,) if Y is X else (X, Y))]
        m, n = (X.shape[0] if Y is X else X.shape[0] + Y.shape[0]), X.shape[1]
        if m < 2:
            self._refuse_constant(0, metric, m)
        if sum(nnz for _, _, nnz in parts) < n:  # some column holds no value: constant (0), refused
            stored = xp.unique(xp.concatenate([cols[:nnz] for cols, _, nnz in parts]))
            self._refuse_constant(int(xp.setdiff1d(xp.arange(stored.size + 1), stored)[0]), metric, m)

        def column_sums(term):
            total = xp.zeros(n, np.float64)
            for cols, data, nnz in parts:
                for e0, e1 in validation.entry_chunks(nnz):
                    total += xp.bincount(cols[e0:e1], weights=term(cols[e0:e1], data[e0:e1]), minlength=n)
            return total

        counts = column_sums(lambda cols, data: xp.ones(cols.size, np.float64))  # stored values a column
        if not bool((counts > 0).all()):
            self._refuse_constant(int(xp.flatnonzero(counts == 0)[0]), metric, m)
        mean = column_sums(lambda cols, data: data.astype(np.float64)) / m
        dev = column_sums(lambda cols, data: (data - mean[cols]) ** 2)
        var = (dev + (m - counts) * mean**2) / (m - 1)  # the columns' zeros, each (0 - mean)^2
        if not bool(xp.isfinite(var).all()):
            k = int(xp.flatnonzero(~xp.isfinite(var))[0])
            raise ValueError(
                f"column {k}'s variance overflows float64 (values beyond about 1e154), so {metric}'s default "
                f"{self.name} cannot be computed; pass {self.name}= with every value > 0 and finite"
            )
        if not bool((var > 0).all()):
            self._refuse_constant(int(xp.flatnonzero(~(var > 0))[0]), metric, m)
        return var

    def _refuse_constant(self, column: int, metric: str, rows: int):
        if rows < 2:
            raise ValueError(f"{metric} needs {self.name}= with fewer than 2 rows: the default is a sample variance")
        raise ValueError(
            f"column {column} is constant, so {metric}'s default {self.name} (the column variances) divides by 0 "
            f"there (SciPy's cdist gives NaN everywhere); pass {self.name}= with every value > 0"
        )


@dataclass(frozen=True)
class Rewrite:
    """Where parameter ``param`` equals ``value`` the measure is ``to`` (with its defaults)."""

    param: str
    value: float
    to: str

    def __str__(self) -> str:
        return f"{self.param} = {self.value:g} gives {self.to}"


@dataclass(frozen=True)
class OnNonnegative:
    """A cheaper form of a measure for rows with no negative value: its first ``keep`` terms, and an expansion
    reading norms in place of the others (braycurtis's ``Σ|x+y|`` is ``Σx + Σy`` there: a union product less,
    and one ``m × n`` term less in memory)."""

    keep: int
    expansion: str
    norms: tuple[str, ...]


@dataclass(frozen=True)
class Distance:
    """One measure, one row: how it is computed, what it takes, and what SciPy calls it.

    ``scipy`` is the measure's name for ``scipy.spatial.distance.cdist`` (None
    where SciPy has no such measure): the command line's ``--check`` and the
    tests' oracles compare with it.  ``parameters`` are declared with their
    defaults and rules; ``rewrites`` name the parameter values at which the
    measure is another one.
    """

    name: str
    terms: tuple[Semiring, ...]
    expansion: str
    norms: tuple[str, ...] = ()
    # Expressions of a row's norms (nx0, nx1) and n, one for each norm, that take the norms' places once they
    # are summed: the row-only parts of the expansion (and of its refinement test), computed once a row instead
    # of at every pair.  The expansion reads them as nx*/ny*.
    row_terms: tuple[str, ...] = ()
    prepare: str = "none"
    aliases: tuple[str, ...] = ()
    parameters: tuple[Param, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()
    nonnegative: bool = False
    similarity: bool = False
    symmetric: bool = True  # d(x, y) = d(y, x): an all-pairs kNN computes each pair once for both rows
    # d(a·x, b·y) = d(x, y) for a, b > 0: rows at the ends of float64's range are scaled into it first
    # (``measure.rows_in_range``), where their squares and products would over- or underflow
    row_scale_free: bool = False
    scipy: str | None = None
    refine: Refinement | None = None
    columns: ColumnParam | None = None
    on_nonnegative: OnNonnegative | None = None
    formula: str = ""
    note: str = ""

    def for_rows(self, *matrices) -> Distance:
        """The measure's form for these (checked) rows: ``on_nonnegative``'s where it has one and no row holds
        a negative value, else itself."""
        form = self.on_nonnegative
        if form is None or not all(validation.is_nonnegative(A) for A in matrices):
            return self
        return replace(
            self,
            terms=self.terms[: form.keep],
            expansion=form.expansion,
            norms=form.norms,
            row_terms=(),
            on_nonnegative=None,
        )

    @property
    def params(self) -> dict[str, float]:
        """The parameters' defaults, by name."""
        return {p.name: p.default for p in self.parameters}

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def param_values(self, values: dict) -> list[float]:
        """Every parameter's value in declaration order, the default for an optional one not given."""
        return [values.get(p.name, p.default) for p in self.parameters]

    def rule(self, param: Param) -> str:
        """The rule for ``param`` as its error message states it: ``> 0 for minkowski (p = inf gives chebyshev)``."""
        rewrites = "; ".join(str(r) for r in self.rewrites if r.param == param.name)
        return f"{param.rule} for {self.name}" + (f" ({rewrites})" if rewrites else "")

    @property
    def expansion_tree(self) -> _expr.Node:
        return expression(self.expansion, EXPANSION_VARIABLES + self.param_names)

    @property
    def row_term_trees(self) -> tuple[_expr.Node, ...]:
        return tuple(expression(t, EXPANSION_VARIABLES) for t in self.row_terms)

    @property
    def family(self) -> str:
        return "union" if any(t.is_union for t in self.terms) else "intersection"


def _clip02(value: str) -> str:
    """Clip to [0, 2] keeping NaN (as SciPy's np.clip does): rounding can step outside."""
    return f"d = {value}; 0.0 if d < 0.0 else (2.0 if d > 2.0 else d)"


# Where d² is small next to the norms it was computed from (two zero rows are exact already), and where a
# norm overflowed (‖x‖² of 1e200 is inf, and inf − inf is NaN): 'not (d > ...)' holds for NaN too.
_EUCLID_WHEN = "s = nx0 + ny0; not (s - 2.0 * c0 > 1e-3 * s) and s > 0.0 or not (s < inf)"

# Correlation's sums cancel where a row's spread is small next to its mean (a row of values near 1e8): its
# variance n·Σx² − (Σx)² or the covariance loses the digits.  Flagged where either variance keeps less than
# 1e-3 of Σx², or the terms of the covariance exceed 1e3 times its scale; NaN (an overflowed norm) included.
# |Σx·Σy / n| is written as the expansion's Σx·Σy / n inside abs (the same value: a division rounds the same
# either sign), so the kernel divides by n once an entry for both.
# Correlation's row terms (``Distance.row_terms``): a = Σx/√n, so that a_x·a_y is Σx·Σy/n, and the centred sum of
# squares v = Σx² − a², as the expansion's covariance is for the row against itself (so a row's distance to itself
# is 0 where its product equals its Σx²).  A row whose v cancels (at most 1e-3 of Σx²: a large mean next to its
# spread, or a constant row) gets NaN, which the refinement test flags; a zero row gets 0, NaN distances (0/0) as
# SciPy's, not flagged.  Per pair that leaves one product, one square root and one division: at each pair the
# three divisions by n and the variances' tests took 1.9 ms of a 3.1 ms EDGAR-like kernel (ncu, H200).
_CORRELATION_ROWS = (
    "nx0 / sqrt(n)",
    "a = nx0 / sqrt(n); v = nx1 - a * a; v if v > 1e-3 * nx1 else (0.0 if nx1 == 0.0 else nan)",
)
_CORRELATION_WHEN = (
    "q = nx1 * ny1; not (abs(c0) + abs(nx0 * ny0) < 1e3 * "
    + root_of_product("q", "nx1", "ny1")
    + ") and not (nx1 == 0.0) and not (ny1 == 0.0)"
)

# Minkowski's Σ|x−y|^p overflows float64 for |x−y| > 2 at p above ~1024, and underflows to 0 below 0.5: p = 1e308
# gave 0 for every pair.  Finite p is capped there (p = inf is chebyshev, exactly); SciPy accepts any p, and
# returns the same overflowed numbers.
_MINKOWSKI_MAX_P = 1024.0


def _check_minkowski_p(value, name: str, rule: str) -> float:
    p = validation.check_positive(value, name, rule)
    if _MINKOWSKI_MAX_P < p < math.inf:
        raise ValueError(
            f"{name} must be {rule}, got {p!r}: |x - y| ** p overflows float64 above p = {_MINKOWSKI_MAX_P:g} "
            "(use p = inf for chebyshev, the limit)"
        )
    return p


_MINKOWSKI_P = Param(
    "p", 2.0, rule="> 0 and <= 1024, or inf", check=_check_minkowski_p, flag="-p", help="Minkowski's p"
)


def _check_log_base(value, name: str, rule: str) -> float:
    """A logarithm's base: a finite real number > 1.  SciPy also takes a base in (0, 1), where the divergence
    turns negative and its square root NaN: refused here instead."""
    base = validation.check_positive(value, name, rule)
    if base <= 1.0 or math.isinf(base):
        raise ValueError(f"{name} must be {rule}, got {base!r}")
    return base


def _weights(power: Callable[[dict], float]) -> ColumnParam:
    """SciPy's ``w``, entering as the columns scaled by ``w ** power(params)``."""
    return ColumnParam("w", ">= 0", lambda w, params: w ** power(params))


_W_SQRT = _weights(lambda params: 0.5)
_W_LINEAR = _weights(lambda params: 1.0)

# The boolean measures' counts on x≠0: c0 = |x∩y|, nx0 = |x|, ny0 = |y|, n columns.
_DIFFER = "u = nx0 + ny0 - 2.0 * c0; "  # |x Δ y|: columns where exactly one is nonzero

DISTANCES: tuple[Distance, ...] = (
    Distance(
        "braycurtis",
        (B["plus_absdiff"], _sr("abssum", "abs(x + y)")),
        "c0 / c1",
        scipy="braycurtis",
        columns=_W_LINEAR,
        on_nonnegative=OnNonnegative(1, "c0 / (nx0 + ny0)", ("sum",)),
        formula="Σ|x−y| / Σ|x+y|",
        note="NaN for two empty rows (0/0), as SciPy.",
    ),
    Distance(
        "canberra",
        (_sr("canberra", "abs(x - y) / (abs(x) + abs(y)) if abs(x) + abs(y) > 0 else 0.0"),),
        "c0",
        scipy="canberra",
        formula="Σ|x−y| / (|x|+|y|), 0/0 = 0",
    ),
    Distance(
        "chebyshev",
        (B["max_absdiff"],),
        "c0 if n > 0.0 else 0.0",  # the max over no column is max's identity, -inf; SciPy's is 0
        aliases=("linf",),
        scipy="chebyshev",
        columns=ColumnParam("w", ">= 0", lambda w, params: (w > 0).astype(np.float64)),
        formula="max|x−y|",
        note="With w, the maximum over the columns where w > 0, as SciPy.",
    ),
    Distance(
        "cityblock",
        (B["plus_absdiff"],),
        "c0",
        aliases=("manhattan", "l1", "taxicab"),
        scipy="cityblock",
        columns=_W_LINEAR,
        formula="Σ|x−y|",
    ),
    Distance(
        "correlation",
        (B["plus_times"],),
        "cov = c0 - nx0 * ny0; q = nx1 * ny1; " + _clip02(f"1.0 - cov / {root_of_product('q', 'nx1', 'ny1')}"),
        norms=("sum", "sumsq"),
        row_terms=_CORRELATION_ROWS,
        scipy="correlation",
        refine=Refinement(_CORRELATION_WHEN, exact=centred_correlation),
        row_scale_free=True,
        formula="1 − (x−x̄)·(y−ȳ) / (‖x−x̄‖‖y−ȳ‖)",
        note="Expanded through row sums; entries where those cancel (a row's mean large next to its spread) are "
        "recomputed exactly from centred sums. NaN for constant rows, as SciPy. Clipped to [0, 2] as SciPy.",
    ),
    Distance(
        "cosine",
        (B["plus_times"],),
        "q = nx0 * ny0; " + _clip02(f"1.0 - c0 / {root_of_product('q', 'nx0', 'ny0')}"),
        norms=("sumsq",),
        scipy="cosine",
        columns=_W_SQRT,
        row_scale_free=True,
        formula="1 − x·y / (‖x‖‖y‖)",
        note="NaN for an empty row (0/0), as SciPy. Clipped to [0, 2] as SciPy.",
    ),
    Distance(
        "dice",
        (B["plus_times"],),
        "u = nx0 + ny0; (u - 2.0 * c0) / u if u > 0.0 else 0.0",
        norms=("sum",),
        prepare="binary",
        scipy="dice",
        formula="(|x|+|y|−2|x∩y|) / (|x|+|y|) on x≠0",
        note="On the nonzero pattern (SciPy's boolean definition). 0 for two empty rows, where SciPy "
        "gives NaN: identical rows are at distance 0, as SciPy's jaccard defines.",
    ),
    Distance(
        "euclidean",
        (B["plus_times"],),
        "sqrt(max(nx0 + ny0 - 2.0 * c0, 0.0))",
        norms=("sumsq",),
        aliases=("l2",),
        scipy="euclidean",
        columns=_W_SQRT,
        refine=Refinement(_EUCLID_WHEN, B["plus_sqdiff"], "sqrt(c0)"),
        formula="√(‖x‖² + ‖y‖² − 2x·y)",
        note="Entries where the expansion cancels (d² ≤ 1e-3·(‖x‖²+‖y‖²)) are recomputed exactly over the union.",
    ),
    Distance(
        "hamming",
        (_sr("ne", "x != y"),),
        "c0 / n",
        scipy="hamming",
        formula="Σ[x≠y] / n",
    ),
    Distance(
        "hellinger",
        (B["plus_times"],),  # Σ√(x̂ŷ) = Σ√x̂·√ŷ on the rows' square roots: a dot product, every fast path's
        "sqrt(max(1.0 - c0, 0.0)) if nx0 > 0.0 and ny0 > 0.0 else nan",
        norms=("sum",),
        prepare="sqrt_l1",
        nonnegative=True,
        refine=Refinement("1.0 - c0 <= 1e-3 and nx0 > 0.0 and ny0 > 0.0", B["plus_sqdiff"], "sqrt(c0 / 2.0)"),
        formula="√(1 − Σ√(x̂ŷ)), x̂ = x/Σx",
        note="Rows are L1-normalised, then square-rooted (so Σ√(x̂ŷ) is a dot product); NaN for an empty row (no "
        "distribution), as SciPy's jensenshannon. Near-identical rows are recomputed exactly as √(½Σ(√x̂−√ŷ)²).",
    ),
    Distance(
        "inner_product",
        (B["plus_times"],),
        "c0",
        aliases=("dot",),
        similarity=True,
        formula="x·y",
        note="A similarity: larger is closer.",
    ),
    Distance(
        "jaccard",
        (B["plus_times"],),
        "u = nx0 + ny0 - c0; (u - c0) / u if u > 0.0 else 0.0",
        norms=("sum",),
        prepare="binary",
        scipy="jaccard",
        formula="1 − |x∩y| / |x∪y| on x≠0",
        note="On the nonzero pattern, as SciPy ≥ 1.15; 0 for two empty rows, as SciPy.",
    ),
    Distance(
        "jensenshannon",
        # log(2x/(x+y)) written log(2) + log(x/(x+y)): f(x, 0) is then x·log 2 (x/x = 1, log 1 = 0), and the cross
        # op of the margin split, which runs at every shared column of every pair, takes two logarithms, not four
        (
            _sr(
                "js",
                "(x * (log(2.0) + log(x / (x + y))) if x > 0 else 0.0) + (y * (log(2.0) + log(y / (x + y))) if y > 0 else 0.0)",
            ),
        ),
        "sqrt(max(c0, 0.0) / (2.0 * log(base))) if nx0 > 0.0 and ny0 > 0.0 else nan",
        norms=("sum",),
        prepare="l1",
        parameters=(
            Param(
                "base",
                math.e,
                rule="> 1 (and finite)",
                check=_check_log_base,
                help="the logarithm's base",
                optional=True,
            ),
        ),
        nonnegative=True,
        scipy="jensenshannon",
        formula="√(½ Σ x̂ log(2x̂/(x̂+ŷ)) + ŷ log(2ŷ/(x̂+ŷ)))",
        note="Natural log unless base= is given (SciPy's base); rows L1-normalised as SciPy. NaN for an all-zero row (0/0 normalisation), as "
        "scipy.spatial.distance.jensenshannon; cdist's loop returns inf there. Rounding below 0 is clamped "
        "before the square root, where cdist returns NaN (e.g. [1, 0] against [843.5, 0]).",
    ),
    Distance(
        "kldivergence",
        (_sr("rel_entr", "x * log(x / y) if x > 0 else 0.0"),),
        "c0",
        nonnegative=True,
        symmetric=False,
        formula="Σ x log(x/y), 0·log 0 = 0, +inf where x > 0 = y",
        note="Not normalised and not symmetric: KL(X[i] ‖ Y[j]) = Σ scipy.special.rel_entr(x, y).",
    ),
    Distance(
        "kl_divergence",
        (_sr("kl_raft", "x * (log(x) - (log(y) if y > 0 else 0.0)) if x > 0 else 0.0"),),
        "0.5 * c0",
        nonnegative=True,
        symmetric=False,
        formula="½ Σ x (log x − log y), log 0 read as 0",
        note="cuML's (RAFT's) kl_divergence: half of kldivergence where y > 0, and finite where x > 0 = y "
        "(log y is taken as 0 there, where kldivergence gives +inf).",
    ),
    Distance(
        "minkowski",
        (_sr("powdiff", "abs(x - y) ** p", p=_MINKOWSKI_P.default),),
        "c0 ** (1.0 / p)",
        aliases=("lp",),
        parameters=(_MINKOWSKI_P,),
        # SciPy's cdist takes the same three turns: p = 1 and 2 are cityblock and euclidean (whose weights enter as
        # w and √w, minkowski's w^(1/p) there), so they run those rows' faster forms (no power of each term).
        rewrites=(Rewrite("p", 1.0, "cityblock"), Rewrite("p", 2.0, "euclidean"), Rewrite("p", math.inf, "chebyshev")),
        scipy="minkowski",
        columns=_weights(lambda params: 1.0 / params["p"]),
        formula="(Σ|x−y|^p)^(1/p)",
        note="With the absolute value for odd p.",
    ),
    Distance(
        "rogerstanimoto",
        (B["plus_times"],),
        _DIFFER + "2.0 * u / (n + u)",
        norms=("sum",),
        prepare="binary",
        scipy="rogerstanimoto",
        formula="2|x Δ y| / (n + |x Δ y|) on x≠0",
        note="On the nonzero pattern (SciPy's boolean definition).",
    ),
    Distance(
        "russellrao",
        (B["plus_times"],),
        "(n - c0) / n",
        prepare="binary",
        scipy="russellrao",
        formula="(n − |x∩y|) / n on x≠0",
        note="On the nonzero pattern (SciPy's boolean definition); the diagonal is not forced to 0.",
    ),
    Distance(
        "seuclidean",
        (B["plus_times"],),
        "sqrt(max(nx0 + ny0 - 2.0 * c0, 0.0))",
        norms=("sumsq",),
        scipy="seuclidean",
        refine=Refinement(_EUCLID_WHEN, B["plus_sqdiff"], "sqrt(c0)"),
        columns=ColumnParam("V", "> 0", lambda V, params: 1.0 / np.sqrt(V), default="variance"),
        formula="√(Σ (x−y)² / V)",
        note="Euclidean on the columns divided by √V; V defaults to the column variances (ddof=1) of X and Y "
        "stacked (of X alone for X against itself, as pdist), and a constant column is refused there.",
    ),
    Distance(
        "sokalsneath",
        (B["plus_times"],),
        _DIFFER + "d = c0 + 2.0 * u; 2.0 * u / d if d > 0.0 else nan",
        norms=("sum",),
        prepare="binary",
        scipy="sokalsneath",
        formula="2|x Δ y| / (|x∩y| + 2|x Δ y|) on x≠0",
        note="On the nonzero pattern; NaN for two empty rows (0/0), as SciPy.",
    ),
    Distance(
        "sqeuclidean",
        (B["plus_times"],),
        "max(nx0 + ny0 - 2.0 * c0, 0.0)",
        norms=("sumsq",),
        scipy="sqeuclidean",
        columns=_W_SQRT,
        refine=Refinement(_EUCLID_WHEN, B["plus_sqdiff"], "c0"),
        formula="‖x‖² + ‖y‖² − 2x·y",
        note="Cancelling entries recomputed exactly, as euclidean.",
    ),
    Distance(
        "yule",
        (B["plus_times"],),
        "tf = nx0 - c0; ft = ny0 - c0; ff = n - nx0 - ny0 + c0; h = tf * ft; "
        "2.0 * h / (c0 * ff + h) if h > 0.0 else 0.0",
        norms=("sum",),
        prepare="binary",
        scipy="yule",
        formula="2·TF·FT / (TT·FF + TF·FT) on x≠0, 0 where TF·FT = 0",
        note="On the nonzero pattern (SciPy's boolean definition).",
    ),
)

# Refused by name, with the reason (``get_metric`` states it).
REFUSED = {
    "mahalanobis": "it needs the inverse covariance VI, a dense features × features matrix, and the whitened "
    "rows it implies are dense: whiten X yourself (X @ cholesky(VI)) and use 'euclidean'",
}

METRICS: dict[str, Distance] = {}
for _d in DISTANCES:
    for _name in (_d.name, *_d.aliases):
        METRICS[_name] = _d


def get_metric(metric) -> Distance:
    """The spec of ``metric`` (a name or alias), or an error listing the known names."""
    if isinstance(metric, Distance):
        return metric
    if isinstance(metric, str) and metric.lower() in METRICS:
        return METRICS[metric.lower()]
    if callable(metric):
        raise TypeError(
            f"metric must be the name of a measure, got the callable {getattr(metric, '__name__', metric)!r}: "
            "every measure runs as kernels generated from its declaration (semiring.distances.specs), which a "
            "Python function cannot be turned into; use a named metric, or scikit-learn for a callable"
        )
    if isinstance(metric, str) and metric.lower() in REFUSED:
        raise ValueError(f"metric {metric!r} is not supported: {REFUSED[metric.lower()]}")
    known = ", ".join(sorted(METRICS))
    raise ValueError(f"unknown metric {metric!r}; known metrics: {known}")


def _check_params(spec: Distance, params: dict) -> dict:
    """Every parameter's value (given, else its default), each checked by its declared rule."""
    unknown = set(params) - set(spec.param_names)
    if unknown:
        takes = f"it takes {', '.join(spec.param_names)}" if spec.parameters else "it takes no parameters"
        raise TypeError(f"metric {spec.name!r} got unexpected parameter(s) {sorted(unknown)}; {takes}")
    given = [p for p in spec.parameters if not (p.optional and params.get(p.name) is None)]
    return {p.name: p.check(params.get(p.name, p.default), p.name, spec.rule(p)) for p in given}


def split_columns(metric, params: dict) -> tuple[dict, object]:
    """``params`` without the measure's per-column parameter (``w``, ``V``), and that one's value (None when
    not given); ``w`` for a measure that takes none is refused with the reason.

    >>> split_columns("minkowski", {"p": 3, "w": [1, 2]})
    ({'p': 3}, [1, 2])
    """
    spec = get_metric(metric)
    name = spec.columns.name if spec.columns is not None else None
    if "w" in params and name != "w":
        takes = sorted({d.name for d in DISTANCES if d.columns is not None and d.columns.name == "w"})
        raise TypeError(
            f"metric {spec.name!r} takes no weights w: its weighted form is not the measure on scaled columns; "
            f"w= is taken by {', '.join(takes)}"
        )
    rest = {k: v for k, v in params.items() if k != name}
    return rest, params.get(name) if name is not None else None


def column_scale(spec: Distance, values: dict, given, X: sp.csr_matrix, Y: sp.csr_matrix) -> np.ndarray | None:
    """The factor each column of X and Y is multiplied by (see ``ColumnParam``), or None for none."""
    cp = spec.columns
    if cp is None or (given is None and cp.default is None):
        return None
    v = cp.default_values(X, Y, spec.name) if given is None else cp.check(given, X.shape[1], spec.name)
    return arrays.array_module(v).asarray(cp.scale(v, values), dtype=np.float64)


def dask_column_defaults(metric, params: dict, X, Y=None) -> dict:
    """``params`` with the measure's per-column default (seuclidean's ``V``) computed over every row of the Dask
    arrays X and Y stacked (X alone where Y is None), as ``ColumnParam.default_values`` computes it over one
    machine's whole input: two passes over the row blocks on the workers (each column's stored count and sum,
    then the squared deviations from the mean).  Unchanged where the measure has no such default or the caller
    gave the values.  Per block, the default would be each block's own variance."""
    from semiring import dask as _sdask

    spec = get_metric(metric)
    cp = spec.columns
    if cp is None or cp.default is None or params.get(cp.name) is not None:
        return params
    blocks = [b for A in ((X,) if Y is None else (X, Y)) for b in _sdask.as_row_blocks(A, "X").to_delayed()[:, 0]]
    import dask

    firsts = dask.compute(*[dask.delayed(_block_column_sums)(b) for b in blocks])
    m, n = sum(rows for rows, _, _ in firsts), X.shape[1]
    counts = sum(c for _, c, _ in firsts)
    if m < 2:
        cp._refuse_constant(0, spec.name, m)
    if not (counts > 0).all():
        cp._refuse_constant(int(np.flatnonzero(counts == 0)[0]), spec.name, m)
    mean = sum(t for _, _, t in firsts) / m
    dev = sum(dask.compute(*[dask.delayed(_block_column_deviations)(b, mean) for b in blocks]))
    var = (dev + (m - counts) * mean**2) / (m - 1)  # the columns' zeros, each (0 - mean)^2
    if not np.isfinite(var).all():
        k = int(np.flatnonzero(~np.isfinite(var))[0])
        raise ValueError(
            f"column {k}'s variance overflows float64 (values beyond about 1e154), so {spec.name}'s default "
            f"{cp.name} cannot be computed; pass {cp.name}= with every value > 0 and finite"
        )
    if not (var > 0).all():
        cp._refuse_constant(int(np.flatnonzero(~(var > 0))[0]), spec.name, m)
    assert var.shape == (n,)
    return {**params, cp.name: var}


def _host_rows(block):
    A = validation.check_matrix(block, "X")
    return A.get() if arrays.is_cupy(A) else A


def _block_column_sums(block):
    """(rows, stored values per column, their sums per column) of one row block, on the host."""
    A = _host_rows(block)
    nnz, n = int(A.indptr[-1]), A.shape[1]
    cols = A.indices[:nnz]
    return (
        A.shape[0],
        np.bincount(cols, minlength=n),
        np.bincount(cols, weights=A.data[:nnz].astype(np.float64), minlength=n),
    )


def _block_column_deviations(block, mean):
    """Σ (x − mean)² per column over one row block's stored values."""
    A = _host_rows(block)
    nnz = int(A.indptr[-1])
    cols = A.indices[:nnz]
    return np.bincount(cols, weights=(A.data[:nnz].astype(np.float64) - mean[cols]) ** 2, minlength=A.shape[1])


def resolve_metric(metric, params: dict) -> tuple[Distance, dict]:
    """The measure's spec and its parameter values, checked, with the row's rewrites applied.

    >>> resolve_metric("minkowski", {"p": 3})[1]
    {'p': 3.0}
    >>> resolve_metric("minkowski", {"p": 2})[0].name
    'euclidean'
    >>> resolve_metric("minkowski", {"p": float("inf")})[0].name
    'chebyshev'
    """
    spec = get_metric(metric)
    values = _check_params(spec, params)
    for rewrite in spec.rewrites:
        if values[rewrite.param] == rewrite.value:
            return resolve_metric(rewrite.to, {})
    return spec, values


__all__ = [
    "DISTANCES",
    "METRICS",
    "NORMS",
    "REFUSED",
    "ColumnParam",
    "Distance",
    "Param",
    "Refinement",
    "Rewrite",
    "column_scale",
    "dask_column_defaults",
    "expression",
    "get_metric",
    "resolve_metric",
    "split_columns",
]
