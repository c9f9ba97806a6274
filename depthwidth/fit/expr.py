"""The expression language of user-defined laws (userlaw.py): a safe parser and an evaluator
that carries exact first derivatives.

Parsing: Python's own ``ast`` parses the text (``mode="eval"``), and every node is checked
against a short whitelist before anything is evaluated: numbers, names, ``+ - * / **``,
unary minus and plus, parentheses (implicit in the tree) and calls of ``exp log sqrt abs
minimum maximum where tanh softplus sigmoid log1p expm1 clip sign log10 logsumexp`` by their bare
names (``FUNCTIONS``: arity; ``logsumexp`` takes one or more), ``where``'s first argument being one
comparison (``< <= > >=``).  Everything else -- attributes, subscripts, keywords, strings, lambdas, a
name starting with ``_`` -- is bad input naming the offending piece.  Nothing is ever passed
to ``eval``: the tree is rebuilt as nested tuples and walked by ``evaluate`` below, which only
knows the operations above, so no text of a law file can reach Python's builtins.

Evaluation is numpy, vectorised: a symbol's value is whatever array the caller binds to it
(parameters as (S, 1), columns as (n,), broadcasting to (S, n)).  Derivatives are
forward-mode automatic differentiation: every node yields ``(value, {parameter: d value /
d parameter})``, the partials following the chain rule of the node's operation.  This is
exact (no step size to choose for parameters whose scales differ by orders of magnitude, and
no loss of half the digits in the engine's float32 search, which central differences would
suffer), and costs about what finite differences would: one pass carrying one partial per
parameter a sub-expression depends on, instead of two passes per parameter.  At the kinks of
``abs``, ``minimum``, ``maximum``, ``where`` and ``clip`` the derivative of the branch taken is
used; ``sign`` has none.  ``softplus``, ``sigmoid`` and ``logsumexp`` are the overflow-free forms.

Subtrees made of numbers alone are folded when parsed, so evaluation mixes arrays only with
Python floats and keeps the caller's dtype (float32 during the engine's search).
"""

from __future__ import annotations

import ast
import math

import numpy as np

from depthwidth.core.errors import bad

FUNCTIONS = {  # name: arity (None: one or more arguments)
    "exp": 1,
    "log": 1,
    "sqrt": 1,
    "abs": 1,
    "minimum": 2,
    "maximum": 2,
    "where": 3,
    "tanh": 1,
    "softplus": 1,
    "sigmoid": 1,
    "log1p": 1,
    "expm1": 1,
    "clip": 3,
    "sign": 1,
    "log10": 1,
    "logsumexp": None,
}
_BINARY = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
LN10 = math.log(10.0)
MAX_LENGTH = 4000  # characters of one expression: a law, not a program
MAX_DEPTH = 200  # operations nested in one another
ALLOWED = (
    "numbers, names of parameters and columns, + - * / ** (powers), unary -, parentheses and the functions "
    "exp log sqrt abs minimum maximum where(x < y, a, b) tanh softplus sigmoid log1p expm1 clip(x, lo, hi) sign "
    "log10 logsumexp(a, b, ...); a[3]: an element of an indexed parameter"
)


# A parsed expression is a tree of tuples:
#   ("n", float)                 a number
#   ("s", name)                  a symbol: parameter, column or definition, bound by the caller
#   ("neg", a)                   -a
#   ("op", "+", a, b)            a binary operation: + - * / **
#   ("f", name, (a, ...))        a whitelisted function
#   ("cmp", "<", a, b)           a comparison (where's first argument only)


