"""Every distance measure as a declaration: semiring products + row norms + an expansion.

A measure is computed in four steps, each generated from this table:

1. ``prepare`` the rows: ``"binary"`` (x ≠ 0 → 1) or ``"l1"`` (divide each
   row by its sum), or leave them;
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
``distances.describe``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from semiring import Semiring, binary_op, monoid, validation
from semiring import expr as _expr
from semiring.engine import EXPANSION_VARIABLES
from semiring.ops import BUILTIN_SEMIRINGS as B

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
    """Where ``when`` holds, recompute the entry as ``expansion(c0)`` with ``c0`` from ``semiring``."""

    when: str
    semiring: Semiring
    expansion: str


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


@dataclass(frozen=True)
class Rewrite:
    """Where parameter ``param`` equals ``value`` the measure is ``to`` (with its defaults)."""

    param: str
    value: float
    to: str

    def __str__(self) -> str:
        return f"{self.param} = {self.value:g} gives {self.to}"


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
    prepare: str = "none"
    aliases: tuple[str, ...] = ()
    parameters: tuple[Param, ...] = ()
    rewrites: tuple[Rewrite, ...] = ()
    nonnegative: bool = False
    similarity: bool = False
    scipy: str | None = None
    refine: Refinement | None = None
    formula: str = ""
    note: str = ""

    @property
    def params(self) -> dict[str, float]:
        """The parameters' defaults, by name."""
        return {p.name: p.default for p in self.parameters}

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def rule(self, param: Param) -> str:
        """The rule for ``param`` as its error message states it: ``> 0 for minkowski (p = inf gives chebyshev)``."""
        rewrites = "; ".join(str(r) for r in self.rewrites if r.param == param.name)
        return f"{param.rule} for {self.name}" + (f" ({rewrites})" if rewrites else "")

    @property
    def expansion_tree(self) -> _expr.Node:
        return expression(self.expansion, EXPANSION_VARIABLES + self.param_names)

    @property
    def family(self) -> str:
        return "union" if any(t.is_union for t in self.terms) else "intersection"


def _clip02(value: str) -> str:
    """Clip to [0, 2] keeping NaN (as SciPy's np.clip does): rounding can step outside."""
    return f"d = {value}; 0.0 if d < 0.0 else (2.0 if d > 2.0 else d)"


# Where d² is small next to the norms it was computed from (two zero rows are exact already), and where a
# norm overflowed (‖x‖² of 1e200 is inf, and inf − inf is NaN): 'not (d > ...)' holds for NaN too.
_EUCLID_WHEN = "s = nx0 + ny0; not (s - 2.0 * c0 > 1e-3 * s) and s > 0.0 or not (s < inf)"

_MINKOWSKI_P = Param("p", 2.0, flag="-p", help="Minkowski's p")

