"""Which N a fit means, and the count N(D, W) that turns an optimum N* back into a shape.

A law fitted on a column of parameter counts has its optimum N* in *that*
count, so the shape it implies must solve the same count: with the total
(every tensor, the token embedding and an untied LM head included) that is
e.g. 12·D·W² + 2·V·W = N*, not 12·D·W² = N*.  Solving the wrong one makes W*
too wide by tens of percent at 1e8 parameters and biases the W and D
exponents, since the embedding's share falls with scale (docs/science.md §4).

``--n-convention`` (CONVENTIONS) says which count the law reads as N:

``total``          the table's ``params`` column (dw: every tensor of the model);
``non-embedding``  its ``params_non_embedding`` column (total less embedding and untied head);
``12DW2``          N = 12·D·W², from depth and width (the Depth-Delusion ansatz's own N).

The default is the count the law is written in (``DEFAULT``): Hoffmann et
al.'s N for chinchilla is the total; the Depth-Delusion ansatz writes
N ≈ 12·D·W².  The same count is the N of the compute constraint C = 6·N·T.

``CountModel`` is N(D, W) for uniform models: exactly 12·D·W² for ``12DW2``;
otherwise a non-negative least-squares fit, to the table's own runs, of the
posynomial c₁·D·W² + c₂·W + c₃·D·W + c₄·D + c₅ (every count dw's accounting
makes of a uniform model has this form: blocks, embedding and head, biases
and norms, per-layer gates; docs/science.md §5).  Terms enter in that order
and only while the runs can tell them apart (a sweep at one width cannot
separate D·W² from D·W), so the model never extrapolates through a split
the data did not make.  Its largest relative error on the runs is recorded;
dw's own runs are reproduced to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.model.accounting import n_12dw2

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
    terms = tuple((TERMS[t][0], TERMS[t][1], TERMS[t][2], float(c)) for t, c in zip(chosen, coef) if c > 0)
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
