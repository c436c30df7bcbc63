"""The small expression language every op, norm and expansion is written in.

One declaration (a Python function or an expression string) is parsed once into
a tree; the tree is then *rendered* to Python source for the CPU engine (numba
compiles it) and to CUDA C for the GPU kernels.  Both renderings come from the
same tree, so the CPU and GPU forms of an op cannot drift apart.

Rendering is a pure function of the tree: nothing here imports a GPU library.

The language: numbers, the declared variable names, ``+ - * / **``, unary
minus, comparisons (one operator per comparison), ``and``/``or``/``not``,
conditional expressions ``a if cond else b`` and the functions ``abs``,
``sqrt``, ``log``, ``exp``, ``pow``, ``min`` and ``max`` (also spelled
``math.sqrt``, ``np.log`` ...), plus the constants ``inf``, ``nan`` and ``pi``.
``min``/``max`` follow IEEE ``fmin``/``fmax``: a NaN argument is ignored.
Comparisons and logical operators give 1.0 or 0.0 when used as numbers.

Bounded: a binding used twice is one shared node of the parsed tree (a DAG,
nothing is copied while parsing), but every rendering writes it out in full,
so a declaration is refused with an :class:`ExpressionError` when it would
expand to more than :data:`MAX_NODES` operations or nest deeper than
:data:`MAX_DEPTH` (``a1 = a0 + a0; a2 = a1 + a1; ...`` doubles at each line).
Constants are never folded here; where the semantics module folds them it
uses NumPy float64 with errors ignored, as the engines compute (``1/0 = inf``).
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

FUNCTIONS = {"abs": 1, "sqrt": 1, "log": 1, "exp": 1, "pow": 2, "min": 2, "max": 2}
CONSTANTS = {"inf": math.inf, "nan": math.nan, "pi": math.pi}
_MODULE_PREFIXES = {"math", "np", "numpy", "cupy", "cp"}

# A declaration expanded (bindings substituted) to more nodes than this is refused: the renderings and
# numba's compile time grow with the expanded size (about 1 s per 1,000 nodes), and 2^k copies of a
# doubled binding would never finish.  Deeper nesting than MAX_DEPTH is refused before any recursion.
MAX_NODES = 2000
MAX_DEPTH = 100

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


@dataclass(frozen=True)
class Node:
    """One node of an expression tree: ``kind`` names it, ``args`` are children or leaves."""

    kind: str  # num | var | bin | neg | cmp | and | or | not | if | call
    args: tuple

    @property
    def is_bool(self) -> bool:
        return self.kind in ("cmp", "and", "or", "not")


class ExpressionError(ValueError):
    """A declaration uses something outside the expression language."""


def substitute(node: Node, values: Mapping[str, Node]) -> Node:
    """``node`` with each variable named in ``values`` replaced by that tree.

    >>> tree, _ = parse("abs(x - y)", ("x", "y"))
    >>> render_python(substitute(tree, {"y": Node("num", (0.0,))}), {"x": "x"}, plain=True)
    'abs(x - 0.0)'
    """
    if node.kind == "var":
        return values.get(node.args[0], node)
    return Node(node.kind, tuple(substitute(a, values) if isinstance(a, Node) else a for a in node.args))


_COMMUTATIVE_BIN = ("+", "*")
_COMMUTATIVE_CALL = ("min", "max")
_SYMMETRIC_CMP = ("==", "!=")


def canonical(node: Node) -> Node:
    """``node`` with the operands of commutative operations in a fixed order.

    Two spellings of one op (``x + y`` and ``y + x``, ``max(y, x)`` and
    ``max(x, y)``) have the same canonical tree, so a built-in op is recognised
    by what it computes rather than by how it was typed.

    The distance ``a - b`` is symmetric under ``abs`` and when squared, so
    ``abs(y - x)`` is ``abs(x - y)`` and ``(y - x) * (y - x)`` is
    ``(x - y) * (x - y)`` (both exact in IEEE arithmetic: negation is).

    >>> a, _ = parse("y + x", ("x", "y")); b, _ = parse("x + y", ("x", "y"))
    >>> canonical(a) == canonical(b)
    True
    >>> a, _ = parse("abs(y - x)", ("x", "y")); b, _ = parse("abs(x - y)", ("x", "y"))
    >>> canonical(a) == canonical(b)
    True
    """
    args = tuple(canonical(a) if isinstance(a, Node) else a for a in node.args)
    if node.kind == "call" and args[0] == "abs":
        args = ("abs", _ordered_difference(args[1]))
    elif node.kind == "bin" and args[0] == "*" and args[1] == args[2]:
        args = ("*", _ordered_difference(args[1]), _ordered_difference(args[2]))
    if (
        node.kind == "bin"
        and args[0] in _COMMUTATIVE_BIN
        or node.kind == "cmp"
        and args[0] in _SYMMETRIC_CMP
        or node.kind == "call"
        and args[0] in _COMMUTATIVE_CALL
    ):
        args = (args[0], *sorted(args[1:], key=repr))
    elif node.kind in ("and", "or"):
        args = tuple(sorted(args, key=repr))
    return Node(node.kind, args)


def _ordered_difference(node: Node) -> Node:
    """``a - b`` with its operands in a fixed order: only for contexts where the sign does not matter."""
    if node.kind == "bin" and node.args[0] == "-":
        return Node("bin", ("-", *sorted(node.args[1:], key=repr)))
    return node


# --------------------------------------------------------------------------- parsing


def parse(source: str | Callable, variables: Sequence[str]) -> tuple[Node, str]:
    """Parse ``source`` (an expression string or a one-expression function) into a tree.

    ``variables`` are the names the expression may use, in the order a function
    declaration must take them.  Returns the tree and the canonical expression text.
    """
    if isinstance(source, str):
        return _parse_bindings(source, tuple(variables))
    elif callable(source):
        tree, names = _function_body(source, variables)
    else:
        raise TypeError(f"an op is declared by a function or an expression string, got {type(source).__name__}")
    rename = dict(zip(names, variables))
    _check_ast_depth(tree, source)
    node = _convert(tree, rename, tuple(variables))
    _check_size(node, source)
    return node, render_python(node, {v: v for v in variables}, plain=True)


def _parse_bindings(source: str, variables: tuple[str, ...]) -> tuple[Node, str]:
    """An expression, optionally preceded by ``name = expression`` bindings (``;`` or newlines).

    Bindings are substituted into what follows, so every rendering stays a
    single expression: ``"d = 1 - x; 0 if d < 0 else d"``.
    """
    if len(source) > 100 * MAX_NODES:
        raise ExpressionError(f"expression of {len(source):,} characters; the limit is {100 * MAX_NODES:,}")
    try:
        module = ast.parse(textwrap.dedent(source).strip())
    except SyntaxError as exc:
        raise ExpressionError(f"cannot parse expression {_short(source)!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):  # Python's own parser gives up on very deep nesting
        raise ExpressionError(f"expression {_short(source)!r} is nested too deeply; the limit is {MAX_DEPTH}") from None
    _check_ast_depth(module, source)
    *lets, last = module.body or [None]
    if not isinstance(last, ast.Expr):
        raise ExpressionError(f"expression {source!r} must end with an expression")
    bound: dict[str, Node] = {}
    for stmt in lets:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            raise ExpressionError(f"only 'name = expression' bindings may precede the expression in {_short(source)!r}")
        name = stmt.targets[0].id
        if name in variables or name in CONSTANTS:
            raise ExpressionError(
                f"binding {name!r} in {_short(source)!r} would hide the "
                f"{'variable' if name in variables else 'constant'} {name!r}; choose another name"
            )
        bound[name] = _convert(stmt.value, {v: v for v in variables}, variables, bound)
        _check_size(bound[name], source)  # before the next binding can double it
    node = _convert(last.value, {v: v for v in variables}, variables, bound)
    _check_size(node, source)
    return node, render_python(node, {v: v for v in variables}, plain=True)


def check_parameter_names(params: Sequence[str], variables: Sequence[str]) -> None:
    """Refuse a parameter name that would read as an operand, a constant or a function of the language.

    >>> check_parameter_names(["x"], ("x", "y"))
    Traceback (most recent call last):
    ...
    semiring.expr.ExpressionError: parameter 'x' has the name of the operand x; name it otherwise (p, w, scale, ...)
    """
    for name in params:
        if not (isinstance(name, str) and name.isidentifier()):
            raise ExpressionError(f"parameter name {name!r} is not a Python identifier")
        clash = (
            f"the operand {name}"
            if name in variables
            else f"the constant {name}"
            if name in CONSTANTS
            else f"the function {name}()"
            if name in FUNCTIONS
            else f"the module prefix {name}."
            if name in _MODULE_PREFIXES
            else None
        )
        if clash:
            raise ExpressionError(f"parameter {name!r} has the name of {clash}; name it otherwise (p, w, scale, ...)")


def _short(source) -> str:
    text = source if isinstance(source, str) else repr(source)
    return text if len(text) <= 120 else text[:100] + " ... " + text[-15:]


def _check_ast_depth(tree: ast.AST, source) -> None:
    """Refuse nesting deeper than MAX_DEPTH before any recursive walk (no RecursionError)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(
                f"expression {_short(source)!r} is nested more than {MAX_DEPTH} levels deep "
                "(a long chain such as x + x + ... counts one level per operator); split it with bindings "
                "or a semiring of simpler ops"
            )
        stack.extend((child, depth + isinstance(child, ast.expr)) for child in ast.iter_child_nodes(node))


