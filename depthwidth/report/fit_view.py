"""Every table of one fit (fit.json), as ``dw report`` shows it and ``dw fit`` prints it: the
parameters, the law comparison, what the fit rests on, D_crit beside the papers' numbers and the
compute-optimal allocation.  One rendering of each: ``dw fit`` builds its output here rather than
drawing tables of its own.  The verdicts are the ones ``dw fit`` decided and stored (fit.json's
``verdicts``, fit/result.py): read here, never decided again.

Sections, in the order ``fit_tables`` builds them:

- the parameters (``parameter_table``) and the law comparison;
- what the fit rests on: identification, hold-out, isoFLOP, sensitivity and planted truth
  (``rest_tables``; ``fit_notes``, the fit table's notes), and the successive-halving table
  ``dw report`` shows beside them (``halving_table``);
- the papers' numbers beside the sweep's: D_crit at the sweep's widths (law, gradient profiles, the
  paper's kappa·ln W), D_crit extrapolated to production models (``dcrit_tables``), and published
  losses of the configurations a sweep shares with the papers (``paper_table``; docs/science.md §1);
- derived numbers outside the physically meaningful range read "not identified": the compute-optimal
  allocation gets its own table (``optimal_table``, which ``dw fit`` prints too); D_crit values below
  one layer in the D_crit tables are replaced by "not identified" (``mark_dcrit``: their intervals
  blanked).  Which numbers are identified is decided when the fit is made (fit/verdicts.py's
  ``flags`` and ``optima_caveat``, stored in fit.json's ``verdicts``); this module only shows it.
"""

from __future__ import annotations

import math

from depthwidth.core.tables import NOT_IDENTIFIED, Col, Table, ci_pair
from depthwidth.fit import analyses
from depthwidth.fit.derived import EXPONENT
from depthwidth.fit.papers import DD_DCRIT, DD_FIT, DD_KAPPA, DD_TAU_EXPONENT, DD_TAU_R2
from depthwidth.fit.result import FitDocument
from depthwidth.report.document import DONE, is_uniform, paper_loss

EXCLUDED_SHOWN = 20  # excluded runs named in the fit table's notes; the rest counted


def fit_tables(fit: FitDocument | None, widths=(), probes=(), kept: bool = True) -> dict[str, Table]:
    """{key: Table} of ``fit`` (None: the D_crit tables from ``probes`` alone; a document without a
    fitted law: its sections' tables); ``widths`` and ``probes`` (a sweep's) add rows to the D_crit tables;
    ``kept``: whether a fit.json holds the fit (not for ``dw fit --no-write``)."""
    T = {}
    if fit is not None and fit.law:
        T["fit"] = parameter_table(fit, kept)
        T.update(analyses.tables(fit, ("compare",)))
    T.update(rest_tables(fit))
    T.update(dcrit_tables(fit, widths, probes))
    T.update(optimal_tables(T, fit))  # "not identified" for optima and D_crit outside the meaningful range
    return T