def parse(text, what: str) -> tuple:
    """``text`` -> expression tree, or BadInput naming ``what`` (e.g. ``law.yaml formula``)."""
    if not isinstance(text, str) or not text.strip():
        raise bad(what, text, "a non-empty expression: " + ALLOWED)
    if len(text) > MAX_LENGTH:
        raise bad(what, text[:40] + "…", f"an expression of at most {MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        where = f" at column {e.offset}" if e.offset else ""
        raise bad(what, text, f"a numpy-style expression of {ALLOWED}; syntax error{where}: {e.msg}") from None
    except (ValueError, RecursionError, MemoryError):  # null bytes, absurd nesting
        raise bad(what, text[:80], "a numpy-style expression of " + ALLOWED) from None
    try:
        node = _build(tree.body, text, what)
        deep = _depth(node) > MAX_DEPTH
    except RecursionError:
        deep = True
    if deep:  # evaluation recurses too, inside the engine's threads: keep it far from Python's limit
        raise bad(what, text[:80], f"an expression nested at most {MAX_DEPTH} operations deep")
    return node


def _depth(node: tuple) -> int:
    kids = (
        [node[1]] if node[0] == "neg" else node[2:4] if node[0] in ("op", "cmp") else node[2] if node[0] == "f" else []
    )
    return 1 + max((_depth(k) for k in kids), default=0)


def _piece(node, text: str) -> str:
    return ast.get_source_segment(text.strip(), node) or type(node).__name__


def _build(node, text: str, what: str) -> tuple:
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise bad(what, _piece(node, text), "numbers (ints or floats), not strings, booleans or complex")
        try:
            return ("n", float(v))
        except OverflowError:  # an integer literal beyond a float
            raise bad(what, _piece(node, text)[:40], "numbers within a float's range") from None
    if isinstance(node, ast.Name):
        if node.id in FUNCTIONS:
            raise bad(what, node.id, f"{node.id} called as {node.id}(...); a symbol needs another name")
        if node.id.startswith("_"):
            raise bad(what, node.id, "names of parameters and columns that do not start with _")
        return ("s", node.id)
    if isinstance(node, ast.Subscript):  # an element of an indexed parameter: a[3]
        return ("s", _element(node, text, what))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        a = _build(node.operand, text, what)
        return _fold(("neg", a), what, node, text) if isinstance(node.op, ast.USub) else a
    if isinstance(node, ast.BinOp):
        op = _BINARY.get(type(node.op))
        if op is None:
            hint = "; ** for powers" if isinstance(node.op, ast.BitXor) else ""
            raise bad(what, _piece(node, text), f"the operators + - * / **{hint}")
        return _fold(("op", op, _build(node.left, text, what), _build(node.right, text, what)), what, node, text)
    if isinstance(node, ast.Call):
        f = node.func
        if not isinstance(f, ast.Name):
            raise bad(f"{what} function", _piece(f, text), " | ".join(FUNCTIONS) + ", called by their bare names")
        if f.id not in FUNCTIONS:
            raise bad(f"{what} function", f.id, " | ".join(FUNCTIONS))
        arity = FUNCTIONS[f.id]
        count_ok = len(node.args) >= 1 if arity is None else len(node.args) == arity
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args) or not count_ok:
            n = "one or more" if arity is None else arity
            raise bad(what, _piece(node, text), f"{f.id} with {n} positional argument(s)")
        args = list(node.args)
        built = []
        if f.id == "where":
            built.append(_comparison(args.pop(0), text, what))
        built += [_build(a, text, what) for a in args]
        return _fold(("f", f.id, tuple(built)), what, node, text)
    if isinstance(node, ast.Compare):
        raise bad(what, _piece(node, text), "a comparison only as the first argument of where(x < y, a, b)")
    raise bad(what, _piece(node, text), ALLOWED)


def element_name(base: str, i: int) -> str:
    """The name of element ``i`` of the indexed parameter ``base`` (``a[3]``): the one spelling, in
    formulas, in fit.json's parameters and for ``--pin``."""
    return f"{base}[{i}]"


def _element(node: ast.Subscript, text: str, what: str) -> str:
    base, i = node.value, node.slice
    if isinstance(i, ast.UnaryOp) and isinstance(i.op, ast.USub) and isinstance(i.operand, ast.Constant):
        neg, i = True, i.operand
    else:
        neg = False
    ok = (
        isinstance(base, ast.Name)
        and not base.id.startswith("_")
        and base.id not in FUNCTIONS
        and isinstance(i, ast.Constant)
        and isinstance(i.value, int)
        and not isinstance(i.value, bool)
    )
    if not ok:
        raise bad(what, _piece(node, text), "an element of an indexed parameter: NAME[INTEGER], e.g. a[3]")
    return element_name(base.id, -i.value if neg else i.value)