def expanded_size(node: Node) -> tuple[int, int]:
    """(nodes, depth) of ``node`` once every shared subtree is written out, as the renderings do.

    Counted over the shared DAG, each distinct node once, so it is quick even where the answer is huge.

    >>> expanded_size(parse("a = x + y; a * a", ("x", "y"))[0])
    (7, 3)
    """
    measured: dict[int, tuple[int, int]] = {}
    stack = [node]
    while stack:
        n = stack[-1]
        children = [a for a in n.args if isinstance(a, Node) and id(a) not in measured]
        if children:
            stack.extend(children)
            continue
        stack.pop()
        below = [measured[id(a)] for a in n.args if isinstance(a, Node)]
        measured[id(n)] = (1 + sum(s for s, _ in below), 1 + max((d for _, d in below), default=0))
    return measured[id(node)]


def _check_size(node: Node, source) -> None:
    size, depth = expanded_size(node)
    if size > MAX_NODES:
        raise ExpressionError(
            f"expression {_short(source)!r} expands to {size:,} operations once its bindings are written out "
            f"(a binding used twice counts twice); the limit is {MAX_NODES:,}"
        )
    if depth > MAX_DEPTH:
        raise ExpressionError(
            f"expression {_short(source)!r} is nested {depth} levels deep once its bindings are written out; "
            f"the limit is {MAX_DEPTH}"
        )