def parameter_table(fit: FitDocument, kept: bool = True) -> Table:
    """The law's parameters with their intervals, the paper's values for the Depth Delusion law,
    goodness of fit and gradient persistence's exponent."""
    dd = fit.law == "depth-delusion"
    paper = {"alpha": DD_FIT["alpha"], "kappa": DD_KAPPA} if dd else {}
    flags = fit.verdicts.parameters
    rows = []
    for k, v in fit.params.items():
        lo, hi = ci_pair(fit.ci.get(k))
        rows.append(
            {
                "quantity": k,
                "measured": v,
                "ci_lo": lo,
                "ci_hi": hi,
                "paper": paper.get(k),
                "flags": ", ".join(flags.get(k, [])) or None,
            }
        )
    rows.append({"quantity": "R²", "measured": fit.r2, "paper": DD_FIT["r2"] if dd else None})
    rows.append({"quantity": "RMSE (nats)", "measured": fit.rmse, "paper": DD_FIT["rmse"] if dd else None})
    rows.append({"quantity": "points / runs", "measured": f"{fit.n} / {fit.n_runs}"})
    gp = fit.sections.get("gradient_persistence") or {}
    if tl := gp.get("tau_law"):
        lo, hi = ci_pair(tl.get("p_ci"))
        rows.append(
            {
                "quantity": "τ(W) ∝ W^p: p",
                "measured": tl.get("p"),
                "ci_lo": lo,
                "ci_hi": hi,
                "paper": DD_TAU_EXPONENT,
            }
        )
        rows.append({"quantity": "τ(W) fit R²", "measured": tl.get("r2"), "paper": DD_TAU_R2})
    b = fit.bootstrap
    lvl = f"{100 * b.get('level', 0.95):.0f}%"
    cols = [
        Col("quantity", "quantity"),
        Col("measured", "measured", "{:.4g}"),
        Col("ci_lo", f"{lvl} CI lo" + (f" ({b['resample']})" if b.get("resample") else ""), "{:.4g}"),
        Col("ci_hi", f"{lvl} CI hi", "{:.4g}"),
    ]
    if dd:
        cols.append(Col("paper", "paper", "{:.4g}"))
    cols.append(Col("flags", "flags"))
    t = Table("fit", f"Fit: {fit.law} — {fit.formula}", cols, rows)
    t.notes.append(
        f"the fit shown: {fit.verdicts.label} of {', '.join(fit.where) or 'every run'}, "
        f"N = {fit.n_convention.get('name', 'total')}, made "
        f"{fit.provenance.get('time', 'at an unknown time')} "
        + (
            "(its fit.json; a fit of another law or filter replaces it only with dw fit --force)"
            if kept
            else "(not written: no fit.json holds it)"
        )
    )
    if s := fit.starts:
        t.notes.append(
            f"starts: {s['converged']}/{s['total']} converged, {s['in_best_basin']} in the best basin; Huber "
            f"objective {fit.objective:.6g}"
        )
    t.notes += fit_notes(fit)
    if ex := fit.excluded:
        named = "; ".join(f"{e['run']} ({e['points']} pts, {e['reason']})" for e in ex[:EXCLUDED_SHOWN])
        t.notes.append(
            f"excluded: {named}" + (f" and {len(ex) - EXCLUDED_SHOWN} more" if len(ex) > EXCLUDED_SHOWN else "")
        )
    if dd:
        t.notes.append(
            f"paper (Depth Delusion): alpha {DD_FIT['alpha']} [{DD_FIT['alpha_ci'][0]}, {DD_FIT['alpha_ci'][1]}], "
            f"kappa {DD_KAPPA}, R² {DD_FIT['r2']}, RMSE {DD_FIT['rmse']} nats on training loss"
        )
    return t


# --- what the fit rests on: identification, hold-out, isoFLOP, sensitivity and planted truth (the
# verdicts, as dw fit stored them), and successive halving


def fit_notes(fit: FitDocument) -> list[str]:
    """The fit table's notes: what is said before the numbers, withheld and flagged intervals, warnings."""
    under = fit.underdetermined
    out = [f"before the numbers: {w}" for w in under]
    out += [f"interval withheld: {k}: {why}" for k, why in fit.ci_withheld.items()][:8]
    flagged = fit.ci_flagged
    if flagged:
        out.append(f"intervals flagged ({', '.join(list(flagged)[:8])}): {next(iter(flagged.values()))}")
    return out + [f"warning: {w}" for w in fit.warnings if w not in under][:12]


PLACED = ("compare", "planted")  # shown beside the parameters (fit_tables) and before the identification


