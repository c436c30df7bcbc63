"""Binary ops, monoids and semirings: plain declarations the kernels are rendered from.

A semiring ``(add, mult)`` computes ``C[i, j] = ⊕_k X[i, k] ⊗ Y[j, k]``.  Which
columns ``k`` take part follows from the ops:

* ``"intersection"`` — only columns stored in both rows.  This is the meaning of
  the dense product whenever ``mult`` *annihilates* at zero (``x ⊗ 0`` and
  ``0 ⊗ y`` equal ⊕'s identity, as for ``times``).  It is also GraphBLAS's
  structural meaning, used when ``0 ⊗ 0`` itself would change the result
  (``min_plus``, ``plus_pair``): there a missing entry is not a zero.
* ``"union"`` — every column stored in either row, a missing entry read as 0.
  This is the dense meaning for *non-annihilating* multiplies (NAMM) such as
  ``|x - y|``; it needs ``0 ⊗ 0`` to leave every sum unchanged, so that columns
  stored in neither row add nothing.

How each is decided (``_derive_semantics``), from the declaration's tree:

* ``0 ⊗ 0`` is evaluated.  It is neutral when it equals ⊕'s identity, or — for
  ``max``/``min`` — when the sign analysis of :mod:`semiring.semantics` proves
  no product can lie below/above it (``|0 − 0| = 0`` under ``max`` of absolute
  values).  A concrete product it changes (``min(0, 1 + 1) ≠ 2``) proves it is
  not neutral: structural intersection.  Neither proved nor refuted: the
  semiring is refused until ``semantics=`` says which meaning is wanted.
* Annihilation is *proved*, never guessed from probe values: ``x ⊗ 0`` and
  ``0 ⊗ y`` are simplified with :func:`semiring.semantics.simplify` (parameters
  bound to their values, the other operand finite and nonzero, since ``0 ⊗ 0``
  was checked already) and must reduce to the identity.  The proof holds for
  finite values, GraphBLAS's structural meaning; non-finite data are the
  engines' business (they merge them exactly).  Not proved: union, which is
  always right; intersection is only an optimisation.

An explicit ``semantics="union"`` is accepted unless ``0 ⊗ 0`` is proved not
neutral; an explicit ``"intersection"`` only where it is proved (or structural).
``semantics="structural"`` declares GraphBLAS's meaning outright: only the
columns stored in both rows, whatever the ops prove (``plus_first`` sums X's
values where Y also stores one, not X's whole row as the dense product would).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache, cached_property

import numpy as np

from . import expr as _expr
from . import semantics as _semantics

# Values a monoid is checked on, and where counterexamples are looked for: both
# signs, fractions, integers and a large value, no zero (zero is what is tested).
PROBES = (-100.0, -7.25, -3.0, -2.0, -1.0, -0.5, -0.125, 0.25, 0.5, 1.0, 1.5, 2.0, 3.5, 10.0, 1e4)

SEMANTICS = ("intersection", "union", "structural")


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


@dataclass(frozen=True, eq=False)
class BinaryOp:
    """An op of ``x`` and ``y`` (and optional named parameters), declared once.

    Build one with :func:`binary_op`.  ``.cuda(...)`` and ``.python`` render the
    same parsed expression for the GPU and the CPU engine.
    """

    name: str
    text: str
    tree: _expr.Node = field(repr=False)
    params: tuple[tuple[str, float], ...] = ()

    VARIABLES = ("x", "y")

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p for p, _ in self.params)

    @property
    def param_values(self) -> np.ndarray:
        return np.array([v for _, v in self.params], dtype=np.float64)

    @property
    def key(self) -> tuple:
        """What the generated code depends on: the expression, not parameter values."""
        return (self.text, self.param_names)

    @property
    def python(self) -> str:
        """The scalar Python form the CPU engine compiles (parameters read from ``params``)."""
        names = {"x": "x", "y": "y", **{p: f"params[{i}]" for i, p in enumerate(self.param_names)}}
        return _expr.render_python(self.tree, names)

    def cuda(self, x: str = "x", y: str = "y", params: str = "params", value_type: str = "T") -> str:
        """The CUDA C form, reading the operands from the C expressions ``x`` and ``y``."""
        names = {"x": x, "y": y, **{p: f"{value_type}({params}[{i}])" for i, p in enumerate(self.param_names)}}
        return _expr.render_cuda(self.tree, names, value_type)

    @cached_property  # the tree never changes: recognised once, not at every engine call that asks
    def kind(self) -> str | None:
        """The built-in op this one computes (``"times"`` for ``x * y`` and ``y * x``), or None.

        Recognised from the expression tree, whatever the operand order, so the
        engines' fast paths for ``plus`` and ``times`` do not depend on spelling.
        Ops with parameters are never built-ins.

        >>> binary_op("y * x").kind, binary_op("x * y + 1").kind
        ('times', None)
        """
        if self.params:
            return None
        return _BUILTIN_KINDS().get(_expr.canonical(self.tree))

    @property
    def margins(self) -> tuple[_expr.Node, _expr.Node]:
        """``f(x, 0)`` and ``f(0, y)`` as trees of ``x`` (a row reduction reads its values as ``x``), the
        parameters bound to their values: what a row contributes to a union against a row storing none of its
        columns.

        >>> [_expr.render_python(t, {"x": "x"}, plain=True) for t in binary_op("abs(x - y) ** p", p=3.0).margins]
        ['abs(x - 0.0) ** 3.0', 'abs(0.0 - x) ** 3.0']
        """
        zero, x = _expr.Node("num", (0.0,)), _expr.Node("var", ("x",))
        bound = {p: _expr.Node("num", (v,)) for p, v in self.params}
        at_x = _expr.substitute(self.tree, {"y": zero, **bound})
        at_y = _expr.substitute(self.tree, {"x": zero, "y": x, **bound})
        return at_x, at_y

    def with_params(self, **values: float) -> BinaryOp:
        unknown = set(values) - set(self.param_names)
        if unknown:
            raise TypeError(
                f"op {self.name!r} has no parameter(s) {sorted(unknown)}; it takes {list(self.param_names)}"
            )
        return replace(self, params=tuple((p, float(values.get(p, v))) for p, v in self.params))

    def __call__(self, x: float, y: float) -> float:
        """Evaluate on two scalars with NumPy's IEEE semantics (x/0 = inf, no exceptions)."""
        fn = _evaluator(self.tree, self.VARIABLES, self.param_names)
        with np.errstate(all="ignore"):
            return float(fn(np.float64(x), np.float64(y), self.param_values))

    def __repr__(self) -> str:
        extra = "".join(f", {p}={v!r}" for p, v in self.params)
        return f"binary_op({self.text!r}, name={self.name!r}{extra})"