_DECLARE = "declare it as a string instead, for example binary_op('abs(x - y)')"


def _function_body(func: Callable, variables: Sequence[str]) -> tuple[ast.expr, list[str]]:
    """The returned expression of a lambda or a one-statement ``def``, found from its source, and only where
    what is compiled provably is what ``func`` computes (``_check_same_function``)."""
    if hasattr(func, "__wrapped__"):  # functools.wraps: the source found is the wrapped function's, not func's
        raise ExpressionError(
            f"{func!r} wraps another function (a decorator): its source is not what it computes; {_DECLARE}"
        )
    code = getattr(func, "__code__", None)
    if code is not None and code.co_freevars:
        raise ExpressionError(
            f"{func.__name__} reads {', '.join(code.co_freevars)} from an enclosing function, which the compiled "
            f"op cannot see; {_DECLARE} (a value as a parameter: binary_op('x * p', p=2.0))"
        )
    try:
        src = textwrap.dedent(inspect.getsource(func))
    except (OSError, TypeError):
        raise ExpressionError(f"cannot read the source of {func!r}; {_DECLARE}") from None
    if code is None:
        raise ExpressionError(f"{func!r} is not a plain function; {_DECLARE}")
    module = None
    for candidate in (src, src.strip().rstrip(",)"), "(" + src.strip().rstrip(",") + ")"):
        try:
            module = ast.parse(candidate)
            break
        except SyntaxError:
            continue
    if module is None:
        raise ExpressionError(f"cannot parse the source of {func!r}; {_DECLARE}")
    candidates = []
    for fn in ast.walk(module):
        if isinstance(fn, ast.Lambda) and func.__name__ == "<lambda>":
            body = fn.body
        elif isinstance(fn, ast.FunctionDef) and fn.name == func.__name__:
            stmts = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if len(stmts) != 1 or not isinstance(stmts[0], ast.Return) or stmts[0].value is None:
                raise ExpressionError(f"{func.__name__}() must consist of a single 'return <expression>'")
            body = stmts[0].value
        else:
            continue
        args = [a.arg for a in fn.args.args]
        if len(args) == code.co_argcount and args == list(code.co_varnames[: code.co_argcount]):
            candidates.append((fn, body, args))
    # The source found must compile to func's own code: not a decorator's wrapper, not a file edited since
    # it was imported, not a function whose __code__ was swapped (several lambdas on one line are told apart
    # the same way).
    modules = {k: v.__name__ for k, v in getattr(func, "__globals__", {}).items() if inspect.ismodule(v)}
    candidates = [c for c in candidates if _code_of(c[0], modules) == _signature(code)]
    if len(candidates) != 1:
        raise ExpressionError(
            f"cannot find the single expression of {func!r} in its source, compiled to the code the function runs "
            f"(a decorator, or a source file changed since it was imported); {_DECLARE}"
        )
    fn, body, args = candidates[0]
    if len(args) != len(variables):
        raise ExpressionError(f"the function must take {len(variables)} arguments ({', '.join(variables)}), got {args}")
    _check_names(func, body, args)
    return body, args


