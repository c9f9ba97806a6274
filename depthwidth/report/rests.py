"""Report tables for what a fit rests on: identification, hold-out, isoFLOP, sensitivity and planted
truth (from fit.json); ``dw fit`` prints the same tables.  The verdicts are the ones ``dw fit`` stored
(fit.json's ``verdicts``), read as stored."""

from __future__ import annotations

from depthwidth.fit.result import FitDocument
from depthwidth.core.tables import Col, Table
from depthwidth.fit import analyses


def fit_notes(fit: FitDocument) -> list[str]:
    """The fit table's notes: what is said before the numbers, withheld and flagged intervals, warnings."""
    under = fit.underdetermined
    out = [f"before the numbers: {w}" for w in under]
    out += [f"interval withheld: {k}: {why}" for k, why in fit.ci_withheld.items()][:8]
    flagged = fit.ci_flagged
    if flagged:
        out.append(f"intervals flagged ({', '.join(list(flagged)[:8])}): {next(iter(flagged.values()))}")
    return out + [f"warning: {w}" for w in fit.warnings if w not in under][:12]


PLACED = ("compare", "planted")  # shown beside the parameters (fit_view.py) and before the identification


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