_EVALUATORS: dict = {}


def _evaluator(tree: _expr.Node, variables, params) -> Callable:
    key = (tree, tuple(variables), tuple(params))
    if key not in _EVALUATORS:
        _EVALUATORS[key] = _expr.compile_python(tree, variables, params)
    return _EVALUATORS[key]


def binary_op(op: str | Callable, name: str | None = None, **params: float) -> BinaryOp:
    """Declare a binary op from a function or an expression of ``x`` and ``y``.

    Keyword arguments declare named parameters with their default values; the
    kernels read them at run time, so changing a value does not recompile.

    >>> absdiff = binary_op(lambda x, y: abs(x - y))
    >>> absdiff(1.0, 4.0)
    3.0
    >>> powdiff = binary_op("abs(x - y) ** p", p=3.0)
    >>> powdiff(1.0, 3.0)
    8.0
    """
    if isinstance(op, BinaryOp):
        return op
    _expr.check_parameter_names(tuple(params), BinaryOp.VARIABLES)  # binary_op("x * y", x=2.0) would shadow x
    variables = BinaryOp.VARIABLES + tuple(params)
    if callable(op) and not isinstance(op, str):
        tree, _ = _expr.parse(op, BinaryOp.VARIABLES)
    else:
        tree, _ = _expr.parse(op, variables)
    text = _expr.render_python(tree, {v: v for v in variables}, plain=True)
    if name is None:
        name = getattr(op, "__name__", None) if callable(op) and not isinstance(op, str) else None
        name = name if name and name != "<lambda>" else text
    return BinaryOp(name=name, text=text, tree=tree, params=tuple((p, float(v)) for p, v in params.items()))