def _signature(code) -> tuple:
    """What decides what a code object computes, positions aside."""
    return code.co_code, code.co_consts, code.co_names, code.co_varnames, code.co_freevars


def _code_of(fn: ast.AST, modules: Mapping[str, str]) -> tuple:
    """``_signature`` of a lambda or an undecorated ``def`` compiled from its source at module level.

    The names it reads that are modules where it was defined are imported first: CPython compiles
    ``math.sqrt(x)`` differently where ``math`` is known to be an import."""
    if isinstance(fn, ast.FunctionDef) and fn.decorator_list:  # a decorator may return anything
        return ()
    read = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
    imports = [ast.Import([ast.alias(name=modules[name], asname=name)]) for name in sorted(read) if name in modules]
    statement = fn if isinstance(fn, ast.FunctionDef) else ast.Expr(fn)
    try:
        module = compile(ast.fix_missing_locations(ast.Module([*imports, statement], type_ignores=[])), "<op>", "exec")
    except (SyntaxError, ValueError):
        return ()
    codes = [c for c in module.co_consts if hasattr(c, "co_code")]
    return _signature(codes[0]) if len(codes) == 1 else ()


# The objects each name of the language may be bound to where a function op reads it: the builtins, math's
# and NumPy's own functions and constants that compute the language's meaning on two scalars (a user's
# ``def abs(v): ...`` computes otherwise; ``np.min(x, y)`` is a reduction over an axis, not a minimum).
_MODULES = {"math": math, "np": np, "numpy": np}
_MEANINGS = {
    math: ("sqrt", "log", "exp", "pow", "fabs", "inf", "nan", "pi"),
    np: ("sqrt", "log", "exp", "abs", "fabs", "power", "fmin", "fmax", "minimum", "maximum", "inf", "nan", "pi"),
}
_OWN = {(m, a): getattr(m, a) for m, names in _MEANINGS.items() for a in names if hasattr(m, a)}