def rest_tables(fit: FitDocument | None) -> dict:
    """{key: Table} for the sections of ``fit`` that are present."""
    if fit is None:
        return {}
    out = {}
    out.update(analyses.tables(fit, ("planted",)))
    ident = fit.identification
    if ident:
        rows = [
            {"column": c, "min": v[0] if v else None, "max": v[1] if v else None} for c, v in ident["ranges"].items()
        ]
        t = Table(
            "fit_identification",
            f"What the fit rests on: {ident['runs']} runs, {ident['points']} points",
            [Col("column", "column"), Col("min", "min", "{:.4g}"), Col("max", "max", "{:.4g}")],
            rows,
        )
        t.notes += fit.verdicts.notes  # the verdicts (decided by dw fit: fit/result.py), then what the fit rests on
        out["fit_identification"] = t
    # every other analysis (fit/analyses/: each module's tables), in the fit's registry order
    out.update(analyses.tables(fit, tuple(e.section for e in analyses.REGISTRY if e.section not in PLACED)))
    return out


def halving_table(h: dict) -> Table:
    """Successive halving: per tuning group, where its runs were compared, who goes on and who was
    pruned (the group's own record, runs/NAME/halving/GROUP.json), and the compute saved."""
    rows = []
    for gid, doc in sorted(h["groups"].items()):
        dec = doc.get("decision") or {}
        reps = doc.get("reports") or {}
        toks = sorted({r.get("tokens") for r in reps.values() if r.get("tokens")})
        loss = lambda rids: ", ".join(  # noqa: E731
            f"{reps[r]['val_loss']:.4f}" if reps.get(r, {}).get("val_loss") is not None else "inf" for r in rids
        )
        rows.append(
            {
                "group": gid,
                "members": len(doc.get("members") or []),
                "reported": len(reps),
                "tokens": toks[0] if toks else None,
                "kept": loss(dec.get("keep") or []) if dec else None,
                "pruned": loss(dec.get("prune") or []) if dec else None,
                "state": "decided" if dec else f"waiting for {len(doc.get('members') or []) - len(reps)}",
            }
        )
    cols = [
        Col("group", "group"),
        Col("members", "runs"),
        Col("reported", "at budget"),
        Col("tokens", "compared at (tokens)", "{:,.0f}"),
        Col("kept", "kept (loss there)"),
        Col("pruned", "pruned (loss there)"),
        Col("state", "state"),
    ]
    t = Table("halving", "Successive halving: each tuning group compared at its first budget", cols, rows)
    sm = h["summary"]
    frac = f" ({sm['saved_fraction']:.0%} of the runs' planned compute)" if sm.get("saved_fraction") is not None else ""
    t.notes.append(f"{sm['pruned']} runs pruned; compute saved {sm['flops_saved']:.3g} FLOPs{frac}")
    return t


# --- the papers' numbers beside the sweep's: D_crit at the sweep's widths and extrapolated to
# production models, published losses of the configurations a sweep shares with the papers