@dataclass(frozen=True, eq=False)
class Monoid:
    """An associative, commutative op with an identity: the ``add`` of a semiring.

    >>> Monoid(binary_op("max(x, y)"), -math.inf)
    Monoid(max(x, y), identity=-inf)
    """

    op: BinaryOp
    identity: float
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "op", binary_op(self.op))
        object.__setattr__(self, "identity", float(self.identity))
        if self.name is None:
            object.__setattr__(self, "name", self.op.name)
        if self.op.params:
            raise ValueError(f"monoid {self.name!r}: a monoid's op takes no parameters")
        # A logical op (its result is a comparison or and/or/not) is a monoid on truth values, 0 and 1, as
        # GraphBLAS's lor/land are on BOOL: products reach it as numbers, nonzero read as true.
        logical = self.op.tree.is_bool
        values = (0.0, 1.0) if logical else PROBES
        for v in values:
            if not _same(self.op(self.identity, v), v) or not _same(self.op(v, self.identity), v):
                raise ValueError(
                    f"monoid {self.name!r}: {self.identity!r} is not an identity of {self.op.text!r} "
                    f"(op(identity, {v}) = {self.op(self.identity, v)!r}, expected {v})"
                )
        for a in values if logical else PROBES[::3]:
            for b in values if logical else PROBES[1::3]:
                if not _same(self.op(a, b), self.op(b, a)):
                    raise ValueError(f"monoid {self.name!r}: {self.op.text!r} is not commutative (a={a}, b={b})")
                for c in values if logical else PROBES[2::4]:
                    left, right = self.op(self.op(a, b), c), self.op(a, self.op(b, c))
                    if not math.isclose(left, right, rel_tol=1e-12, abs_tol=1e-300):
                        raise ValueError(f"monoid {self.name!r}: {self.op.text!r} is not associative ({a}, {b}, {c})")

    @property
    def key(self) -> tuple:
        return (self.op.key, self.identity)

    @cached_property
    def kind(self) -> str | None:
        """``"plus"``, ``"times"``, ``"min"`` or ``"max"`` when this is that monoid (its op and identity), else None.

        >>> Monoid(binary_op("y + x"), 0.0).kind
        'plus'
        """
        builtin = getattr(monoid, self.op.kind or "", None)
        return self.op.kind if isinstance(builtin, Monoid) and builtin.identity == self.identity else None

    def __repr__(self) -> str:
        return f"Monoid({self.op.text}, identity={self.identity!r})"