def _language_objects(name: str) -> tuple:
    import builtins

    own = tuple(v for (_, a), v in _OWN.items() if a == name)
    return own + ((getattr(builtins, name),) if name in ("abs", "pow", "min", "max") else ())


def _check_names(func: Callable, body: ast.expr, args: list[str]) -> None:
    """Refuse a function op whose global names (``abs``, ``sqrt``, ``np``, ``inf``) Python resolves to something
    other than the language's meaning: a user's object of that name."""
    import builtins

    scope = getattr(func, "__globals__", {})
    missing = object()

    def resolve(name):
        value = scope.get(name, missing)
        return getattr(builtins, name, missing) if value is missing else value

    for node in ast.walk(body):
        if isinstance(node, ast.Name) and node.id not in args:
            value = resolve(node.id)
            if value is missing:
                continue  # unbound in Python (a NameError there): the language's meaning is the only one
            if node.id in CONSTANTS:
                expected = CONSTANTS[node.id]
                good = isinstance(value, float) and (value == expected or (math.isnan(value) and math.isnan(expected)))
            elif node.id in _MODULE_PREFIXES:
                good = value is _MODULES.get(node.id) or getattr(value, "__name__", None) == "cupy"
            else:
                good = any(value is obj for obj in _language_objects(node.id))
            if not good:
                raise ExpressionError(
                    f"{node.id!r} in {func.__name__} is {value!r} where the function is defined, not the language's "
                    f"{node.id}: the compiled op would not compute what the function does; {_DECLARE}"
                )
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in _MODULES:
            module = resolve(node.value.id)
            if module is not _MODULES[node.value.id]:
                continue  # the module name itself was checked above
            if getattr(module, node.attr, None) is not _OWN.get((module, node.attr), missing):
                raise ExpressionError(
                    f"{node.value.id}.{node.attr} in {func.__name__} is not a function or constant of the "
                    f"language ({', '.join(_MEANINGS[module])}), or was replaced since import; {_DECLARE}"
                )


