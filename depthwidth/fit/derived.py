"""Numbers derived from a fitted law, vectorised over bootstrap replicates.

* D_crit(W) at the sweep's widths and at three production models, with the
  ratio depth / D_crit.  D_crit is a depth (docs/science.md §4).
* Compute-optimal allocation under C = 6·N·T, where N is the count the law was
  fitted on and N(D, W) that count as a function of the shape (fit/count.py:
  12·D·W² by default, or e.g. 12·D·W² + 2·V·W + ... fitted to the runs for
  ``--n-convention total``), so an optimum N* turns into the shape that
  really has N* parameters of that kind:
  - chinchilla: N* ∝ C^(beta/(alpha+beta)), T* ∝ C^(alpha/(alpha+beta));
  - depth-delusion: the penalty is >= 0 and zero up to D_crit, so at any
    compute the optimum is N*(C) = (alpha·A/(delta·B))^(1/(alpha+delta))·(C/6)^(delta/(alpha+delta))
    reached with the deepest penalty-free shape, D* = D_crit(W*), N(D*, W*) = N*
    (solved by bisection in ln W).  Shallower shapes with the same N tie;
    "deepest" is the tie-break.  With N = 12·D·W² and D_crit = c·W^p the
    exponents are b = x/(2+p), a = p·b, x = delta/(alpha+delta);
  - width-depth: minimise E + A_w/W^a_w + A_d/D^a_d + B·(6·N(D, W)/C)^beta
    over (ln W, ln D) (convex: Newton's method from the closed form of
    N = 12·D·W², where b = beta/(a_w + 2·beta + beta·a_w/a_d) and
    a = beta/(a_d + beta + 2·beta·a_d/a_w) exactly).
  Exponents are local slopes d ln x*/d ln C at ``c_ref`` (central
  differences, exact for pure power laws): the embedding's share of N and
  D_crit = kappa·ln W make them drift with C.  They are NaN where the fitted
  law has no interior optimum (an exponent <= 0).
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.fit.defaults import default
from depthwidth.fit.count import TWELVE, CountModel

REFERENCE_MODELS = {  # name: (width, depth)
    "GPT-3": (12288, 96),
    "PaLM-540B": (18432, 118),
    "Llama-3-70B": (8192, 80),
}
C_REF = default("c_ref")  # FLOPs at which local slopes and D*, W* are reported


def _arr(v):
    return np.atleast_1d(np.asarray(v, dtype=float))


def dcrit_numbers(law, values: dict, widths) -> dict[str, np.ndarray]:
    """Flat {key: (B,) array}: dcrit[W=..], dcrit[MODEL], depth_over_dcrit[MODEL]."""
    out: dict[str, np.ndarray] = {}
    if "dcrit" not in law.options:
        return out
    vals = {k: _arr(v) for k, v in values.items()}
    ws = sorted({int(w) for w in widths})
    if ws:
        dc = law.dcrit(vals, ws)  # (B, len(ws))
        for j, w in enumerate(ws):
            out[f"dcrit[W={w}]"] = dc[:, j]
    for name, (w, d) in REFERENCE_MODELS.items():
        dc = law.dcrit(vals, [w])[:, 0]
        out[f"dcrit[{name}]"] = dc
        with np.errstate(divide="ignore", invalid="ignore"):
            out[f"depth_over_dcrit[{name}]"] = d / dc
    return out


def compute_optimal(law, values: dict, c_ref: float = C_REF, count: CountModel | None = None) -> dict[str, np.ndarray]:
    """Flat {key: (B,) array} of compute-optimal exponents and shapes at ``c_ref``.

    ``count``: N(D, W) in the convention the law was fitted in (fit/count.py; default 12·D·W²).
    Exponents are local slopes d ln x*/d ln C at ``c_ref`` (exact for pure power laws).
    """
    count = TWELVE if count is None else count
    v = {k: _arr(x) for k, x in values.items()}
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if law.name == "chinchilla":
            al, be = v["alpha"], v["beta"]
            good = (al > 0) & (be > 0)
            out["N_exponent"] = np.where(good, be / (al + be), np.nan)
            out["T_exponent"] = np.where(good, al / (al + be), np.nan)
        elif law.name == "depth-delusion":
            al, de, A, B = v["alpha"], v["delta"], v["A"], v["B"]
            good = (al > 0) & (de > 0)
            x = np.where(good, de / (al + de), np.nan)
            out["N_exponent"] = x
            out["T_exponent"] = 1.0 - x

            def shape(c):
                lnN = np.log(al * A / (de * B)) / (al + de) + x * math.log(c / 6.0)
                lnW = _deepest_free_width(law, v, count, lnN)
                return lnN, lnW, np.log(_dcrit_rows(law, v, np.exp(lnW)))

            lnN, lnW, lnD = _with_slopes(shape, c_ref, out, ("N", "W", "D"), skip=("N",))
            out["N_opt"] = np.where(good, np.exp(lnN), np.nan)
            out["W_opt"] = np.where(good, np.exp(lnW), np.nan)
            out["D_opt"] = np.where(good, np.exp(lnD), np.nan)
        elif law.name == "width-depth":
            aw, ad, be = v["a_w"], v["a_d"], v["beta"]
            good = (aw > 0) & (ad > 0) & (be > 0)

            def shape(c):
                lnW, lnD = _width_depth_optimum(v, count, c)
                return np.log(count.n(np.exp(lnD), np.exp(lnW))), lnW, lnD

            lnN, lnW, lnD = _with_slopes(shape, c_ref, out, ("N", "W", "D"))
            out["T_exponent"] = 1.0 - out["N_exponent"]
            for k in ("N_exponent", "T_exponent", "W_exponent", "D_exponent"):
                out[k] = np.where(good, out[k], np.nan)
            out["W_opt"] = np.where(good, np.exp(lnW), np.nan)
            out["D_opt"] = np.where(good, np.exp(lnD), np.nan)
            out["N_opt"] = np.where(good, np.exp(lnN), np.nan)
    return out


SLOPE_H = 1e-3  # ln C step of the central differences that give local exponents


def _with_slopes(shape, c_ref, out, names, skip=()):
    """Evaluate ``shape(C) -> (ln x for x in names)`` at c_ref and c_ref·e^(±h); slopes into ``out``."""
    mid = shape(c_ref)
    lo, hi = shape(c_ref * math.exp(-SLOPE_H)), shape(c_ref * math.exp(SLOPE_H))
    for k, name in enumerate(names):
        if name not in skip:
            out[f"{name}_exponent"] = (hi[k] - lo[k]) / (2 * SLOPE_H)
    return mid


def _deepest_free_width(law, v, count: CountModel, lnN: np.ndarray) -> np.ndarray:
    """ln W solving N(D_crit(W), W) = N*: the deepest penalty-free shape with N* parameters.

    Bisection in ln W over [0, 40] (vectorised over replicates); N(D_crit(W), W) grows with W for
    every admissible D_crit form, so the root is unique; NaN where N* lies outside the bracket.
    """
    lnN = np.asarray(lnN, dtype=float)
    lo = np.zeros_like(lnN)
    hi = np.full_like(lnN, 40.0)

    def f(u):
        W = np.exp(u)
        D = _dcrit_rows(law, v, W)
        return np.log(np.maximum(count.n(D, W), 1e-300)) - lnN

    flo, fhi = f(lo), f(hi)
    ok = np.isfinite(lnN) & (flo <= 0) & (fhi >= 0)
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        fm = f(mid)
        up = fm < 0
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    return np.where(ok, 0.5 * (lo + hi), np.nan)


def _dcrit_rows(law, v, W: np.ndarray) -> np.ndarray:
    """D_crit at one width per replicate (W shaped like the replicates' parameters)."""
    form = law.options["dcrit"]
    if form == "log":
        return v["kappa"] * np.log(W)
    return v["c"] * W ** v["p"]


def _width_depth_optimum(v, count: CountModel, c: float):
    """(ln W*, ln D*) minimising E + A_w/W^a_w + A_d/D^a_d + B·(6·N(D, W)/C)^beta, per replicate.

    Convex in (ln W, ln D) (a posynomial N makes ln N convex), so Newton's method with a
    backtracking line search from the closed form of N = c₁·D·W² converges.
    """
    aw, ad, be, Aw, Ad, B = v["a_w"], v["a_d"], v["beta"], v["A_w"], v["A_d"], v["B"]
    c1 = next((k for lab, _, _, k in count.terms if lab == "D·W²"), 12.0)
    kk = be * math.log(c / (6.0 * c1))
    r1 = np.log(aw * Aw / (2 * be * B)) + kk
    r2 = np.log(ad * Ad / (be * B)) + kk
    det = (aw + 2 * be) * (ad + be) - 2 * be * be
    u = (r1 * (ad + be) - be * r2) / det
    w = ((aw + 2 * be) * r2 - 2 * be * r1) / det
    lnB = np.log(B) - be * math.log(c / 6.0)

    def f(u, w):
        return Aw * np.exp(-aw * u) + Ad * np.exp(-ad * w) + np.exp(lnB + be * np.log(count.n(np.exp(w), np.exp(u))))

    for _ in range(60):
        g, gu, gw, huu, hww, huw = count.log_n_and_grad(w, u)
        t = np.exp(lnB + be * g)
        Gu = -aw * Aw * np.exp(-aw * u) + be * t * gu
        Gw = -ad * Ad * np.exp(-ad * w) + be * t * gw
        Huu = aw * aw * Aw * np.exp(-aw * u) + be * t * (huu + be * gu * gu)
        Hww = ad * ad * Ad * np.exp(-ad * w) + be * t * (hww + be * gw * gw)
        Huw = be * t * (huw + be * gu * gw)
        dt = Huu * Hww - Huw * Huw
        with np.errstate(divide="ignore", invalid="ignore"):
            du = -(Hww * Gu - Huw * Gw) / dt
            dw = -(Huu * Gw - Huw * Gu) / dt
        du = np.where(np.isfinite(du), du, 0.0)
        dw = np.where(np.isfinite(dw), dw, 0.0)
        f0, step = f(u, w), np.ones_like(u)
        for _ in range(30):  # backtrack until the step does not raise the objective
            worse = ~(f(u + step * du, w + step * dw) <= f0)
            if not worse.any():
                break
            step = np.where(worse, step / 2, step)
        u, w = u + step * du, w + step * dw
        if np.nanmax(np.abs(step * du) + np.abs(step * dw), initial=0.0) < 1e-13:
            break
    return u, w


def derived_numbers(
    law, values: dict, widths, c_ref: float = C_REF, count: CountModel | None = None
) -> dict[str, np.ndarray]:
    out = dcrit_numbers(law, values, widths)
    out.update({f"compute_optimal.{k}": x for k, x in compute_optimal(law, values, c_ref, count).items()})
    return out


def nest(
    flat_point: dict[str, float],
    flat_ci: dict[str, list | None],
    law,
    widths,
    c_ref: float = C_REF,
    count: CountModel | None = None,
) -> dict:
    """Arrange flat derived numbers into the JSON layout of ``derived``."""
    out: dict = {}
    if "dcrit" in law.options:
        form = law.options["dcrit"]
        out["dcrit"] = {
            "form": form,
            "formula": "kappa*ln W" if form == "log" else "c*W^p",
            "widths": {
                str(int(w)): {"value": flat_point.get(f"dcrit[W={int(w)}]"), "ci": flat_ci.get(f"dcrit[W={int(w)}]")}
                for w in sorted({int(w) for w in widths})
            },
            "reference": {
                name: {
                    "width": w,
                    "depth": d,
                    "dcrit": flat_point.get(f"dcrit[{name}]"),
                    "dcrit_ci": flat_ci.get(f"dcrit[{name}]"),
                    "depth_over_dcrit": flat_point.get(f"depth_over_dcrit[{name}]"),
                    "depth_over_dcrit_ci": flat_ci.get(f"depth_over_dcrit[{name}]"),
                }
                for name, (w, d) in REFERENCE_MODELS.items()
            },
        }
    co = {k.split(".", 1)[1]: v for k, v in flat_point.items() if k.startswith("compute_optimal.")}
    if co:
        out["compute_optimal"] = {
            "constraint": f"C = 6*N*T, {(count or TWELVE).formula}",
            "n_convention": (count or TWELVE).convention,
            "c_ref": c_ref,
            **co,
            "ci": {k.split(".", 1)[1]: v for k, v in flat_ci.items() if k.startswith("compute_optimal.")},
        }
        if law.name == "depth-delusion":
            out["compute_optimal"]["tie_break"] = "deepest penalty-free shape: D* = D_crit(W*)"
    return out