@dataclass(frozen=True, eq=False)
class Semiring:
    """A semiring ``(add, mult)``; see the module docstring for ``semantics``.

    >>> l1 = Semiring(monoid.plus, binary_op(lambda x, y: abs(x - y)))
    >>> l1.semantics
    'union'
    >>> Semiring(monoid.plus, binary_op("x * y")).semantics
    'intersection'
    """

    add: Monoid
    mult: BinaryOp
    semantics: str | None = None
    name: str | None = None
    annihilates: bool = field(init=False)
    declared: str | None = field(init=False, repr=False)  # the semantics the caller gave (None: derived)

    def __post_init__(self):
        object.__setattr__(self, "declared", self.semantics)
        object.__setattr__(self, "mult", binary_op(self.mult))
        if not isinstance(self.add, Monoid):
            raise TypeError(f"add must be a Monoid (for example semiring.monoid.plus), got {type(self.add).__name__}")
        if self.name is None:
            object.__setattr__(self, "name", f"{self.add.name}_{self.mult.name}")
        if self.semantics not in (*SEMANTICS, None):
            raise ValueError(f"semantics must be one of {SEMANTICS} or None, got {self.semantics!r}")
        d = _derive_semantics(self.add, self.mult)
        object.__setattr__(self, "annihilates", d.annihilates)
        if self.semantics is None and d.semantics is None:
            raise ValueError(
                f"semiring {self.name!r}: {d.reason}; say which meaning is wanted, e.g. "
                f"Semiring(add, mult, semantics='intersection') for GraphBLAS's structural one"
            )
        if self.semantics is None:
            object.__setattr__(self, "semantics", d.semantics)
        elif self.semantics == "structural":
            pass  # GraphBLAS's meaning by declaration: the columns stored in both rows, whatever the ops prove
        elif self.semantics == "union" and d.structural:
            raise ValueError(f"semiring {self.name!r}: semantics='union' contradicts its ops: {d.reason}")
        elif self.semantics == "intersection" and d.semantics == "union":
            # Intersection drops the columns stored in one row only: right only where annihilation is proved.
            raise ValueError(
                f"semiring {self.name!r}: semantics='intersection' contradicts its ops: {d.reason}; "
                "semantics='structural' asks for GraphBLAS's meaning (stored columns only) instead"
            )

    @property
    def is_union(self) -> bool:
        return self.semantics == "union"

    @property
    def params(self) -> np.ndarray:
        return self.mult.param_values

    def start(self, ncols: int) -> float:
        """The accumulator's start: for a union, what the columns stored in neither row contribute."""
        if self.is_union and ncols > 0:
            return self.mult(0.0, 0.0)
        return self.add.identity

    def margin_split(self, nonnegative: bool = False) -> MarginSplit | None:
        """This plus-monoid union as margins and an intersection, or None where that is not safe.

        For ``add = plus``: ``Σ_{k ∈ X_i ∪ Y_j} f(x, y) = Σ_{X_i} f(x, 0) + Σ_{Y_j} f(0, y)
        + Σ_{X_i ∩ Y_j} [f(x, y) − f(x, 0) − f(0, y)]`` — two row reductions and
        one *intersection* product whose op annihilates at zero, so the GPU
        needs no second pass over the union.  The identity is exact in real
        arithmetic; in floating point the sum may cancel, so the engine
        recomputes by merging the entries that fall well below the margins'
        magnitudes.  That bound holds when ``|f(x, y)| ≤ |f(x, 0)| + |f(0, y)|``
        with finite margins, which is checked on the probe values (only the
        nonnegative ones when the data are ``nonnegative``); ops that fail it
        (``(x − y)²`` on signed data, inf margins as in KL) get None.

        >>> from semiring import plus_absdiff
        >>> split = plus_absdiff.margin_split()
        >>> split.cross.semantics, split.cross.mult.text
        ('intersection', '(abs(x - y) - abs(x)) - abs(y)')
        """
        key = (self.key, tuple(self.params), nonnegative)
        if key not in _SPLITS:
            _SPLITS[key] = _margin_split(self, nonnegative)
        return _SPLITS[key]

    @property
    def key(self) -> tuple:
        """Everything the generated kernels depend on (not parameter values, not the name)."""
        return (self.add.key, self.mult.key, self.semantics)

    def with_params(self, **values: float) -> Semiring:
        """The semiring with other parameter values: its semantics derived again for them unless the caller
        declared one (a meaning derived at ``p = 0`` is not one the caller told, and may not hold at ``p = 1``).

        >>> sr = Semiring(monoid.plus, binary_op("abs(x - y) + p", p=1.0))  # 0 ⊗ 0 = 1: GraphBLAS's meaning
        >>> sr.semantics, sr.with_params(p=0.0).semantics
        ('intersection', 'union')
        """
        return Semiring(self.add, self.mult.with_params(**values), self.declared, self.name)

    def __repr__(self) -> str:
        return f"Semiring({self.name!r}: add={self.add.op.text}, mult={self.mult.text}, {self.semantics})"


@dataclass(frozen=True)
class MarginSplit:
    """A plus-monoid union as ``Σ f(x, 0)`` over X's row + ``Σ f(0, y)`` over Y's row + ``cross``."""

    cross: Semiring  # intersection semiring: plus and f(x, y) − f(x, 0) − f(0, y)
    x_margin: _expr.Node  # f(x, 0) as a tree of x, parameters bound to their values
    y_margin: _expr.Node  # f(0, y) as a tree of x (a row reduction reads its values as x)


_SPLITS: dict = {}


