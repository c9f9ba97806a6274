"""Width schedules: how wide each layer is.

Five families (docs/science.md §2): ``uniform`` (baseline), ``increasing`` (<),
``decreasing`` (>), ``diamond`` (◇, narrow ends, wide middle) and ``x``
(×, "><former": wide ends, narrow bottleneck).

Every non-uniform family is a geometric sequence around a turning layer k
(1-indexed): w_1 = h_1, w_i = g·w_{i-1} for 2 <= i <= k, w_i = r·w_{i-1} for
i > k.  ``increasing`` and ``decreasing`` are the one-rate special case
(k = L).  The *symmetric* option forces w_1 = w_L, i.e. g^(k-1)·r^(L-k) = 1;
without it the two sides share one log-rate (r = 1/g).

Parameter matching to the uniform model of width h, in this order (the
reference procedure): for a candidate rate g, r follows from symmetry, h_1
from the parameter equation, and g is bisected until the narrowest width is
ρ·h.  Then h_1 is rounded to an integer, the sequence recomputed from it, and
each width rounded to the nearest multiple of q.

Two conventions for "parameters":

``vwt``    the reference convention of Wu et al., exactly as stated:
           2·V·h + Σ 16·w_i² − 3·(w_1 − h)·w_1·[w_1 > h] − 4·w_L·(w_L − h)·[w_L > h]
           must equal 2·V·h + 16·L·h².  h_1 solves this quadratic in closed form.
           For a mixture of experts (E experts of hidden r·w_i, r = expert
           hidden / h) the paper's solver (scripts/solve_hparams.py) counts
           2·V·h + Σ (4 + 3·E·r)·w_i² + Σ E·w_i (the routers)
           − 3·(w_1 − h)·w_1 − E·r·w_L·(w_L − h): the same form with
           ``VwtTerms(K=4+3Er, G=E, D=Er)`` in place of (16, 0, 4).
``exact``  the instantiated model's true total parameter count, every tensor
           included (a counting function is passed in; see ``accounting``),
           solved numerically; after rounding the total is within 0.5% of the
           uniform model's or the call fails with the quantum to lower.  The
           default of ``dw shapes`` and of the generic presets: at small sizes
           the terms ``vwt`` leaves out (embeddings, norms, rounding to a
           head-sized quantum) are large, and a ``vwt``-matched shape can be
           10% off the uniform model's true count.

A shape more than ``MATCH_TOLERANCE`` (1%) off the uniform model's true count
is not "matched": ``dw shapes`` and ``dw report`` warn (this is the one home of
that tolerance).

No torch and no scipy here: ``dw shapes`` and ``dw sweep --dry-run`` use it.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from depthwidth.config.schema import MAX_VOCAB, MAX_WIDTH
from depthwidth.core.errors import BadInput, bad
from depthwidth.model.accounting import DENSE_TERMS, moe_terms, vwt_params  # noqa: F401 (shapes.* names)

FAMILIES = ("uniform", "increasing", "decreasing", "diamond", "x")
LABELS = {  # how a figure's legend and a table name each family
    "uniform": "uniform",
    "increasing": "increasing (<)",
    "decreasing": "decreasing (>)",
    "diamond": "diamond (◇)",
    "x": "× (><former)",
}
ALIASES = {
    "×": "x",
    "><": "x",
    "cross": "x",
    "bottleneck": "x",
    "<": "increasing",
    "inc": "increasing",
    ">": "decreasing",
    "dec": "decreasing",
    "◇": "diamond",
    "<>": "diamond",
    "flat": "uniform",
}
MATCHES = ("vwt", "exact")
EXACT_TOLERANCE = 0.005  # relative parameter mismatch allowed by `exact`
MATCH_TOLERANCE = 0.01  # a shape more than 1% off the uniform model's true count is not "matched" (warned)

# A counting function for the `exact` convention: total parameters of the
# model with these (possibly fractional) widths.
Counter = Callable[[Sequence[float]], float]


def canonical_family(family: str) -> str:
    f = ALIASES.get(family, family)
    if f not in FAMILIES:
        raise bad("family", family, "|".join(FAMILIES) + " (or ×, <, >, ◇)")
    return f


def default_turn(family: str, depth: int) -> int:
    """k ≈ 0.75·L for × (the recipe), ≈ 0.5·L for the diamond, L otherwise."""
    if family == "x":
        return max(2, min(depth - 1, round(0.75 * depth)))
    if family == "diamond":
        return max(2, min(depth - 1, round(0.5 * depth)))
    return depth


def multipliers(family: str, depth: int, turn: int, rate: float, symmetric: bool) -> list[float]:
    """m_i with w_i = h_1·m_i (m_1 = 1) for rate g = ``rate``."""
    L, k, g = depth, turn, rate
    if family in ("increasing", "decreasing") or k >= L:
        return [g**i for i in range(L)]
    r = g ** (-(k - 1) / (L - k)) if symmetric else 1.0 / g
    head = [g**i for i in range(k)]
    m = head + [head[-1] * r ** (j + 1) for j in range(L - k)]
    if symmetric:
        m[-1] = 1.0  # w_L = w_1 exactly, not 1 ± rounding error (the ends must round alike)
    return m


def _narrowest_index(family: str, depth: int, turn: int, m: Sequence[float]) -> int:
    if family == "x":
        return turn - 1
    if family == "increasing":
        return 0
    if family == "decreasing":
        return depth - 1
    return min(range(depth), key=lambda i: m[i])  # diamond: the ends


def _solve_h1_vwt(m: Sequence[float], h: float, depth: int, terms=DENSE_TERMS) -> float:
    """Positive root of the reference quadratic in h_1 (the 2·V·h terms cancel).

    The two subtracted terms apply only when w_1 > h (resp. w_L > h); try each
    case and keep the root consistent with its own case.
    """
    K, G, D = terms
    s1, s2 = sum(m), sum(x * x for x in m)
    m1, mL = m[0], m[-1]
    roots = []
    for i1 in (0, 1):
        for iL in (0, 1):
            a = K * s2 - 3 * m1 * m1 * i1 - D * mL * mL * iL
            b = G * s1 + 3 * h * m1 * i1 + D * h * mL * iL
            c = -(K * depth * h * h + G * depth * h)
            if a <= 0:
                continue
            h1 = (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)
            if (h1 * m1 > h) == bool(i1) and (h1 * mL > h) == bool(iL):
                roots.append(h1)
    if not roots:  # cannot happen for a > 0; keep the failure loud
        raise BadInput("parameter matching (vwt) found no consistent root; try another ratio or turn")
    return roots[0]


def _solve_h1_exact(m: Sequence[float], target: float, count: Counter) -> float:
    """h_1 with count(h_1·m) = target.  For fixed multipliers the count is a quadratic in h_1
    (every matrix is w_i·w_j or w_i·V, norms and biases are linear), so three evaluations give
    it and one more checks its root; a count that is not (a caller's own) is bisected."""

    def f(t: float) -> float:
        return count([t * x for x in m]) - target

    t0, t1, t2 = 1.0, 2.0, 4.0
    y0, y1, y2 = f(t0), f(t1), f(t2)
    d01, d12 = (y1 - y0) / (t1 - t0), (y2 - y1) / (t2 - t1)
    a = (d12 - d01) / (t2 - t0)
    b = d01 - a * (t0 + t1)
    c = y0 - a * t0 * t0 - b * t0
    disc = b * b - 4 * a * c
    if a > 0 and disc >= 0:
        root = (-b + math.sqrt(disc)) / (2 * a)
        if root > 0 and abs(f(root)) <= 1e-9 * target:
            return root
    lo, hi = 1e-6, 1.0
    while f(hi) < 0:
        hi *= 2.0
        if hi > 1e9:
            raise BadInput(
                f"parameter matching (exact) diverged: widths up to 1e9 x {max(m):g} stay short of the uniform "
                f"model's {target:,.0f} parameters (allowed: a width in [1, {MAX_WIDTH:,}] and a vocabulary in "
                f"[1, {MAX_VOCAB:,}])"
            )
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < 0 else (lo, mid)
    return 0.5 * (lo + hi)


def round_to(x: float, q: int) -> int:
    """Nearest multiple of q, halves rounded up (not to even)."""
    return int(math.floor(x / q + 0.5)) * q


def schedule(
    family: str,
    width: int,
    depth: int,
    *,
    ratio: float = 0.3,
    turn: int | None = None,
    symmetric: bool | None = None,
    quantum: int = 32,
    match: str = "vwt",
    count: Counter | None = None,
    strict: bool = True,
    vwt_terms: tuple[float, float, float] = DENSE_TERMS,
) -> list[int]:
    """Per-layer widths of ``family`` matched in parameters to ``depth`` × ``width``.

    ``ratio`` ρ is narrowest width / h; ``turn`` k the 1-indexed turning layer;
    ``symmetric`` forces w_1 = w_L (default on for × and diamond);
    ``count`` is required for ``match='exact'``; with ``strict=False`` a
    rounding that cannot reach 0.5% keeps the closest widths instead of
    failing (see ``exact_mismatch``).
    """
    family = canonical_family(family)
    if not isinstance(depth, int) or depth < 1:
        raise bad("depth", depth, "an integer >= 1")
    if not isinstance(width, int) or width < 1:
        raise bad("width", width, "an integer >= 1")
    if not (0 < ratio <= 1):
        raise bad("ratio", ratio, "a number in (0, 1]")
    if quantum < 1:
        raise bad("quantum", quantum, "an integer >= 1")
    if match not in MATCHES:
        raise bad("match", match, "|".join(MATCHES))
    if family == "uniform" or ratio == 1 or depth == 1:
        return [width] * depth

    k = default_turn(family, depth) if turn is None else turn
    if not (1 <= k <= depth):
        raise bad("turn", k, f"an integer in [1, {depth}]")
    sym = (family in ("x", "diamond")) if symmetric is None else bool(symmetric)
    if family in ("x", "diamond"):
        if depth < 3:
            raise bad("depth", depth, f"at least 3 for {family} (layers on both sides of the turn), or shape=uniform")
        if not (1 < k < depth):
            raise bad("turn", k, f"an integer in [2, {depth - 1}] for {family} (layers on both sides of the turn)")
    else:
        sym = False  # one rate, nothing to balance

    h = float(width)
    if match == "vwt":
        solve = lambda m: _solve_h1_vwt(m, h, depth, vwt_terms)  # noqa: E731
    else:
        if count is None:
            raise ValueError("match='exact' needs a count function")
        target = count([h] * depth)
        solve = lambda m: _solve_h1_exact(m, target, count)  # noqa: E731

    def narrowest(g: float) -> tuple[float, float, list[float]]:
        try:
            m = multipliers(family, depth, k, g, sym)
            h1 = solve(m)
        except OverflowError:  # a ramp over thousands of layers past 1e308: narrower than any width asked
            return 0.0, 0.0, []
        return h1 * m[_narrowest_index(family, depth, k, m)], h1, m

    # The rate moves away from 1 as the narrowest layer shrinks: g < 1 for ×
    # and decreasing, g > 1 for diamond and increasing.  Bisect in log g.
    shrinking = family in ("x", "decreasing")
    lo, hi = 0.0, (-1.0 if shrinking else 1.0)  # log g; at lo the model is uniform
    target_w = ratio * h
    while narrowest(math.exp(hi))[0] > target_w:
        hi *= 2.0
        if abs(hi) > 64:
            raise bad("ratio", ratio, "a value this family can reach at this depth and turn")
    while abs(hi - lo) > 1e-12:  # log g to ~1e-12: far below any rounding of a width
        mid = 0.5 * (lo + hi)
        if narrowest(math.exp(mid))[0] > target_w:
            lo = mid
        else:
            hi = mid
    g = math.exp(0.5 * (lo + hi))
    _, h1, m = narrowest(g)
    if not m:  # no rate whose widths stay finite reaches the ratio asked
        raise bad("ratio", ratio, f"a value the {family} shape reaches with finite widths at depth {depth}")

    h1 = round(h1)
    widths = [round_to(h1 * x, quantum) for x in m]
    for i, w in enumerate(widths):
        if w < 1:
            raise bad(
                f"width of layer {i + 1}", w, f"a positive multiple of {quantum}; raise --ratio or lower --quantum"
            )
    if match == "exact":
        widths = _fix_exact(widths, h1, m, quantum, count, target, strict, (family, k, sym))
    return widths


def _fix_exact(widths, h1, m, q, count, target, strict=True, shape=None):
    """Rounding to q can move the true count off target.  First nudge h_1 (every
    width recomputed from the same multipliers); where that cannot reach 0.5%
    (few, coarse layers), step single layers by ±q, greedily, keeping the shape:
    its monotone runs, the turn, w_1 = w_L when symmetric, the narrowest layer."""

    def err(ws):
        return abs(count(ws) - target) / target

    best = widths
    if err(best) > EXACT_TOLERANCE:
        for d in range(-2 * q, 2 * q + 1):
            ws = [round_to((h1 + d) * x, q) for x in m]
            if min(ws) >= 1 and err(ws) < err(best):
                best = ws
    if err(best) > EXACT_TOLERANCE and shape is not None:
        best = _step_layers(best, q, err, *shape)
    if err(best) > EXACT_TOLERANCE and strict:
        raise bad(
            "quantum",
            q,
            f"a smaller rounding multiple: parameters are {100 * err(best):.2f}% off the uniform model (limit 0.5%)",
        )
    return best


def _keeps_shape(ws: Sequence[int], family: str, k: int, sym: bool) -> bool:
    def rising(seq):
        return all(a <= b for a, b in zip(seq, seq[1:]))

    if sym and ws[0] != ws[-1]:
        return False
    if family == "increasing":
        return rising(ws)
    if family == "decreasing":
        return rising(ws[::-1])
    if family == "x":  # narrowing to layer k, widening after it
        return rising(ws[:k][::-1]) and rising(ws[k - 1 :])
    return rising(ws[:k]) and rising(ws[k - 1 :][::-1])  # diamond


def _step_layers(widths, q, err, family, k, sym):
    """Greedy ±q steps of one layer (or of the tied ends) while the error drops."""
    L = len(widths)
    units = ([(0, L - 1)] + [(i,) for i in range(1, L - 1)]) if sym else [(i,) for i in range(L)]
    frozen = _narrowest_index(family, L, k, widths)
    units = [u for u in units if frozen not in u]  # the bottleneck stays at ρ·h
    best, e = list(widths), err(widths)
    for _ in range(4 * L):
        if e <= EXACT_TOLERANCE:
            break
        step = None
        for u in units:
            for s in (q, -q):
                ws = [w + s if i in u else w for i, w in enumerate(best)]
                if min(ws) >= q and _keeps_shape(ws, family, k, sym):
                    ew = err(ws)
                    if ew < e and (step is None or ew < step[0]):
                        step = (ew, ws)
        if step is None:
            break
        e, best = step
    return best


def exact_mismatch(widths, width: int, count: Counter) -> float:
    """Relative parameter difference to the uniform model under ``count``."""
    target = count([float(width)] * len(widths))
    return abs(count([float(w) for w in widths]) - target) / target


def mean_width(widths: Sequence[int]) -> float:
    return sum(widths) / len(widths)
