"""Proofs about an op's zeros, read from its expression tree.

A semiring may skip the columns where one row stores nothing only if the
multiply *annihilates* there: ``mult(x, 0)`` and ``mult(0, y)`` equal the add
monoid's identity for every ``x`` and ``y``.  Evaluating the op on a few probe
values can only guess that (``x * y + (1.0 if x == 0.3 else 0.0)`` passes every
probe but 0.3), so it is *proved* here instead, by simplifying the tree with
``y := 0`` until it is, or is not, a number.

What is proved, and in which arithmetic:

* Constants fold with NumPy's IEEE semantics, the CPU engine's own scalar code
  (``expr.compile_python``): ``1 / 0 = inf``, ``sqrt(-1) = nan``.
* Everything else is proved for *finite* values of the variables, in real
  arithmetic: ``e * 0 = 0`` needs ``e`` finite, ``0 / e = 0`` needs ``e``
  provably nonzero and finite.  An intermediate that overflows (``x * x`` for
  ``|x| > 1e154``) is outside the proof, as ``0 * inf`` is: the engines route
  non-finite data to an exact merge, and annihilation is GraphBLAS's structural
  meaning for finite values.
* Every rewrite is exact in floating point for finite operands (``e - e = 0``,
  ``e + 0 = e``), never a reassociation that could round: a proof that a tree
  equals 0 means the engine's dropped terms are exactly 0, not merely small.
* Anything no rule covers is *not proved*.  Callers then fall back to the union,
  which is always right; intersection is an optimisation that needs the proof.

Besides the value, a sign analysis (``value_range``) tells which signs a
subtree can take and whether it is finite, so that ``0 / (1 + abs(x))`` is 0
and ``min(abs(x), 0)`` is 0.  Facts learned from a conditional's test
(``abs(x) > 0`` in the branch that runs when it holds) narrow the signs there.

>>> from semiring.expr import parse
>>> tree, _ = parse("x * y / (1 + abs(x - y))", ("x", "y"))
>>> simplify(at_zero(tree, "y"))
Node(kind='num', args=(0.0,))
>>> tree, _ = parse("x * y + (1.0 if x == 0.3 else 0.0)", ("x", "y"))
>>> render(simplify(at_zero(tree, "y")))
'1.0 if (x == 0.3) else 0.0'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from . import expr as _expr
from .expr import Node

NEG, ZERO, POS = -1, 0, 1
ANY_SIGN = frozenset({NEG, ZERO, POS})
NONZERO = frozenset({NEG, POS})
NONNEGATIVE = frozenset({ZERO, POS})
NONPOSITIVE = frozenset({NEG, ZERO})

# What is known of some subtrees (keyed by their canonical tree): the signs they can take.
Facts = Mapping[Node, frozenset]

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_MIRRORED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def number(value: float) -> Node:
    return Node("num", (float(value),))


def _is_num(node: Node, value: float | None = None) -> bool:
    return node.kind == "num" and (value is None or node.args[0] == value)


def render(node: Node) -> str:
    """The readable text of ``node`` (for messages): ``abs(x)``, ``1.0 if (x == 0.3) else 0.0``."""
    names = {v: v for v in _variables(node)}
    return _expr.render_python(node, names, plain=True)


def _variables(node: Node) -> set[str]:
    if node.kind == "var":
        return {node.args[0]}
    return set().union(*(_variables(a) for a in node.args if isinstance(a, Node)))


def at_zero(tree: Node, zero: str, bindings: Mapping[str, float] | None = None) -> Node:
    """``tree`` with the variable ``zero`` set to 0 and each name in ``bindings`` set to its value."""
    values = {zero: number(0.0), **{k: number(v) for k, v in (bindings or {}).items()}}
    return _expr.substitute(tree, values)


def constants(tree: Node) -> set[float]:
    """The finite numbers written in ``tree``: the values where an op may behave specially."""
    if tree.kind == "num":
        return {tree.args[0]} if np.isfinite(tree.args[0]) else set()
    return set().union(*(constants(a) for a in tree.args if isinstance(a, Node)))


# --------------------------------------------------------------------------- signs


@dataclass(frozen=True)
class Range:
    """What is known of a subtree's value over the domain (finite variables).

    ``signs``: the signs it can take where it is finite.  ``finite``: it is
    finite everywhere (in real arithmetic; see the module docstring).
    """

    signs: frozenset
    finite: bool

    @property
    def nonzero(self) -> bool:
        return self.finite and ZERO not in self.signs


def value_range(node: Node, facts: Facts | None = None) -> Range:
    """Signs and finiteness of ``node``, every variable finite and of any sign unless ``facts`` say otherwise.

    >>> from semiring.expr import parse
    >>> value_range(parse("1 + abs(x)", ("x",))[0])
    Range(signs=frozenset({1}), finite=True)
    """
    facts = facts or {}
    r = _structural_range(node, facts)
    known = facts.get(_expr.canonical(node))
    return Range(r.signs & known, r.finite) if known is not None else r


def _structural_range(node: Node, facts: Facts) -> Range:
    k, a = node.kind, node.args
    if k == "num":
        v = a[0]
        return Range(frozenset({int(np.sign(v))}) if np.isfinite(v) else frozenset(), bool(np.isfinite(v)))
    if k == "var":
        return Range(ANY_SIGN, True)
    if node.is_bool:  # comparisons and logic give 1.0 or 0.0, NaN operands included
        return Range(NONNEGATIVE, True)
    if k == "if":
        then, other = (value_range(b, f) for b, f in zip(a[1:], _branch_facts(a[0], facts)))
        return Range(then.signs | other.signs, then.finite and other.finite)
    if k == "neg":
        r = value_range(a[0], facts)
        return Range(frozenset(-s for s in r.signs), r.finite)
    if k == "bin":
        op, left, right = a[0], value_range(a[1], facts), value_range(a[2], facts)
        if op in ("+", "-"):
            if op == "-":
                right = Range(frozenset(-s for s in right.signs), right.finite)
            return Range(_sum_signs(left.signs, right.signs), left.finite and right.finite)
        if op == "*":
            if _expr.canonical(a[1]) == _expr.canonical(a[2]):  # a square: (x - y) * (x - y) ≥ 0
                return Range(frozenset(abs(s) for s in left.signs), left.finite)
            return Range(_product_signs(left.signs, right.signs), left.finite and right.finite)
        if op == "/":
            return Range(_product_signs(left.signs, right.signs - {ZERO}), left.finite and right.nonzero)
        return _power_range(a[1], a[2], facts)
    fn, *args = a
    rs = [value_range(x, facts) for x in args]
    if fn == "pow":
        return _power_range(args[0], args[1], facts)
    if fn == "abs":
        return Range(frozenset(abs(s) for s in rs[0].signs), rs[0].finite)
    if fn == "sqrt":  # sqrt of a possibly negative value is NaN
        return Range(rs[0].signs & NONNEGATIVE, rs[0].finite and rs[0].signs <= NONNEGATIVE)
    if fn == "log":  # log(0) = -inf, log of a negative value NaN
        return Range(ANY_SIGN, rs[0].finite and rs[0].signs <= {POS})
    if fn == "exp":  # positive in real arithmetic (underflow to 0 is outside the proof)
        return Range(frozenset({POS}), rs[0].finite)
    pick = min if fn == "min" else max  # the sign of min/max is the min/max of the signs
    signs = frozenset(pick(s, t) for s in rs[0].signs for t in rs[1].signs)
    return Range(signs, rs[0].finite and rs[1].finite)


def _sum_signs(a: frozenset, b: frozenset) -> frozenset:
    out: set[int] = set()
    for s in a:
        for t in b:
            out |= {s} if s == t or t == ZERO else {t} if s == ZERO else ANY_SIGN
    return frozenset(out)


def _product_signs(a: frozenset, b: frozenset) -> frozenset:
    return frozenset(s * t for s in a for t in b)


def _power_range(base: Node, exponent: Node, facts: Facts) -> Range:
    """``base ** exponent``: finite where real arithmetic defines it (no 0 to a negative power, no root of a negative)."""
    b, e = value_range(base, facts), value_range(exponent, facts)
    if _is_num(exponent) and e.finite:
        p = exponent.args[0]
        integer = float(p).is_integer()
        if integer and p == 0:
            return Range(frozenset({POS}), True)
        if integer:
            signs = frozenset(abs(s) for s in b.signs) if p % 2 == 0 else b.signs
            return Range(signs, b.finite and (p > 0 or ZERO not in b.signs))
        ok = b.signs <= (NONNEGATIVE if p > 0 else {POS})
        return Range(b.signs & NONNEGATIVE, b.finite and ok)
    return Range(frozenset({POS}), b.finite and e.finite and b.signs <= {POS})


# --------------------------------------------------------------------------- facts from conditions


def _branch_facts(cond: Node, facts: Facts) -> tuple[dict, dict]:
    """What holds in the branch taken when ``cond`` holds, and in the one taken when it does not."""
    return _merge(facts, _facts_from(cond, True)), _merge(facts, _facts_from(cond, False))


def _facts_from(cond: Node, holds: bool) -> dict:
    if cond.kind == "not":
        return _facts_from(cond.args[0], not holds)
    if (cond.kind == "and" and holds) or (cond.kind == "or" and not holds):  # both parts known
        return _merge(_facts_from(cond.args[0], holds), _facts_from(cond.args[1], holds))
    if cond.kind == "cmp":
        op, left, right = cond.args
        if _is_num(right, 0.0):
            subject = left
        elif _is_num(left, 0.0):
            subject, op = right, _MIRRORED[op]
        else:
            return {}
        # Signs only describe finite values, so a NaN making the test fail changes nothing here.
        signs = frozenset(s for s in ANY_SIGN if _COMPARE[op](s, 0) == holds)
        return {_expr.canonical(subject): signs}
    if not cond.is_bool and cond.kind != "num":  # a number used as a condition: true when nonzero
        return {_expr.canonical(cond): NONZERO if holds else frozenset({ZERO})}
    return {}


def _merge(a: Mapping, b: Mapping) -> dict:
    out = dict(a)
    for key, signs in b.items():
        out[key] = out[key] & signs if key in out else signs
    return out


# --------------------------------------------------------------------------- simplification


def simplify(node: Node, facts: Facts | None = None) -> Node:
    """``node`` rewritten by exact rules (module docstring); a number when its value is proved.

    >>> from semiring.expr import parse
    >>> tree, _ = parse("(abs(x - y) - abs(x - 0)) - abs(0 - y)", ("x", "y"))
    >>> simplify(at_zero(tree, "x")), simplify(at_zero(tree, "y"))
    (Node(kind='num', args=(0.0,)), Node(kind='num', args=(0.0,)))
    """
    facts = facts or {}
    k, a = node.kind, node.args
    if k in ("num", "var"):
        return node
    if k == "if":
        return _conditional(node, facts)
    args = tuple(simplify(x, facts) if isinstance(x, Node) else x for x in a)
    node = Node(k, args)
    if all(_is_num(x) for x in args if isinstance(x, Node)):
        return _fold(node)
    if k == "bin" and a[0] in ("+", "-"):
        return _sum(node, facts)
    if k == "bin":
        return _product(node, facts)
    if k == "neg":
        return args[0].args[0] if args[0].kind == "neg" else node
    if k == "cmp":
        return _compare(node, facts)
    if k in ("and", "or", "not"):
        return _logic(node)
    if args[0] in ("min", "max"):
        return _min_max(node, facts)
    if args[0] == "pow":
        return _product(Node("bin", ("**", args[1], args[2])), facts)
    if args[0] == "abs" and args[1].kind == "neg":  # |−e| = |e|, exactly
        return simplify(Node("call", ("abs", args[1].args[0])), facts)
    inner = value_range(args[1], facts) if args[0] == "abs" else None
    if inner is not None and inner.finite and inner.signs <= NONNEGATIVE:  # |e| = e for e ≥ 0
        return args[1]
    return node


def _fold(node: Node) -> Node:
    """A tree of numbers, evaluated by the engines' own scalar code with IEEE semantics (1/0 = inf)."""
    fn = _expr.compile_python(node, ())
    with np.errstate(all="ignore"):
        return number(fn(np.zeros(0)))