def _margin_split(sr: Semiring, nonnegative: bool) -> MarginSplit | None:
    if not sr.is_union or sr.add.key != monoid.plus.key:
        return None
    f = sr.mult
    probes = [v for v in PROBES if v > 0] if nonnegative else list(PROBES)
    for a in probes:
        for b in probes:
            fa, fb, fab = f(a, 0.0), f(0.0, b), f(a, b)
            if not (math.isfinite(fa) and math.isfinite(fb) and math.isfinite(fab)):
                return None
            if abs(fab) > (abs(fa) + abs(fb)) * (1 + 1e-12):
                return None
    # f(x, 0) and f(0, y) simplified by exact rewrites (a branch never taken, ``x + 0.0``): the cross op runs
    # once per shared column of every pair, and Jensen–Shannon's computed four logarithms there, not three.
    zero = _expr.Node("num", (0.0,))
    fx0, f0y = (_semantics.simplify(_expr.substitute(f.tree, {v: zero})) for v in ("y", "x"))  # parameters kept
    tree = _semantics.simplify(_expr.Node("bin", ("-", _expr.Node("bin", ("-", f.tree, fx0)), f0y)))
    text = _expr.render_python(tree, {v: v for v in ("x", "y", *f.param_names)}, plain=True)
    cross_op = BinaryOp(name=f"{f.name}_cross", text=text, tree=tree, params=f.params)
    cross = Semiring(sr.add, cross_op, name=f"{sr.name}_cross")
    if not cross.annihilates:  # f(x, 0) − f(x, 0) − f(0, 0) must be proved 0 (semiring.semantics)
        return None
    return MarginSplit(cross, *f.margins)


@dataclass(frozen=True)
class _Derivation:
    """What the ops prove: ``semantics`` (None when ``0 ⊗ 0``'s neutrality is undecided), and why."""

    semantics: str | None
    annihilates: bool
    reason: str

    @property
    def structural(self) -> bool:  # 0 ⊗ 0 proved not neutral: the union is undefined
        return self.semantics == "intersection" and not self.annihilates


def _derive_semantics(add: Monoid, mult: BinaryOp) -> _Derivation:
    """Intersection where annihilation is proved from the tree, union where it is not (module docstring)."""
    zero = mult(0.0, 0.0)
    if not _same(zero, add.identity):
        refuted = _non_neutral(add, mult, zero)
        if refuted:
            return _Derivation(
                "intersection",
                False,
                f"mult(0, 0) = {zero!r} changes sums under {add.name!r} ({refuted}), so columns stored in "
                "neither row would count and the union is not defined; only structural intersection semantics apply",
            )
        if not _neutral_over_range(add, mult, zero):
            return _Derivation(
                None,
                False,
                f"mult(0, 0) = {zero!r} is not {add.name!r}'s identity {add.identity!r}, and it can be neither "
                "proved nor refuted that it leaves every product unchanged",
            )
    bindings = dict(mult.params)
    for var, other in (("y", "x"), ("x", "y")):
        reduced = _semantics.simplify(
            _semantics.at_zero(mult.tree, var, bindings), {_expr.Node("var", (other,)): _semantics.NONZERO}
        )
        call = "mult(x, 0)" if var == "y" else "mult(0, y)"
        if not (reduced.kind == "num" and _same(reduced.args[0], add.identity)):
            witness = _annihilation_counterexample(add, mult, var)
            why = (
                f"zero does not annihilate: {witness}"
                if witness
                else f"zero is not proved to annihilate: {call} reduces to {_semantics.render(reduced)!r}, "
                f"not {add.name!r}'s identity {add.identity!r}"
            )
            return _Derivation(
                "union", False, why + ", so columns stored in only one row count and the union is needed"
            )
    return _Derivation("intersection", True, "mult(x, 0) and mult(0, y) are proved to equal the identity")


def _probe_values(mult: BinaryOp) -> list[float]:
    """PROBES, 0 and the op's own constants (and their negatives): where an op may behave specially."""
    own = _semantics.constants(mult.tree) | {v for _, v in mult.params if math.isfinite(v)}
    return sorted({0.0, *PROBES, *own, *(-v for v in own)})


def _non_neutral(add: Monoid, mult: BinaryOp, zero: float) -> str | None:
    """A product that ``zero`` changes under ``add``, as text, or None: a concrete refutation of neutrality."""
    values = _probe_values(mult)
    for a, b in [(0.0, 0.0)] + [(a, b) for a in values for b in values]:
        v = mult(a, b)
        if not _same(add.op(zero, v), v):
            return f"{add.name}({zero!r}, mult({a!r}, {b!r}) = {v!r}) = {add.op(zero, v)!r}"
    return None


def _neutral_over_range(add: Monoid, mult: BinaryOp, zero: float) -> bool:
    """``max(zero, v) = v`` for every product v: proved from the signs mult can take (and min alike)."""
    tree = _expr.substitute(mult.tree, {p: _semantics.number(v) for p, v in mult.params})
    r = _semantics.value_range(tree)
    if not r.finite:
        return False
    if add.kind == "max":
        return zero <= 0.0 and r.signs <= _semantics.NONNEGATIVE
    if add.kind == "min":
        return zero >= 0.0 and r.signs <= _semantics.NONPOSITIVE
    return False