DISTANCES: tuple[Distance, ...] = (
    Distance(
        "braycurtis",
        (B["plus_absdiff"], _sr("abssum", "abs(x + y)")),
        "c0 / c1",
        scipy="braycurtis",
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
        formula="max|x−y|",
    ),
    Distance("cityblock", (B["plus_absdiff"],), "c0", aliases=("manhattan", "l1"), scipy="cityblock", formula="Σ|x−y|"),
    Distance(
        "correlation",
        (B["plus_times"],),
        "cov = c0 - nx0 * ny0 / n; vx = nx1 - nx0 * nx0 / n; vy = ny1 - ny0 * ny0 / n; "
        + _clip02("1.0 - cov / sqrt(vx * vy)"),
        norms=("sum", "sumsq"),
        scipy="correlation",
        formula="1 − (x−x̄)·(y−ȳ) / (‖x−x̄‖‖y−ȳ‖)",
        note="Expanded through row sums; NaN for constant rows, as SciPy. Clipped to [0, 2] as SciPy.",
    ),
    Distance(
        "cosine",
        (B["plus_times"],),
        _clip02("1.0 - c0 / sqrt(nx0 * ny0)"),
        norms=("sumsq",),
        scipy="cosine",
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
        (_sr("sqrt_times", "sqrt(x * y)"),),
        "sqrt(max(1.0 - c0, 0.0)) if nx0 > 0.0 and ny0 > 0.0 else nan",
        norms=("sum",),
        prepare="l1",
        nonnegative=True,
        refine=Refinement(
            "1.0 - c0 <= 1e-3 and nx0 > 0.0 and ny0 > 0.0",
            _sr("sqrt_diff_sq", "(sqrt(x) - sqrt(y)) ** 2.0"),
            "sqrt(c0 / 2.0)",
        ),
        formula="√(1 − Σ√(x̂ŷ)), x̂ = x/Σx",
        note="Rows are L1-normalised first; NaN for an empty row (no distribution), as SciPy's jensenshannon. "
        "Near-identical rows are recomputed exactly as √(½Σ(√x̂−√ŷ)²).",
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
        (_sr("js", "(x * log(2.0 * x / (x + y)) if x > 0 else 0.0) + (y * log(2.0 * y / (x + y)) if y > 0 else 0.0)"),),
        "sqrt(max(c0, 0.0) / 2.0) if nx0 > 0.0 and ny0 > 0.0 else nan",
        norms=("sum",),
        prepare="l1",
        nonnegative=True,
        scipy="jensenshannon",
        formula="√(½ Σ x̂ log(2x̂/(x̂+ŷ)) + ŷ log(2ŷ/(x̂+ŷ)))",
        note="Natural log; rows L1-normalised as SciPy. NaN for an all-zero row (0/0 normalisation), as "
        "scipy.spatial.distance.jensenshannon; cdist's loop returns inf there. Rounding below 0 is clamped "
        "before the square root, where cdist returns NaN (e.g. [1, 0] against [843.5, 0]).",
    ),
    Distance(
        "kldivergence",
        (_sr("rel_entr", "x * log(x / y) if x > 0 else 0.0"),),
        "c0",
        nonnegative=True,
        formula="Σ x log(x/y), 0·log 0 = 0, +inf where x > 0 = y",
        note="Not normalised and not symmetric: KL(X[i] ‖ Y[j]) = Σ scipy.special.rel_entr(x, y).",
    ),
    Distance(
        "minkowski",
        (_sr("powdiff", "abs(x - y) ** p", p=_MINKOWSKI_P.default),),
        "c0 ** (1.0 / p)",
        parameters=(_MINKOWSKI_P,),
        rewrites=(Rewrite("p", math.inf, "chebyshev"),),
        scipy="minkowski",
        formula="(Σ|x−y|^p)^(1/p)",
        note="With the absolute value for odd p.",
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
        "sqeuclidean",
        (B["plus_times"],),
        "max(nx0 + ny0 - 2.0 * c0, 0.0)",
        norms=("sumsq",),
        scipy="sqeuclidean",
        refine=Refinement(_EUCLID_WHEN, B["plus_sqdiff"], "c0"),
        formula="‖x‖² + ‖y‖² − 2x·y",
        note="Cancelling entries recomputed exactly, as euclidean.",
    ),
)

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
    known = ", ".join(sorted(METRICS))
    raise ValueError(f"unknown metric {metric!r}; known metrics: {known}")


def _check_params(spec: Distance, params: dict) -> dict:
    """Every parameter's value (given, else its default), each checked by its declared rule."""
    unknown = set(params) - set(spec.param_names)
    if unknown:
        takes = f"it takes {', '.join(spec.param_names)}" if spec.parameters else "it takes no parameters"
        raise TypeError(f"metric {spec.name!r} got unexpected parameter(s) {sorted(unknown)}; {takes}")
    return {p.name: p.check(params.get(p.name, p.default), p.name, spec.rule(p)) for p in spec.parameters}


def resolve_metric(metric, params: dict) -> tuple[Distance, dict]:
    """The measure's spec and its parameter values, checked, with the row's rewrites applied.

    >>> resolve_metric("minkowski", {"p": 1})[1]
    {'p': 1.0}
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
    "Distance",
    "Param",
    "Refinement",
    "Rewrite",
    "expression",
    "get_metric",
    "resolve_metric",
]
