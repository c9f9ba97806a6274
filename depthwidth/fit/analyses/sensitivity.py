"""``--sensitivity``: the fit redone under each fitting choice (Huber delta, start grid, N without
embeddings, outliers dropped, one budget per run); a number that moves more than its interval is
wide is flagged (the refits: the last section).

How much does each fitted number move under reasonable fitting choices?  ``dw fit --sensitivity``.

The grid of choices (Gemstones, McLeish et al., report their fit's sensitivity
to the same ones; Epoch's Chinchilla refit drops the 5 highest-loss points):

* Huber δ ∈ {1e-4, 1e-3, 1e-2} on log loss;
* the full start grid vs a halved one (every other start of a fixed-seed subset);
* the other parameter count: a fit on the total refitted without embeddings
  (``params_non_embedding``), one without them refitted on the total (no
  stand-in when the table lacks the column: 12·D·W² is not a SwiGLU count);
* all points vs the ``DROP_HIGHEST`` highest-loss points dropped;
* every token budget of a run vs only its first, or only its last.

Every choice refits the law from its full multi-start search (not from the
baseline optimum, which would hide a second basin).  For every parameter and
derived number: its value under each choice and the spread (max - min).  A
number, derived or fitted, is *flagged* when its spread exceeds the width of
its bootstrap interval: the fitting choices then move it more than the
data's noise does, and its interval understates the uncertainty.  That
interval is the narrower of the baseline's and that of the fit without the
highest-loss points (bootstrapped the same way): a few extreme points widen
the baseline's own run bootstrap by their own pull (the replicates that hold
them follow them, the others do not), which would otherwise hide exactly the
points that the drop choice exposes.  Each number also
names the choice that moves it farthest from the baseline.  The budget
choices fit a fraction of the points: where a run's checkpoints carry
independent noise (not a shared run offset) their own sampling noise can
exceed the full fit's interval, so read a flag with its ``farthest`` choice.  A choice that does
not apply to the table (no embeddings to drop, one budget per run) is listed
as skipped with the reason.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.tables import NOT_IDENTIFIED, Col, Table
from depthwidth.fit.analyses import said
from depthwidth.fit.boot import bootstrap, param_samples, percentile_ci
from depthwidth.fit.derived import count_model
from depthwidth.fit.derived import C_REF, derived_numbers
from depthwidth.fit.engine import fit_law

SECTION = "sensitivity"
OPTIONS = ("sensitivity",)


def section(ctx) -> dict:
    from depthwidth.fit.files import jsonable

    o, iv = ctx.opts, ctx.iv
    return jsonable(
        sensitivity(
            ctx.clean,
            ctx.chk.law,
            pins=ctx.chk.pins,
            widths=ctx.widths,
            ci={**iv.ci, **iv.dci} if o.bootstrap else {},
            base=ctx.fr,
            boot=(o.bootstrap, o.level),
            convention=ctx.n_conv,
            count=ctx.count,
            c_ref=o.c_ref,
            resample=o.resample,
            **ctx.common,
        )
    )


def verdicts(fit: dict) -> dict:
    """The lines under the sensitivity table, and ``not_identified``: per number, the fitting choices
    whose value of it is outside the meaningful range (D_crit or D* below one layer, W* below the
    width quantum: shown "not identified")."""
    from depthwidth.fit.verdicts import below_floor

    s = fit["sensitivity"]
    q = (fit.get("identification") or {}).get("quantum")
    fitted = [r["key"] for r in s["choices"] if "values" in r]
    below = {
        k: [c for c in fitted if below_floor(k, v["values"].get(c), q)] for k, v in (s.get("numbers") or {}).items()
    }
    return {
        "lines": [summary_line(s), f"CI width: {WIDTH_NOTE}"],
        "not_identified": {k: cs for k, cs in below.items() if cs},
    }


def tables(fit) -> dict:
    """Each number under each fitting choice; a value outside the meaningful range reads "not identified"."""
    s = fit.sections["sensitivity"]
    says = said(fit, "sensitivity")
    below = says.get("not_identified") or {}
    fitted = [r for r in s["choices"] if "values" in r]
    rows = []
    for k, v in s["numbers"].items():
        vals = {r["key"]: v["values"].get(r["key"]) for r in fitted}
        rows.append(
            {
                "number": k,
                **{c: NOT_IDENTIFIED if c in below.get(k, ()) else x for c, x in vals.items()},
                "spread": v["spread"],
                "ci_width": v.get("compared_width", v["ci_width"]),
                "flagged": v["flagged"],
                "farthest": v.get("farthest"),
            }
        )
    cols = (
        [Col("number", "number")]
        + [Col(r["key"], r["short"], "{:.4g}") for r in fitted]
        + [
            Col("spread", "spread", "{:.4g}"),
            Col("ci_width", "CI width", "{:.4g}"),
            Col("flagged", "spread > CI"),
            Col("farthest", "moved most by"),
        ]
    )
    t = Table("fit_sensitivity", "Sensitivity: each number under each fitting choice", cols, rows)
    t.notes += says.get("lines") or []
    t.notes += [f"{r['short']}: skipped ({r['skipped']})" for r in s["choices"] if "skipped" in r]
    return {"fit_sensitivity": t}


# -- The refits under each fitting choice (the statistics) -----------------------------------------


DELTAS = (1e-4, 1e-3, 1e-2)
DROP_HIGHEST = 5  # Besiroglu et al. (2024) drop the 5 highest-loss points
WIDTH_NOTE = (
    f"the narrower of the baseline's bootstrap interval and that of the fit without the "
    f"{DROP_HIGHEST} highest-loss points (a few extreme points widen the baseline's own)"
)


def _other_count(table, convention: str):
    """(key, label, table with params in the other N convention, that convention) or (key, label, None, why not).

    A fit on the total count is refitted without embeddings (``params_non_embedding``), one on
    a count without them (non-embedding, 12·D·W²) with them (the total).  No stand-in: 12·D·W²
    is not a SwiGLU model's count (16·D·W²), so a table without the column skips the choice.
    """
    cols = set(map(str, table.columns))
    if convention == "total":
        key, label, col, other = "no_embeddings", "params without embeddings", "params_non_embedding", "non-embedding"
    else:
        key, label, col, other = "with_embeddings", "params with embeddings (total)", "params_total", "total"
    if col not in cols or not np.isfinite(np.asarray(table[col], dtype=float)).all():
        return key, label, None, f"no {col} column at every row (map one with --columns)"
    t = table.copy()
    t["params"] = np.asarray(table[col], dtype=float)
    if np.allclose(t["params"], np.asarray(table["params"], dtype=float), rtol=1e-9):
        return key, label, None, f"{col} equals the fitted N at every row"
    return key, f"{label} ({col})", t, other


def _per_run_budget(table, which: str):
    """Only the first (smallest tokens) or last (largest tokens) point of every run."""
    if "tokens" not in table:
        return None, "no tokens column"
    sizes = table.groupby("run")["tokens"].size()
    if (sizes < 2).all():
        return None, "every run has a single token budget"
    idx = table.groupby("run")["tokens"].idxmin() if which == "first" else table.groupby("run")["tokens"].idxmax()
    return table.loc[np.sort(idx.to_numpy())].reset_index(drop=True), None


def _e(x: float) -> str:
    return f"{x:.0e}".replace("e-0", "e-")


def choices(table, law, delta: float, max_starts: int, convention: str = "total") -> list[dict]:
    """The grid of choices: key, label, and the table and fit options each one uses (or why it is skipped)."""
    grid_size = len(law.grid(max_starts=max_starts))
    out = [
        {
            "key": "baseline",
            "label": f"baseline (δ = {delta:g}, {grid_size} starts, all points)",
            "table": table,
            "delta": delta,
            "max_starts": max_starts,
        }
    ]
    for d in DELTAS:
        if not math.isclose(d, delta):
            out.append(
                {
                    "key": f"huber_delta={_e(d)}",
                    "label": f"Huber δ = {_e(d)}",
                    "table": table,
                    "delta": d,
                    "max_starts": max_starts,
                }
            )
    out.append(
        {
            "key": "half_grid",
            "label": f"halved start grid ({max(1, grid_size // 2)} starts)",
            "table": table,
            "delta": delta,
            "max_starts": max(1, grid_size // 2),
        }
    )
    key, label, t, other = _other_count(table, convention)
    c = {"key": key, "label": label, "delta": delta, "max_starts": max_starts}
    if "params" not in law.columns:
        c["skipped"] = f"{law.name} does not read params"
    elif t is None:
        c["skipped"] = other
    else:
        c.update(table=t, convention=other)
    out.append(c)
    c = {
        "key": f"drop_{DROP_HIGHEST}_highest",
        "label": f"{DROP_HIGHEST} highest-loss points dropped",
        "delta": delta,
        "max_starts": max_starts,
    }
    k_free = len(law.params)
    if len(table) - DROP_HIGHEST < k_free:
        c["skipped"] = f"fewer than {DROP_HIGHEST + k_free} points"
    else:
        keep = np.sort(np.argsort(np.asarray(table["loss"], dtype=float), kind="stable")[:-DROP_HIGHEST])
        c["table"] = table.iloc[keep].reset_index(drop=True)
    out.append(c)
    for which in ("first", "last"):
        t, why = _per_run_budget(table, which)
        c = {
            "key": f"{which}_budget",
            "label": f"{which} token budget of each run only",
            "delta": delta,
            "max_starts": max_starts,
        }
        if t is None:
            c["skipped"] = why
        elif len(t) < k_free:
            c["skipped"] = f"{len(t)} runs for {k_free} parameters"
        else:
            c["table"] = t
        out.append(c)
    return out


def _intervals(fr, table, law, B: int, level: float, seed: int, widths, c_ref, count, resample="noise") -> dict:
    """Bootstrap intervals of one fit's parameters and derived numbers (as run_fit computes them)."""
    samples = param_samples(fr, bootstrap(fr, table, B, seed=seed, kind=resample))
    out = {k: percentile_ci(v, level) for k, v in samples.items()}
    if len(next(iter(samples.values()))):
        out.update({k: percentile_ci(v, level) for k, v in derived_numbers(law, samples, widths, c_ref, count).items()})
    return out


