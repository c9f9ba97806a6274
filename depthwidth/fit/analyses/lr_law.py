"""Learning-rate laws (``--law lr``): each tuning group's lr* (its interpolated optimum, else its best
measured value) as power laws in N and in depth and width together, with whether lr* is flat in
width (what µP promises) and how it moves with depth (the statistics and the rule: fit/tuning.py
``lr_fits``, ``lr_verdicts``).

A document of its own (``DOCUMENT``: lr_fit.json, beside fit.json), which ``dw fit --law lr`` makes
instead of a law fit (pipeline.py ``run_fit``): the sweep's fit.json stays the law the report shows.
Its section is the document's body, computed on the runs ``--where`` kept, its verdict lines decided
here (``verdicts``) and stored in it (``verdicts``); its table reads that document: ``dw fit --law
lr`` prints it.
"""

from __future__ import annotations

SECTION = "lr_law"
OPTIONS = ("law", "where", "level", "seed")
DOCUMENT = "lr_fit.json"  # written beside fit.json, instead of a law fit
SCHEMA = "dw.fit/1"
FLAG = "--law lr"  # how dw fit asks for it, and the library's call
CALL = "run_fit(law='lr')"
WIDTH = 120  # the terminal width its table needs


def section(ctx) -> dict:
    """lr_fit.json's body: the laws of the runs this fit is about (``ctx.table``: ``--where`` applied),
    its verdict lines before the groups' points."""
    from depthwidth.fit.tuning import lr_fits

    o = ctx.opts
    out = lr_fits(ctx.table, o.level, o.seed)
    points = out.pop("points")
    return {**out, "verdicts": verdicts(out)["lines"], "points": points}


def verdicts(doc: dict) -> dict:
    """Plain lines: is lr* flat in width (what µP promises), how it moves with depth at fixed width
    (the rule: fit/tuning.py ``lr_verdicts``; docs/verdicts.md)."""
    from depthwidth.fit.tuning import lr_verdicts

    return {"lines": lr_verdicts(doc)}


def tables(doc: dict) -> dict:
    """{"fit_lr": Table}: lr* as power laws in N, and in D and W, with the document's verdict lines."""
    from depthwidth.core.tables import Col, Table

    rows = []
    for form, label in (("N", "lr* = c · N^e_N"), ("DW", "lr* = c · D^e_D · W^e_W")):
        f = doc.get(form) or {}
        for k, v in (f.get("coef") or {}).items():
            lo, hi = f["ci"][k]
            rows.append({"form": label, "coef": k, "value": v, "ci_lo": lo, "ci_hi": hi})
        if f.get("note"):
            rows.append({"form": label, "coef": f["note"]})
    cols = [
        Col("form", "law"),
        Col("coef", "coefficient"),
        Col("value", "fitted", "{:.4g}"),
        Col("ci_lo", "CI lo", "{:.4g}"),
        Col("ci_hi", "CI hi", "{:.4g}"),
    ]
    t = Table("fit_lr", "Learning-rate laws: each tuning group's lr* (interpolated, else best)", cols, rows)
    t.notes.append(
        f"{doc['used']} of {doc['groups']} groups ({doc['at_edge']} with their best at an edge of the grid left out: "
        "dw sweep NAME --extend-tuning)"
    )
    t.notes += doc.get("verdicts") or []
    return {"fit_lr": t}
