"""Numbers derived from a fitted law, vectorised over bootstrap replicates, and the parameter count
they express the optimum through.

* Which N a fit means (``--n-convention``: ``check_convention``, ``with_convention``) and the count
  model N(D, W) that turns an optimum N* back into a shape (``CountModel``, ``count_model``): the
  first section below.
* D_crit(W) at the sweep's widths and at three production models, with the
  ratio depth / D_crit.  D_crit is a depth (docs/science.md §4).
* Compute-optimal allocation under C = 6·N·T, where N is the count the law was
  fitted on and N(D, W) that count as a function of the shape (``CountModel`` below:
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
from dataclasses import dataclass

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.defaults import default
from depthwidth.model.accounting import n_12dw2


# -- Which N a fit means, and the count N(D, W) that turns an optimum N* back into a shape ----------------
# A law fitted on a column of parameter counts has its optimum N* in *that*
# count, so the shape it implies must solve the same count: with the total
# (every tensor, the token embedding and an untied LM head included) that is
# e.g. 12·D·W² + 2·V·W = N*, not 12·D·W² = N*.  Solving the wrong one makes W*
# too wide by tens of percent at 1e8 parameters and biases the W and D
# exponents, since the embedding's share falls with scale (docs/science.md §4).
#
# ``--n-convention`` (CONVENTIONS) says which count the law reads as N:
#
# ``total``          the table's ``params`` column (dw: every tensor of the model);
# ``non-embedding``  its ``params_non_embedding`` column (total less embedding and untied head);
# ``12DW2``          N = 12·D·W², from depth and width (the Depth-Delusion ansatz's own N).
#
# The default is the count the law is written in (``DEFAULT``): Hoffmann et
# al.'s N for chinchilla is the total; the Depth-Delusion ansatz writes
# N ≈ 12·D·W².  The same count is the N of the compute constraint C = 6·N·T.
#
# ``CountModel`` is N(D, W) for uniform models: exactly 12·D·W² for ``12DW2``;
# otherwise a non-negative least-squares fit, to the table's own runs, of the
# posynomial c₁·D·W² + c₂·W + c₃·D·W + c₄·D + c₅ (every count dw's accounting
# makes of a uniform model has this form: blocks, embedding and head, biases
# and norms, per-layer gates; docs/science.md §5).  Terms enter in that order
# and only while the runs can tell them apart (a sweep at one width cannot
# separate D·W² from D·W), so the model never extrapolates through a split
# the data did not make.  Its largest relative error on the runs is recorded;
# dw's own runs are reproduced to rounding.

CONVENTIONS = ("total", "non-embedding", "12DW2")
DEFAULT = {"chinchilla": "total", "depth-delusion": "12DW2", "width-depth": "total"}
COLUMN = {"total": "params", "non-embedding": "params_non_embedding"}
N_NAMES = {"total": "N (total params)", "non-embedding": "N (non-embedding)", "12DW2": "N = 12·D·W²"}  # as tables say
# (label, power of D, power of W), in the order they may enter the count model
TERMS = (("D·W²", 1, 2), ("W", 0, 1), ("D·W", 1, 1), ("D", 1, 0), ("1", 0, 0))
TOLERANCE = 0.01  # a count model missing the runs' counts by more than 1% is reported


def default_convention(law_name: str) -> str:
    return DEFAULT.get(law_name, "total")


def check_convention(convention: str | None, law_name: str) -> str:
    c = default_convention(law_name) if convention is None else convention
    if c not in CONVENTIONS:
        raise bad("--n-convention", c, " | ".join(CONVENTIONS))
    return c


def n_column(rows, convention: str) -> np.ndarray:
    """N in ``convention`` from a table or a dict of columns (``params``, ``params_non_embedding``, or
    ``depth`` and ``width``): what a law fitted in that convention reads as ``params``."""
    if convention == "12DW2":
        return n_12dw2(np.asarray(rows["depth"], dtype=float), np.asarray(rows["width"], dtype=float))
    return np.asarray(rows[COLUMN[convention]], dtype=float)


def with_convention(df, convention: str):
    """The table with ``params`` = the convention's N (the total stays in ``params_total``), and a note."""
    import pandas as pd

    cols = set(map(str, df.columns))
    df = df.copy()
    if "params" in cols:
        df["params_total"] = df["params"]
    if convention == "12DW2":
        if not {"depth", "width"} <= cols:
            raise bad(
                "--n-convention",
                convention,
                "a table with depth and width columns (N = 12·D·W²), or total | non-embedding",
            )
        df["params"] = n_column({c: pd.to_numeric(df[c], errors="coerce") for c in ("depth", "width")}, convention)
        return df, "N = 12·D·W² (--n-convention 12DW2)"
    col = COLUMN[convention]
    if col not in cols or pd.to_numeric(df[col], errors="coerce").isna().all():
        raise BadInput(
            f"bad value for --n-convention: {convention!r} (allowed: a table with a {col} column — "
            f"map one with --columns {col}=COLUMN — or one of {', '.join(c for c in CONVENTIONS if c != convention)})"
        )
    df["params"] = df[col]
    return df, f"N = {col} (--n-convention {convention})"