def _convert(t: ast.AST, rename: Mapping[str, str], variables: tuple[str, ...], bound=None) -> Node:
    bound = bound or {}

    def conv(e):
        return _convert(e, rename, variables, bound)

    if isinstance(t, ast.Constant) and isinstance(t.value, (int, float, bool)) and not isinstance(t.value, complex):
        return Node("num", (float(t.value),))
    if isinstance(t, ast.Name):
        if t.id in bound:
            return bound[t.id]
        if t.id in rename:
            return Node("var", (rename[t.id],))
        if t.id in CONSTANTS:
            return Node("num", (CONSTANTS[t.id],))
        raise ExpressionError(
            f"unknown name {t.id!r}; the expression may use {', '.join(variables)} and constants inf, nan, pi"
        )
    if (
        isinstance(t, ast.Attribute)
        and isinstance(t.value, ast.Name)
        and t.value.id in _MODULE_PREFIXES
        and t.attr in CONSTANTS
    ):
        return Node("num", (CONSTANTS[t.attr],))
    if isinstance(t, ast.BinOp) and type(t.op) in _BINOPS:
        return Node("bin", (_BINOPS[type(t.op)], conv(t.left), conv(t.right)))
    if isinstance(t, ast.UnaryOp):
        if isinstance(t.op, ast.USub):
            return Node("neg", (conv(t.operand),))
        if isinstance(t.op, ast.UAdd):
            return conv(t.operand)
        if isinstance(t.op, ast.Not):
            return Node("not", (conv(t.operand),))
    if isinstance(t, ast.Compare):
        if len(t.ops) != 1 or type(t.ops[0]) not in _CMPOPS:
            raise ExpressionError("write one comparison at a time, e.g. '(a < b) and (b < c)'")
        return Node("cmp", (_CMPOPS[type(t.ops[0])], conv(t.left), conv(t.comparators[0])))
    if isinstance(t, ast.BoolOp):
        kind = "and" if isinstance(t.op, ast.And) else "or"
        node = conv(t.values[0])
        for v in t.values[1:]:
            node = Node(kind, (node, conv(v)))
        return node
    if isinstance(t, ast.IfExp):
        return Node("if", (conv(t.test), conv(t.body), conv(t.orelse)))
    if isinstance(t, ast.Call) and not t.keywords:
        f = t.func
        name = (
            f.id
            if isinstance(f, ast.Name)
            else (
                f.attr
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in _MODULE_PREFIXES
                else None
            )
        )
        if name == "fabs":
            name = "abs"
        if name in ("fmin", "fmax", "minimum", "maximum"):
            name = "min" if name in ("fmin", "minimum") else "max"
        if name == "power":
            name = "pow"
        if name in FUNCTIONS:
            if len(t.args) != FUNCTIONS[name]:
                raise ExpressionError(f"{name}() takes {FUNCTIONS[name]} argument(s), got {len(t.args)}")
            return Node("call", (name, *(conv(a) for a in t.args)))
        raise ExpressionError(f"unsupported function in op: {ast.unparse(f)}; known: {', '.join(FUNCTIONS)}")
    raise ExpressionError(f"unsupported syntax in op: {ast.unparse(t)!r}")


# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class _Dialect:
    """How one target language spells each construct of the tree."""

    number: Callable[[float], str]
    to_number: Callable[[str], str]  # a boolean used as a number
    to_bool: Callable[[str], str]  # a number used as a condition
    power: Callable[[str, str], str]
    logic: Mapping[str, str]  # and / or / not
    conditional: Callable[[str, str, str], str]  # (cond, then, else)
    functions: Mapping[str, str]  # our name -> the target's
    unwrap_arguments: bool = False


def _render(
    node: Node,
    names: Mapping[str, str],
    d: _Dialect,
    local: Callable[[Node], str | None] = lambda n: None,
    as_bool: bool = False,
) -> str:
    """``node`` in dialect ``d``: a number (or, ``as_bool``, a condition); a subtree for which ``local`` names
    a declared local is read from it (``render_cuda_shared``)."""

    def num(n: Node) -> str:
        s = r(n)
        return d.to_number(s) if n.is_bool else s

    def cond(n: Node) -> str:
        s = r(n)
        return s if n.is_bool else d.to_bool(s)

    def r(n: Node) -> str:
        k, a = n.kind, n.args
        name = local(n)
        if name is not None:
            return name
        if k == "num":
            return d.number(a[0])
        if k == "var":
            return names[a[0]]
        if k == "bin":
            left, right = num(a[1]), num(a[2])
            return d.power(left, right) if a[0] == "**" else f"({left} {a[0]} {right})"
        if k == "neg":
            return f"(-{num(a[0])})"
        if k == "cmp":
            return f"({num(a[1])} {a[0]} {num(a[2])})"
        if k in ("and", "or"):
            return f"({cond(a[0])} {d.logic[k]} {cond(a[1])})"
        if k == "not":
            return f"({d.logic['not']}{cond(a[0])})"
        if k == "if":
            return d.conditional(cond(a[0]), num(a[1]), num(a[2]))
        fn, *args = a
        if fn == "pow":  # an operator, not a call: its operands keep their parentheses
            return d.power(*(num(x) for x in args))
        args = [_unwrap(num(x)) if d.unwrap_arguments else num(x) for x in args]
        return f"{d.functions[fn]}({', '.join(args)})"

    return cond(node) if as_bool else num(node)