def sensitivity(
    table,
    law,
    *,
    delta: float = 1e-3,
    max_starts: int = 4500,
    pins=None,
    seed: int = 0,
    widths=(),
    ci: dict | None = None,
    base=None,
    boot: tuple[int, float] | None = None,
    convention: str = "total",
    count=None,
    c_ref: float = C_REF,
    resample: str = "noise",
) -> dict:
    """Refit under every choice; values, spreads and flags.

    ``ci``: flat {name: [lo, hi] or None} bootstrap intervals of the baseline
    (parameters and derived numbers, as ``run_fit`` computes them).
    ``base``: the baseline FitResult, when already fitted.
    ``boot``: (replicates, level) of those intervals: the drop-highest fit is
    bootstrapped alike, and the narrower interval is the one spreads are compared with.
    ``convention``/``count``: the N the baseline reads and its N(D, W) (fit/derived.py); the
    other-count choice derives its shapes from its own count.
    """
    ci = ci or {}
    rows, values, ci_drop = [], {}, {}
    for c in choices(table, law, delta, max_starts, convention):
        row = {"key": c["key"], "label": c["label"], "short": _short(c["key"])}
        if "skipped" in c:
            row["skipped"] = c["skipped"]
            rows.append(row)
            continue
        fr = (
            base
            if (c["key"] == "baseline" and base is not None)
            else fit_law(c["table"], law, pins=pins, delta=c["delta"], seed=seed, max_starts=c["max_starts"])
        )
        cc = count_model(c["table"], c["convention"]) if "convention" in c else count
        nums = dict(fr.params)
        nums.update({k: float(v[0]) for k, v in derived_numbers(law, fr.params, widths, c_ref, cc).items()})
        row.update(n=fr.n, n_runs=fr.n_runs, on_bound=fr.on_bound, values=nums)
        values[c["key"]] = nums
        if c["key"] == f"drop_{DROP_HIGHEST}_highest" and ci and boot and boot[0] > 0:
            ci_drop = _intervals(fr, c["table"], law, boot[0], boot[1], seed, widths, c_ref, count, resample)
        rows.append(row)
    names = list(next(iter(values.values())))
    derived = set(names) - set(law.names)
    numbers, flagged = {}, []
    for k in names:
        v = {key: vals.get(k) for key, vals in values.items()}
        fin = [x for x in v.values() if x is not None and math.isfinite(x)]
        spread = (max(fin) - min(fin)) if len(fin) >= 2 else None
        c, cd = ci.get(k), ci_drop.get(k)
        width = (c[1] - c[0]) if c else None
        width_drop = (cd[1] - cd[0]) if cd and k not in (pins or {}) else None
        ref = min((w for w in (width, width_drop) if w is not None), default=None)
        flag = bool(spread is not None and ref is not None and spread > ref)
        b = v.get("baseline")
        far = (
            max(
                (key for key, x in v.items() if key != "baseline" and x is not None and math.isfinite(x)),
                key=lambda key: abs(v[key] - b),
                default=None,
            )
            if b is not None and math.isfinite(b)
            else None
        )
        numbers[k] = {
            "values": v,
            "spread": spread,
            "ci": c,
            "ci_width": width,
            "ci_drop": cd,
            "ci_drop_width": width_drop,
            "compared_width": ref,
            "flagged": flag,
            "derived": k in derived,
            "farthest": far,
        }
        if flag:
            flagged.append(k)
    out = {"choices": rows, "numbers": numbers, "flagged": flagged}
    if not ci:
        out["note"] = "no bootstrap intervals (--bootstrap 0): spreads are not compared with them"
    return out


def _short(key: str) -> str:
    """A column header for a terminal table."""
    if key.startswith("huber_delta="):
        return "δ=" + key.split("=", 1)[1]
    return {
        "baseline": "base",
        "half_grid": "½ grid",
        "no_embeddings": "no emb.",
        "with_embeddings": "with emb.",
        f"drop_{DROP_HIGHEST}_highest": f"−top {DROP_HIGHEST}",
        "first_budget": "first T",
        "last_budget": "last T",
    }.get(key, key)


def summary_line(s: dict) -> str:
    fitted = sum(1 for r in s["choices"] if "values" in r)
    if s["flagged"]:
        return (
            f"sensitivity ({fitted} fits): {len(s['flagged'])} number(s) move more across fitting choices "
            f"than their bootstrap interval is wide: {', '.join(s['flagged'])}"
        )
    return f"sensitivity ({fitted} fits): no number moves more than its bootstrap interval is wide"