def _sum(node: Node, facts: Facts) -> Node:
    """``e + 0 = e``, ``e - 0 = e``, ``0 - e = -e`` (exact), ``e - e = 0`` (exact for finite e)."""
    op, left, right = node.args
    if _is_num(right, 0.0):
        return left
    if _is_num(left, 0.0):
        return right if op == "+" else simplify(Node("neg", (right,)), facts)
    if op == "-" and _expr.canonical(left) == _expr.canonical(right) and value_range(left, facts).finite:
        return number(0.0)  # margin_split's cross op f(x, y) − f(x, 0) − f(0, y) needs this
    return node


def _product(node: Node, facts: Facts) -> Node:
    """``*``, ``/`` and ``**`` with a 0 or 1 operand, where the other operand makes that exact; ``e / e``."""
    op, left, right = node.args
    if op == "*":
        for zero, other in ((left, right), (right, left)):
            if _is_num(zero, 0.0) and value_range(other, facts).finite:  # 0 * inf is NaN: finite only
                return number(0.0)
            if _is_num(zero, 1.0):
                return other
    elif op == "/":
        if _is_num(left, 0.0) and value_range(right, facts).nonzero:  # 0 / 0 is NaN: provably nonzero only
            return number(0.0)
        if _is_num(right, 1.0):
            return left
        if _expr.canonical(left) == _expr.canonical(right):  # e / e = 1 exactly (IEEE) for e finite and nonzero
            r = value_range(left, facts)
            if r.finite and r.nonzero:
                return number(1.0)
    else:  # "**", IEEE pow: anything ** 0 = 1 and 1 ** anything = 1, NaN included
        if _is_num(right, 0.0) or _is_num(left, 1.0):
            return number(1.0)
        if _is_num(right, 1.0):
            return left
        exponent = value_range(right, facts)
        if _is_num(left, 0.0) and exponent.finite and exponent.signs <= {POS}:
            return number(0.0)
    return node