def unused_count(df, convention: str) -> str | None:
    """One warning line when the table carries a measured parameter count that the convention's N is
    not (N = 12·D·W² beside a ``params`` column that differs from it by more than 5%), naming both and
    the flag that switches; else None."""
    import pandas as pd

    if convention != "12DW2" or "params_total" not in df:
        return None
    total = pd.to_numeric(df["params_total"], errors="coerce").to_numpy(dtype=float)
    n = np.asarray(df["params"], dtype=float)
    ok = np.isfinite(total) & np.isfinite(n) & (n > 0)
    if not ok.any():
        return None
    off = np.abs(total[ok] / n[ok] - 1.0)
    if off.max() <= 0.05:
        return None
    return (
        f"N is 12·D·W² from depth and width (the law's own convention), not the table's params column "
        f"(up to {100 * off.max():.0f}% larger: {total[ok].min():.3g}–{total[ok].max():.3g}); "
        "--n-convention total fits on the table's count"
    )


@dataclass(frozen=True)
class CountModel:
    """N(D, W) = Σ c_k·D^i·W^j for uniform models (TERMS), with how well it fits the table's runs."""

    convention: str
    terms: tuple  # ((label, i, j, coefficient), ...)
    max_rel_error: float | None = None
    runs: int = 0

    def n(self, D, W):
        """N at depth(s) D and width(s) W (broadcast)."""
        D, W = np.asarray(D, dtype=float), np.asarray(W, dtype=float)
        return sum(c * D**i * W**j for _, i, j, c in self.terms)

    def log_n_and_grad(self, v, u):
        """ln N, d ln N/d(u, v) and the Hessian, at u = ln W, v = ln D (arrays of one shape)."""
        parts = [(i, j, c * np.exp(i * v + j * u)) for _, i, j, c in self.terms]
        N = sum(p for _, _, p in parts)
        gu = sum(j * p for _, j, p in parts) / N
        gv = sum(i * p for i, _, p in parts) / N
        huu = sum(j * j * p for _, j, p in parts) / N - gu * gu
        hvv = sum(i * i * p for i, _, p in parts) / N - gv * gv
        huv = sum(i * j * p for i, j, p in parts) / N - gu * gv
        return np.log(N), gu, gv, huu, hvv, huv

    @property
    def formula(self) -> str:
        return "N = " + " + ".join(f"{_num(c)}·{lab}" if lab != "1" else _num(c) for lab, _, _, c in self.terms)

    def to_dict(self) -> dict:
        return {
            "convention": self.convention,
            "formula": self.formula,
            "terms": {lab: c for lab, _, _, c in self.terms},
            "max_rel_error": self.max_rel_error,
            "runs": self.runs,
        }