def _comparison(node, text: str, what: str) -> tuple:
    ok = isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE
    if not ok:
        raise bad(what, _piece(node, text), "one comparison x < y, x <= y, x > y or x >= y as where's condition")
    return ("cmp", _COMPARE[type(node.ops[0])], _build(node.left, text, what), _build(node.comparators[0], text, what))


def _fold(node: tuple, what: str, source, text: str) -> tuple:
    """A node whose operands are all numbers -> the number (so evaluation never mixes numpy
    float64 scalars into float32 arrays)."""
    kids = node[1:2] if node[0] == "neg" else node[2:4] if node[0] == "op" else node[2]
    if not all(k[0] == "n" for k in kids):
        return node
    with np.errstate(all="ignore"):
        v = float(evaluate(node, {})[0])
    if not math.isfinite(v):
        raise bad(what, _piece(source, text), "constant parts that evaluate to a finite number")
    return ("n", v)


def symbols(node: tuple) -> list[str]:
    """The symbols ``node`` reads, in order of first appearance."""
    out: list[str] = []

    def walk(n):
        if n[0] == "s":
            if n[1] not in out:
                out.append(n[1])
        elif n[0] == "neg":
            walk(n[1])
        elif n[0] in ("op", "cmp"):
            walk(n[2])
            walk(n[3])
        elif n[0] == "f":
            for a in n[2]:
                walk(a)

    walk(node)
    return out


def evaluate(node: tuple, env: dict) -> tuple:
    """(value, {parameter: partial derivative}) of ``node``; ``env`` binds each symbol to its own
    (value, partials) pair: a parameter to (its value, {its name: d value / d internal value}), a
    column to (its array, {}).  Call under ``np.errstate`` -- a law may leave its domain at a
    start, which is the engine's business (an infinite objective), not an error."""
    kind = node[0]
    if kind == "n":
        return node[1], {}
    if kind == "s":
        return env[node[1]]
    if kind == "neg":
        v, g = evaluate(node[1], env)
        return np.negative(v), {k: -d for k, d in g.items()}
    if kind == "op":
        return _OPS[node[1]](evaluate(node[2], env), evaluate(node[3], env))
    if kind == "f":
        if node[1] == "where":
            cond = _condition(node[2][0], env)
            return _select(cond, evaluate(node[2][1], env), evaluate(node[2][2], env))
        return _FUNS[node[1]](*[evaluate(a, env) for a in node[2]])
    raise AssertionError(f"not an expression node: {kind}")  # parse builds no other kind


def _condition(node: tuple, env: dict):
    a, b = evaluate(node[2], env)[0], evaluate(node[3], env)[0]
    return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[node[1]](a, b)


def _sum(ga: dict, gb: dict, sb: float = 1.0) -> dict:
    """Partials of a + sb·b."""
    g = dict(ga)
    for k, d in gb.items():
        g[k] = g[k] + sb * d if k in g else sb * d
    return g


def _add(a, b):
    return np.add(a[0], b[0]), _sum(a[1], b[1])


def _sub(a, b):
    return np.subtract(a[0], b[0]), _sum(a[1], b[1], -1.0)


def _mul(a, b):
    (va, ga), (vb, gb) = a, b
    g = {k: d * vb for k, d in ga.items()}
    for k, d in gb.items():
        g[k] = g[k] + va * d if k in g else va * d
    return np.multiply(va, vb), g


def _div(a, b):
    (va, ga), (vb, gb) = a, b
    v = np.divide(va, vb)
    g = {k: d / vb for k, d in ga.items()}  # d(a/b) = da/b - (a/b)·db/b
    for k, d in gb.items():
        t = -v * d / vb
        g[k] = g[k] + t if k in g else t
    return v, g