def _min_max(node: Node, facts: Facts) -> Node:
    """``min(e, e) = e``; ``min(a, b) = a`` where a ≤ b is proved from signs (``min(abs(x), 0) = 0``)."""
    fn, a, b = node.args
    if _expr.canonical(a) == _expr.canonical(b):
        return a
    ra, rb = value_range(a, facts), value_range(b, facts)
    if not (ra.finite and rb.finite):  # fmin/fmax ignore NaN: signs alone cannot decide then
        return node
    if _below(ra.signs, rb.signs):
        return a if fn == "min" else b
    if _below(rb.signs, ra.signs):
        return b if fn == "min" else a
    return node


def _below(a: frozenset, b: frozenset) -> bool:
    """Every value of signs ``a`` is ≤ every value of signs ``b`` (equal signs decide only for 0 and 0)."""
    return all(s < t or s == t == ZERO for s in a for t in b)


def _compare(node: Node, facts: Facts) -> Node:
    """A comparison decided by identical operands or by the signs of one compared with 0."""
    op, left, right = node.args
    if _expr.canonical(left) == _expr.canonical(right) and value_range(left, facts).finite:
        return number(1.0 if op in ("==", "<=", ">=") else 0.0)
    if _is_num(right, 0.0):
        subject = left
    elif _is_num(left, 0.0):
        subject, op = right, _MIRRORED[op]
    else:
        return node
    r = value_range(subject, facts)
    if not r.finite or not r.signs:
        return node
    outcomes = {_COMPARE[op](s, 0) for s in r.signs}
    return number(1.0 if outcomes.pop() else 0.0) if len(outcomes) == 1 else node


