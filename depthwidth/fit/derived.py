"""Numbers derived from a fitted law, vectorised over bootstrap replicates.

* D_crit(W) at the sweep's widths and at three production models, with the
  ratio depth / D_crit.
* Compute-optimal exponents under C = 6·N·T with N ≈ 12·D·W² (T = C/(72·D·W²)):
  - chinchilla: N* ∝ C^(beta/(alpha+beta)), T* ∝ C^(alpha/(alpha+beta));
  - depth-delusion: the penalty is >= 0 and zero up to D_crit, so at any
    compute the optimum is N*(C) = (alpha·A/(delta·B))^(1/(alpha+delta))·(C/6)^(delta/(alpha+delta))
    reached with the deepest penalty-free shape, D* = D_crit(W*), 12·D*·W*² = N*.
    (Shallower shapes with the same N tie; "deepest" is the tie-break.)
    For D_crit = c·W^p the exponents are exact: b = x/(2+p), a = p·b with
    x = delta/(alpha+delta); for D_crit = kappa·ln W they drift with C and
    are reported as local slopes at C_REF;
  - width-depth: minimising E + A_w/W^a_w + A_d/D^a_d + B·(72·D·W²/C)^beta
    gives constant exponents b = beta/(a_w + 2·beta + beta·a_w/a_d),
    a = beta/(a_d + beta + 2·beta·a_d/a_w) and closed-form D*, W*.
  Exponents are NaN where the fitted law has no interior optimum (an
  exponent <= 0).
"""

from __future__ import annotations

import math

import numpy as np

REFERENCE_MODELS = {  # name: (width, depth)
    "GPT-3": (12288, 96),
    "PaLM-540B": (18432, 118),
    "Llama-3-70B": (8192, 80),
}
C_REF = 1e21  # FLOPs at which local slopes and D*, W* are reported


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


def compute_optimal(law, values: dict, c_ref: float = C_REF) -> dict[str, np.ndarray]:
    """Flat {key: (B,) array} of compute-optimal exponents and shapes at ``c_ref``."""
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
            lnN = np.log(al * A / (de * B)) / (al + de) + x * math.log(c_ref / 6.0)
            out["N_exponent"] = x
            out["T_exponent"] = 1.0 - x
            if law.options["dcrit"] == "power":
                c, p = v["c"], v["p"]
                ok = good & (p > -2)
                b = np.where(ok, x / (2.0 + p), np.nan)
                out["W_exponent"], out["D_exponent"] = b, p * b
                lnW = (lnN - np.log(12.0 * c)) / (2.0 + p)
                lnD = np.log(c) + p * lnW
            else:
                k = v["kappa"]
                u = _solve_log_form(lnN - np.log(12.0 * k))  # u = ln W*
                b = np.where(good, x / (2.0 + 1.0 / u), np.nan)
                out["W_exponent"], out["D_exponent"] = b, b / u
                lnW = u
                lnD = np.log(k * u)
            out["N_opt"] = np.where(good, np.exp(lnN), np.nan)
            out["W_opt"] = np.where(good, np.exp(lnW), np.nan)
            out["D_opt"] = np.where(good, np.exp(lnD), np.nan)
        elif law.name == "width-depth":
            aw, ad, be = v["a_w"], v["a_d"], v["beta"]
            good = (aw > 0) & (ad > 0) & (be > 0)
            b = np.where(good, be / (aw + 2 * be + be * aw / ad), np.nan)
            a = np.where(good, be / (ad + be + 2 * be * ad / aw), np.nan)
            out["W_exponent"], out["D_exponent"] = b, a
            out["N_exponent"] = a + 2 * b
            out["T_exponent"] = 1.0 - (a + 2 * b)
            # Stationarity, linear in (u, v) = (ln W, ln D):
            # (a_w + 2β)u + βv = ln(a_w A_w/(2β B)) + β ln(C/72)
            # 2βu + (a_d + β)v = ln(a_d A_d/(β B)) + β ln(C/72)
            k = be * math.log(c_ref / 72.0)
            r1 = np.log(aw * v["A_w"] / (2 * be * v["B"])) + k
            r2 = np.log(ad * v["A_d"] / (be * v["B"])) + k
            det = (aw + 2 * be) * (ad + be) - 2 * be * be
            u = (r1 * (ad + be) - be * r2) / det
            w = ((aw + 2 * be) * r2 - 2 * be * r1) / det
            out["W_opt"] = np.where(good, np.exp(u), np.nan)
            out["D_opt"] = np.where(good, np.exp(w), np.nan)
            out["N_opt"] = 12.0 * out["D_opt"] * out["W_opt"] ** 2
    return out


def _solve_log_form(rhs: np.ndarray) -> np.ndarray:
    """Solve ln(u) + 2u = rhs for u > 0 (u = ln W), vectorised Newton."""
    rhs = np.asarray(rhs, dtype=float)
    u = np.maximum(rhs / 2.0, 1e-3)
    for _ in range(60):
        f = np.log(u) + 2.0 * u - rhs
        u = np.maximum(u - f / (1.0 / u + 2.0), 1e-12)
    u = np.where(np.isfinite(rhs), u, np.nan)
    return u


def derived_numbers(law, values: dict, widths, c_ref: float = C_REF) -> dict[str, np.ndarray]:
    out = dcrit_numbers(law, values, widths)
    out.update({f"compute_optimal.{k}": x for k, x in compute_optimal(law, values, c_ref).items()})
    return out


def nest(flat_point: dict[str, float], flat_ci: dict[str, list | None], law, widths, c_ref: float = C_REF) -> dict:
    """Arrange flat derived numbers into the JSON layout of ``derived``."""
    out: dict = {}
    if "dcrit" in law.options:
        form = law.options["dcrit"]
        out["dcrit"] = {
            "form": form,
            "formula": "kappa*ln W" if form == "log" else "c*W^p",
            "widths": {str(int(w)): {"value": flat_point.get(f"dcrit[W={int(w)}]"), "ci": flat_ci.get(f"dcrit[W={int(w)}]")}
                       for w in sorted({int(w) for w in widths})},
            "reference": {
                name: {"width": w, "depth": d,
                       "dcrit": flat_point.get(f"dcrit[{name}]"), "dcrit_ci": flat_ci.get(f"dcrit[{name}]"),
                       "depth_over_dcrit": flat_point.get(f"depth_over_dcrit[{name}]"),
                       "depth_over_dcrit_ci": flat_ci.get(f"depth_over_dcrit[{name}]")}
                for name, (w, d) in REFERENCE_MODELS.items()
            },
        }
    co = {k.split(".", 1)[1]: v for k, v in flat_point.items() if k.startswith("compute_optimal.")}
    if co:
        out["compute_optimal"] = {
            "constraint": "C = 6*N*T, N = 12*D*W^2",
            "c_ref": c_ref,
            **co,
            "ci": {k.split(".", 1)[1]: v for k, v in flat_ci.items() if k.startswith("compute_optimal.")},
        }
        if law.name == "depth-delusion":
            out["compute_optimal"]["tie_break"] = "deepest penalty-free shape: D* = D_crit(W*)"
    return out