def _py_number(prefix: str) -> Callable[[float], str]:
    def number(v: float) -> str:
        if math.isnan(v):
            return f"{prefix}nan"
        if math.isinf(v):
            return f"{prefix}inf" if v > 0 else f"(-{prefix}inf)"
        return repr(v)

    return number


def _python_dialect(plain: bool) -> _Dialect:
    np_ = "" if plain else "np."
    fns = {"abs": "abs", "sqrt": f"{np_}sqrt", "log": f"{np_}log", "exp": f"{np_}exp"}
    fns.update({"min": "min", "max": "max"} if plain else {"min": "np.fmin", "max": "np.fmax"})
    return _Dialect(
        number=_py_number(np_),
        to_number=lambda s: f"(1.0 if {s} else 0.0)",
        to_bool=lambda s: f"({s} != 0.0)",
        power=lambda a, b: f"({a} ** {b})",
        logic={"and": "and", "or": "or", "not": "not "},
        conditional=lambda c, a, b: f"({a} if {c} else {b})",
        functions=fns,
        unwrap_arguments=plain,
    )


def _cuda_number(T: str) -> Callable[[float], str]:
    def number(v: float) -> str:
        if math.isnan(v):
            return f"{T}(sr_nan())"
        if math.isinf(v):
            return f"{T}({'-' if v < 0 else ''}sr_inf())"
        return f"{T}({v!r})"

    return number


def render_python(node: Node, names: Mapping[str, str], plain: bool = False) -> str:
    """Scalar Python source for ``node`` (NumPy scalar semantics; numba compiles it).

    ``names`` maps each variable to the Python text that reads it.  ``plain``
    gives the readable form shown to users (``min``, ``sqrt``, ``inf``) instead
    of the executable one (``np.fmin``, ``np.sqrt``, ``np.inf``).
    """
    text = _render(node, names, _python_dialect(plain))
    return _unwrap(text) if plain else text


def render_cuda(node: Node, names: Mapping[str, str], value_type: str = "T") -> str:
    """CUDA C source for ``node`` computing in ``value_type``.

    ``names`` maps each variable to the C expression that reads it.  Special
    values come from ``sr_inf``/``sr_nan``, defined in the kernels' preamble.
    """
    return _render(node, names, _cuda_dialect(value_type))


def render_cuda_shared(roots: Sequence[Node], names: Mapping[str, str], value_type: str = "T") -> tuple[str, list[str]]:
    """``(declarations, expressions)``: CUDA C statements declaring, once, each subexpression that ``roots``
    use more than once, and each root's expression (as :func:`render_cuda`'s) reading those locals.

    A binding is substituted at every use, so a measure's tree repeats it: the clip of cosine's and
    correlation's value to [0, 2] holds the whole value three times, and NVRTC computed its division and
    square roots three times an entry (the row-range kernel's instructions 5.3x the plain product's on
    EDGAR-like rows).  A declared subexpression is computed whether or not a branch that uses it is taken:
    CUDA's arithmetic does not trap, and the operands ``names`` read are in bounds wherever the expression is.
    Locals are named ``sr_e`` and a number.
    """
    # Equal subtrees are one class, numbered bottom-up from shallow keys (a Node's own hash walks its whole
    # subtree, and hashing every subtree so took milliseconds a call on correlation's tree).
    klass: dict[int, int] = {}  # id of a node -> its class
    keys: dict[tuple, int] = {}
    children: list[tuple[int, ...]] = []
    nodes: list[Node] = []

    def intern(n: Node) -> int:
        k = klass.get(id(n))
        if k is None:
            parts = tuple(intern(a) if isinstance(a, Node) else a for a in n.args)
            kids = tuple(p for a, p in zip(n.args, parts) if isinstance(a, Node))
            k = keys.setdefault((n.kind, tuple(type(a).__name__ for a in n.args), parts), len(nodes))
            if k == len(nodes):
                children.append(kids)
                nodes.append(n)
            klass[id(n)] = k
        return k

    tops = [intern(root) for root in roots]
    refs = [0] * len(nodes)

    def count(k: int) -> None:  # references with equal subtrees merged (the in-degrees of the tree's DAG)
        refs[k] += 1
        if refs[k] == 1:
            for c in children[k]:
                count(c)

    for k in tops:
        count(k)
    d, local, lines, done = _cuda_dialect(value_type), {}, [], set()

    def declared(m: Node) -> str | None:  # the local holding m's class, once it is declared
        return local.get(klass[id(m)])

    def declare(k: int) -> None:  # children first, so each declaration reads only earlier ones
        if k in done:
            return
        done.add(k)
        for c in children[k]:
            declare(c)
        n = nodes[k]
        if refs[k] > 1 and n.kind not in ("num", "var"):
            text = _unwrap(_render(n, names, d, declared, as_bool=n.is_bool))
            local[k] = f"sr_e{len(lines)}"
            lines.append(f"const {'bool' if n.is_bool else value_type} {local[k]} = {text};")

    for k in tops:
        declare(k)
    return " ".join(lines), [_render(root, names, d, declared) for root in roots]