def _annihilation_counterexample(add: Monoid, mult: BinaryOp, var: str) -> str | None:
    for a in _probe_values(mult):
        x, y = (a, 0.0) if var == "y" else (0.0, a)
        v = mult(x, y)
        if not _same(v, add.identity):
            return f"mult({x!r}, {y!r}) = {v!r} is not {add.name!r}'s identity {add.identity!r}"
    return None


class _MonoidNamespace:
    """``semiring.monoid.plus`` and friends."""

    def __init__(self, **monoids: Monoid):
        self.__dict__.update(monoids)

    def __iter__(self):
        return iter(self.__dict__.values())

    def __repr__(self) -> str:
        return f"monoids: {', '.join(self.__dict__)}"


monoid = _MonoidNamespace(
    plus=Monoid(binary_op("x + y", name="plus"), 0.0),
    times=Monoid(binary_op("x * y", name="times"), 1.0),
    min=Monoid(binary_op("min(x, y)", name="min"), math.inf),
    max=Monoid(binary_op("max(x, y)", name="max"), -math.inf),
    # GraphBLAS's any may return any of the values; ours makes one deterministic choice, the same on every
    # engine and in any order of reduction: the value of largest magnitude, the positive one on a tie.
    # That order has 0 at its bottom, so 0 is the identity (SuiteSparse's too) and an empty result reads 0.
    any=Monoid(binary_op("x if abs(x) > abs(y) or (abs(x) == abs(y) and x > y) else y", name="any"), 0.0),
    # Logical or/and on truth values (nonzero is true), giving 1.0 or 0.0, as GraphBLAS's lor/land on BOOL.
    lor=Monoid(binary_op("x or y", name="lor"), 0.0),
    land=Monoid(binary_op("x and y", name="land"), 1.0),
)

BINARY_OPS: Mapping[str, BinaryOp] = {
    op.name: op
    for op in (
        binary_op("x * y", name="times"),
        binary_op("x + y", name="plus"),
        binary_op("x - y", name="minus"),
        binary_op("1", name="pair"),
        binary_op("x", name="first"),
        binary_op("y", name="second"),
        binary_op("min(x, y)", name="min"),
        binary_op("max(x, y)", name="max"),
        binary_op("abs(x - y)", name="absdiff"),
        binary_op("(x - y) * (x - y)", name="sqdiff"),
        binary_op("x or y", name="lor"),
        binary_op("x and y", name="land"),
    )
}


@cache
def _BUILTIN_KINDS() -> dict:
    """Canonical tree of each built-in op -> its name (see ``BinaryOp.kind``)."""
    return {_expr.canonical(op.tree): name for name, op in BINARY_OPS.items()}


# Built-in semirings, named as in python-graphblas (add monoid _ multiply op).
BUILTIN_SEMIRINGS: Mapping[str, Semiring] = {
    f"{a}_{m}": Semiring(getattr(monoid, a), BINARY_OPS[m], name=f"{a}_{m}")
    for a, m in (
        ("plus", "times"),
        ("plus", "pair"),
        ("min", "plus"),
        ("max", "plus"),
        ("min", "times"),
        ("max", "times"),
        ("min", "max"),
        ("max", "min"),
        ("min", "first"),
        ("max", "second"),
        ("plus", "absdiff"),
        ("max", "absdiff"),
        ("plus", "sqdiff"),
        ("max", "first"),
        ("min", "second"),
        ("lor", "land"),
        ("land", "lor"),
    )
}
# GraphBLAS's semirings whose dense meaning differs (0 ⊗ 0 neutral, no annihilation: the dense product would
# read every column stored in either row), declared with GraphBLAS's structural meaning instead.
BUILTIN_SEMIRINGS.update(
    {
        f"{a}_{m}": Semiring(getattr(monoid, a), BINARY_OPS[m], semantics="structural", name=f"{a}_{m}")
        for a, m in (
            ("plus", "first"),
            ("plus", "second"),
            ("plus", "min"),
            ("any", "pair"),
            ("any", "first"),
            ("any", "second"),
        )
    }
)