def _pow(a, b):
    (va, ga), (vb, gb) = a, b
    v = np.power(va, vb)
    g = {}
    if ga:  # d(a^b)/da = b·a^(b-1)
        da = vb * np.power(va, vb - 1.0)
        g = {k: da * d for k, d in ga.items()}
    if gb:  # d(a^b)/db = a^b·ln a
        db = v * np.log(va)
        for k, d in gb.items():
            g[k] = g[k] + db * d if k in g else db * d
    return v, g


def _exp(a):
    v = np.exp(a[0])
    return v, {k: v * d for k, d in a[1].items()}


def _log(a):
    return np.log(a[0]), {k: d / a[0] for k, d in a[1].items()}


def _sqrt(a):
    v = np.sqrt(a[0])
    return v, {k: d / (2.0 * v) for k, d in a[1].items()}


def _abs(a):
    s = np.sign(a[0])
    return np.abs(a[0]), {k: s * d for k, d in a[1].items()}


def _tanh(a):
    v = np.tanh(a[0])
    return v, {k: (1.0 - v * v) * d for k, d in a[1].items()}


def _expit(x):
    """1 / (1 + e^-x) without overflow: 0.5·(1 + tanh(x/2))."""
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _sigmoid(a):
    v = _expit(a[0])
    return v, {k: v * (1.0 - v) * d for k, d in a[1].items()}


def _softplus(a):
    """log(1 + e^x), without overflow for large x; its derivative is sigmoid(x)."""
    v = np.logaddexp(0.0, a[0])
    s = _expit(a[0]) if a[1] else None
    return v, {k: s * d for k, d in a[1].items()}


def _log1p(a):
    return np.log1p(a[0]), {k: d / (1.0 + a[0]) for k, d in a[1].items()}


def _expm1(a):
    v = np.expm1(a[0])
    e = v + 1.0 if a[1] else None
    return v, {k: e * d for k, d in a[1].items()}


def _sign(a):
    return np.sign(a[0]), {}  # piecewise constant: no partials (at 0 neither does the kink's branch)


def _log10(a):
    return np.log10(a[0]), {k: d / (a[0] * LN10) for k, d in a[1].items()}


def _clip(x, lo, hi):
    """clip(x, lo, hi) = minimum(maximum(x, lo), hi): the partials of the branch taken."""
    return _minimum(_maximum(x, lo), hi)


def _logsumexp(*args):
    """log(sum exp(a_i)), shifted by the largest a_i; partials: the softmax weights times each a_i's."""
    vals = [a[0] for a in args]
    m = vals[0]
    for v in vals[1:]:
        m = np.maximum(m, v)
    m = np.where(np.isfinite(m), m, 0.0) if np.ndim(m) else (m if math.isfinite(m) else 0.0)
    es = [np.exp(np.subtract(v, m)) for v in vals]
    z = es[0]
    for e in es[1:]:
        z = z + e
    g: dict = {}
    for e, (_, ga) in zip(es, args):
        if not ga:
            continue
        w = e / z
        for k, d in ga.items():
            g[k] = g[k] + w * d if k in g else w * d
    return np.log(z) + m, g


def _select(cond, a, b):
    """where(cond, a, b) with the partials of the branch taken."""
    (va, ga), (vb, gb) = a, b
    g = {k: np.where(cond, ga.get(k, 0.0), gb.get(k, 0.0)) for k in {**ga, **gb}}
    return np.where(cond, va, vb), g


def _minimum(a, b):
    return _select(np.less_equal(a[0], b[0]), a, b)


def _maximum(a, b):
    return _select(np.greater_equal(a[0], b[0]), a, b)


_OPS = {"+": _add, "-": _sub, "*": _mul, "/": _div, "**": _pow}
_FUNS = {
    "exp": _exp,
    "log": _log,
    "sqrt": _sqrt,
    "abs": _abs,
    "minimum": _minimum,
    "maximum": _maximum,
    "tanh": _tanh,
    "softplus": _softplus,
    "sigmoid": _sigmoid,
    "log1p": _log1p,
    "expm1": _expm1,
    "clip": _clip,
    "sign": _sign,
    "log10": _log10,
    "logsumexp": _logsumexp,
}