def count_of(d: dict | None) -> CountModel | None:
    """The CountModel a fit.json recorded (``to_dict``), or None."""
    if not d or not d.get("terms"):
        return None
    powers = {lab: (i, j) for lab, i, j in TERMS}
    terms = tuple((lab, *powers[lab], float(c)) for lab, c in d["terms"].items())
    return CountModel(d.get("convention", "total"), terms, d.get("max_rel_error"), int(d.get("runs") or 0))


def _num(c: float) -> str:
    return f"{c:.6g}" if abs(c) < 1e5 else f"{c:.4e}"


TWELVE = CountModel("12DW2", (("D·W²", 1, 2, 12.0),), 0.0)


def count_model(table, convention: str) -> CountModel | None:
    """N(D, W) for ``convention`` from the runs of ``table`` (its ``params`` already in that convention)."""
    if convention == "12DW2":
        return TWELVE
    cols = set(map(str, getattr(table, "columns", ())))
    if not {"depth", "width", "params"} <= cols:
        return None
    runs = np.asarray(table["run"]).astype(str) if "run" in cols else np.arange(len(table)).astype(str)
    _, first = np.unique(runs, return_index=True)
    D = np.asarray(table["depth"], dtype=float)[first]
    W = np.asarray(table["width"], dtype=float)[first]
    N = np.asarray(table["params"], dtype=float)[first]
    ok = np.isfinite(D) & np.isfinite(W) & np.isfinite(N) & (N > 0) & (D > 0) & (W > 0)
    D, W, N = D[ok], W[ok], N[ok]
    if not len(N):
        return None
    cols_all = [D**i * W**j / N for _, i, j in TERMS]  # rows weighted by 1/N: relative errors
    chosen: list[int] = []
    for k in range(len(TERMS)):
        trial = chosen + [k]
        X = np.stack([cols_all[t] / np.abs(cols_all[t]).max() for t in trial], axis=1)
        s = np.linalg.svd(X, compute_uv=False)
        if len(s) == len(trial) and s[-1] > 1e-8 * s[0] and len(N) > len(trial):
            chosen = trial
    from scipy.optimize import nnls

    scale = np.array([np.abs(cols_all[t]).max() for t in chosen])
    X = np.stack([cols_all[t] / scale[m] for m, t in enumerate(chosen)], axis=1)
    coef, _ = nnls(X, np.ones(len(N)))
    coef = coef / scale
    # a term whose share of every run's N is below 1e-9 is the solver's rounding, not a count (nnls had
    # left 1.4418e-11·D beside 16·D·W²): dropped, so the formula names only what counts
    share = {t: c * np.abs(cols_all[t]).max() for t, c in zip(chosen, coef)}
    terms = tuple((TERMS[t][0], TERMS[t][1], TERMS[t][2], float(c)) for t, c in zip(chosen, coef) if share[t] > 1e-9)
    if not terms:
        return None
    model = CountModel(convention, terms)
    err = float(np.max(np.abs(model.n(D, W) - N) / N))
    return CountModel(convention, terms, err, int(len(N)))


def warnings_for(model: CountModel | None, law) -> list[str]:
    if model is None or not model.max_rel_error or model.max_rel_error <= TOLERANCE:
        return []
    return [
        f"the parameter count {model.formula} misses the runs' N by up to {100 * model.max_rel_error:.1f}% "
        f"(non-uniform shapes?): the compute-optimal D*, W* of {law.name} are approximate"
    ]


# -- Numbers derived from a fitted law ---------------------------------------------------------------------


REFERENCE_MODELS = {  # name: (width, depth)
    "GPT-3": (12288, 96),
    "PaLM-540B": (18432, 118),
    "Llama-3-70B": (8192, 80),
}
C_REF = default("c_ref")  # FLOPs at which local slopes and D*, W* are reported
EXPONENT = {"N": "x", "T": "y", "D": "a", "W": "b"}  # each compute-optimal exponent's letter: N* ∝ C^x, ...


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

    ``count``: N(D, W) in the convention the law was fitted in (``CountModel``; default 12·D·W²).
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