def dcrit_tables(fit: FitDocument | None, widths=(), probes=()) -> dict:
    """{"dcrit_widths", "dcrit_models"}: D_crit from the law (and 1/e gradient profiles) at the sweep's
    ``widths`` and the fit's, and extrapolated to production models, beside the paper's.  ``probes``
    (the runs' probes.jsonl records) give the profiles' D_crit when the fit carries none."""
    derived, sections = (fit.derived, fit.sections) if fit is not None else ({}, {})
    dc = derived.get("dcrit") or {}
    gp = (sections.get("gradient_persistence") or {}).get("dcrit_by_width") or {}
    prof = gp or _profile_dcrit(probes)
    widths = sorted(set(widths) | {int(w) for w in (dc.get("widths") or {})} | {int(w) for w in prof})
    rows = []
    for w in widths:
        v = (dc.get("widths") or {}).get(str(w)) or {}
        lo, hi = ci_pair(v.get("ci"))
        p = prof.get(str(w)) or {}
        rows.append(
            {
                "width": w,
                "law": v.get("value"),
                "ci_lo": lo,
                "ci_hi": hi,
                "profiles": p.get("profiles"),
                "censored": f"{p['censored']}/{p['runs']}" if "censored" in p else None,
                "paper": DD_KAPPA * math.log(w) if w > 1 else None,
            }
        )
    cols = [
        Col("width", "width"),
        Col("law", "D_crit measured (law)", "{:.3g}"),
        Col("ci_lo", "CI lo", "{:.3g}"),
        Col("ci_hi", "CI hi", "{:.3g}"),
        Col("profiles", "D_crit measured (1/e, profiles)", "{:.3g}"),
        Col("censored", "censored"),
        Col("paper", f"D_crit paper ({DD_KAPPA:g}·ln W)", "{:.3g}"),
    ]
    t = Table(
        "dcrit_widths",
        f"D_crit at the sweep's widths (law form: {dc.get('formula', 'no D_crit in the fitted law')})",
        cols,
        rows,
    )
    t.notes.append(
        "1/e: D_crit as a depth, like the law's: the depth of a network whose bottom layer's gradient norm "
        "is 1/e of the top layer's (1 + the distance below the top where a run's profile falls to 1/e); "
        "censored = runs whose bottom layer never got there (D_crit > depth)"
    )
    mrows = []
    for m, paper in DD_DCRIT.items():
        v = (dc.get("reference") or {}).get(m) or {}
        from depthwidth.fit.derived import REFERENCE_MODELS

        w, d = REFERENCE_MODELS[m]
        lo, hi = ci_pair(v.get("dcrit_ci"))
        mrows.append(
            {
                "model": m,
                "width": w,
                "depth": d,
                "measured": v.get("dcrit"),
                "ci_lo": lo,
                "ci_hi": hi,
                "depth_over_dcrit": v.get("depth_over_dcrit"),
                "paper": paper,
                "paper_ratio": d / paper,
            }
        )
    mcols = [
        Col("model", "model"),
        Col("width", "width"),
        Col("depth", "depth used"),
        Col("measured", "D_crit measured", "{:.3g}"),
        Col("ci_lo", "CI lo", "{:.3g}"),
        Col("ci_hi", "CI hi", "{:.3g}"),
        Col("depth_over_dcrit", "depth/D_crit measured", "{:.3g}"),
        Col("paper", "D_crit paper", "{:.3g}"),
        Col("paper_ratio", "depth/D_crit paper", "{:.3g}"),
    ]
    mt = Table("dcrit_models", "D_crit extrapolated to production models", mcols, mrows)
    if not dc:
        mt.notes.append("measured column empty: the fit has no D_crit (dw fit NAME --law depth-delusion)")
    mt.notes.append(f"paper: kappa = {DD_KAPPA:g} from widths ≤ 6144; an extrapolation over two orders of magnitude")
    return {"dcrit_widths": t, "dcrit_models": mt}


def _profile_dcrit(probes) -> dict:
    """D_crit by the 1/e rule per width straight from probes (when no fit.json carries it)."""
    from depthwidth.fit.analyses.gradient_persistence import persistence

    if not probes:
        return {}
    return persistence(probes, step=1000, B=0).get("dcrit_by_width") or {}


def paper_table(runs) -> Table:
    rows = []
    for r in runs:
        pl, pp, src = paper_loss(r)
        if pl is None:
            continue
        ref = r.get("ref") or {}
        cfg = f"{r['depth']}L×{r['width']}" + ("" if is_uniform(r) else f" {r['shape']}")
        rows.append(
            {
                "config": cfg,
                "note": ref.get("note") or ref.get("scale"),
                "paper_loss": pl,
                "measured_loss": r["loss"] if r["state"] in DONE else None,
                "delta": (r["loss"] - pl) if r["state"] in DONE and r["loss"] is not None else None,
                "paper_params": pp,
                "measured_params": r["params"],
                "state": r["state"],
                "from": src,
                "run": r["run"],
            }
        )
    cols = [
        Col("config", "config"),
        Col("note", "note"),
        Col("paper_loss", "loss paper", "{:.3f}"),
        Col("measured_loss", "loss measured", "{:.4f}"),
        Col("delta", "measured − paper", "{:+.4f}"),
        Col("paper_params", "params paper", "{:.4g}"),
        Col("measured_params", "params measured", "{:.4g}"),
        Col("state", "state"),
        Col("from", "paper value from"),
    ]
    t = Table("paper", "Published numbers beside ours (configurations that match)", cols, rows)
    t.notes.append(
        "paper losses are the papers' (training loss on SlimPajama / DCLM); ours are held-out on this sweep's data"
    )
    if not rows:
        t.notes.append("no run of this sweep matches a published configuration")
    return t