def _cuda_dialect(T: str) -> _Dialect:
    """CUDA C computing in the type ``T``."""
    return _Dialect(
        number=_cuda_number(T),
        to_number=lambda s: f"({s} ? {T}(1) : {T}(0))",
        to_bool=lambda s: f"({s} != {T}(0))",
        power=lambda a, b: f"pow({a}, {b})",
        logic={"and": "&&", "or": "||", "not": "!"},
        conditional=lambda c, a, b: f"({c} ? {a} : {b})",
        functions={"abs": "fabs", "sqrt": "sqrt", "log": "log", "exp": "exp", "min": "fmin", "max": "fmax"},
    )


def _unwrap(text: str) -> str:
    """``text`` without one pair of enclosing parentheses, when they enclose all of it."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and k < len(text) - 1:
            return text
    return text[1:-1]


def compile_python(node: Node, variables: Sequence[str], params: Sequence[str] = ()) -> Callable:
    """A plain Python function ``f(*variables, params)`` evaluating ``node``.

    Parameters are read from the array ``params`` by position, so one compiled
    kernel serves every parameter value.  The same function is handed to numba.
    """
    names = {v: v for v in variables}
    names.update({p: f"params[{i}]" for i, p in enumerate(params)})
    # Numbers as float64, not Python floats: '1.0 / 0.0' and '0.0 ** -1.0' would raise
    # ZeroDivisionError in plain Python where NumPy (and numba's numpy error model) give inf.
    float64 = replace(
        _python_dialect(False),
        number=lambda v: f"np.float64({_py_number('np.')(v)})",
        to_number=lambda s: f"(np.float64(1.0) if {s} else np.float64(0.0))",
    )
    src = f"lambda {', '.join([*variables, 'params'])}: {_render(node, names, float64)}"
    # Safe to evaluate: the text is rendered from a tree that admits only numbers,
    # declared names, arithmetic, comparisons and whitelisted math functions.
    return eval(src, {"np": np})


def root_of_product(q: str, a: str, b: str) -> str:
    """√(a·b) for q = a·b, as an expression: each root apart where q overflowed or underflowed (values of 1e77
    square to norms whose product overflows, values of 1e-77 to norms whose product is subnormal, then 0: a cosine
    of 1, 0 or 2 for every pair where SciPy's is right); √q itself elsewhere, exact for a row against itself
    (√a·√a may be 1 ulp off).  An idiom of the language, written by the distance measures (cosine, correlation)
    and by the graph measures (cosine), neither of which imports the other."""
    return f"(sqrt({q}) if {q} > 1e-300 and {q} < inf else sqrt({a}) * sqrt({b}))"