def _logic(node: Node) -> Node:
    """``and``/``or`` with one operand known: the other decides, or the known one does."""
    if node.kind == "not":
        inner = node.args[0]
        return inner.args[0] if inner.kind == "not" and inner.args[0].is_bool else node
    for known, other in (node.args, node.args[::-1]):
        if _is_num(known):
            decisive = (known.args[0] == 0.0) if node.kind == "and" else (known.args[0] != 0.0)
            if decisive:
                return number(0.0 if node.kind == "and" else 1.0)
            return other if other.is_bool else Node("cmp", ("!=", other, number(0.0)))
    return node


def _conditional(node: Node, facts: Facts) -> Node:
    """A test that folds takes its branch; otherwise each branch is simplified knowing the test's outcome."""
    cond = simplify(node.args[0], facts)
    if _is_num(cond):
        return simplify(node.args[1] if cond.args[0] != 0.0 else node.args[2], facts)
    then_facts, else_facts = _branch_facts(cond, facts)
    then, other = simplify(node.args[1], then_facts), simplify(node.args[2], else_facts)
    if _is_num(then) and _is_num(other) and _same(then.args[0], other.args[0]):
        return then  # every branch reduces to one number: the test does not matter
    return Node("if", (cond, then, other))


def _same(a: float, b: float) -> bool:
    return a == b or (bool(np.isnan(a)) and bool(np.isnan(b)))


def proves_value(tree: Node, value: float, facts: Facts | None = None) -> bool:
    """Whether ``tree`` equals ``value`` wherever its variables are finite and ``facts`` hold.

    >>> from semiring.expr import parse
    >>> proves_value(parse("min(abs(x), 0)", ("x",))[0], 0.0)
    True
    >>> proves_value(parse("0 * (1 / (x - 1))", ("x",))[0], 0.0)  # inf at x = 1
    False
    """
    s = simplify(tree, facts)
    return _is_num(s) and _same(s.args[0], value)