# --- derived numbers outside the physically meaningful range read "not identified": the
# compute-optimal table, and D_crit below one layer marked in the D_crit tables


LABELS = {f"{k}_exponent": f"{k}* ∝ C^{x}" for k, x in EXPONENT.items()}
NOT_NUMBERS = ("ci", "constraint", "c_ref", "tie_break", "n_convention")  # compute_optimal's keys that are no row


def optimal_tables(T: dict, fit: FitDocument | None) -> dict:
    """Mark the D_crit tables in ``T`` in place; return {"fit_optimal": Table} when the fit has optima."""
    if fit is None:
        return {}
    mark_dcrit(T, fit)
    t = optimal_table(fit)
    return {"fit_optimal": t} if t is not None else {}


def mark_dcrit(T: dict, fit: FitDocument) -> None:
    """The rows of the D_crit tables in ``T`` whose D_crit is below one layer read "not identified"."""
    dcr = fit.verdicts.dcrit_range

    def bad(key):
        return not dcr.get(key, {}).get("identified", True)

    for key, name, cols in (
        ("dcrit_widths", "width", ("law",)),
        ("dcrit_models", "model", ("measured", "depth_over_dcrit")),
    ):
        for r in T[key].rows if key in T else []:
            k = f"dcrit[W={r[name]}]" if name == "width" else f"dcrit[{r[name]}]"
            if bad(k):
                r.update({c: NOT_IDENTIFIED for c in cols}, ci_lo=None, ci_hi=None)
    if any(bad(k) for k in dcr):
        for key in ("dcrit_widths", "dcrit_models"):
            if key in T:
                T[key].notes.append("not identified: the law's D_crit is below one layer there")
    far = [r["model"] for r in T["dcrit_models"].rows if bad(f"dcrit[{r['model']}]")] if "dcrit_models" in T else []
    if far:  # dw fit leaves these rows out (cli/fit.py): on one's own small grid they are noise
        T["dcrit_models"].notes.append(
            f"not identified this far from the sweep's widths: {', '.join(far)} (fit.json keeps them)"
        )


def optimal_table(fit: FitDocument) -> Table | None:
    """The compute-optimal allocation derived from the law, or None when the fit has none."""
    co = fit.derived.get("compute_optimal")
    if not co:
        return None
    opt = fit.verdicts.optimum
    rows = []
    for k, v in co.items():
        if k in NOT_NUMBERS or not isinstance(v, (int, float)):
            continue
        ok = opt.get(k, {}).get("identified", True)
        lo, hi = (co.get("ci") or {}).get(k) or (None, None)
        rows.append(
            {
                "quantity": LABELS.get(k, f"{k} at C = {co['c_ref']:.0e}"),
                "value": v if ok else NOT_IDENTIFIED,
                "ci_lo": lo if ok else None,
                "ci_hi": hi if ok else None,
                "note": None if ok else opt[k].get("because"),
            }
        )
    cols = [
        Col("quantity", "quantity"),
        Col("value", "measured", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
        Col("note", "not identified because"),
    ]
    t = Table("fit_optimal", f"Compute-optimal allocation derived from the law ({co.get('constraint')})", cols, rows)
    if co.get("tie_break"):
        t.notes.append(f"tie-break: {co['tie_break']}")
    if (caveat := fit.verdicts.optima_caveat) is not None:
        t.notes.insert(0, caveat)
    return t
