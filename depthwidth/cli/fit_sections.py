"""Terminal sections of ``dw fit`` for what a fit rests on: identification, hold-out, sensitivity."""

from __future__ import annotations


def _f(x, fmt="{:.4g}") -> str:
    return "—" if x is None else fmt.format(x)


def render(c, res: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    ident = res.get("identification")
    if ident:
        from depthwidth.fit.identify import rests_on

        c.print(esc(rests_on(ident)))
        c.print(esc(ident["verdict"]))
        for k, v in ident.get("optimum", {}).items():
            if not v["identified"]:
                c.print(esc(f"{k}: not identified ({v['because']})"))
    h = res.get("holdout")
    if h:
        from depthwidth.fit.holdout import summary_line

        t = Table(title=esc(f"hold-out: {h['split']['name']}, fitted on {h['fitted_runs']} runs ({h['fitted_points']} points)"))
        for col in ("run", "params", "tokens", "loss", "predicted", f"{100 * h['level']:.0f}% PI", "inside"):
            t.add_column(col, justify="right", no_wrap=True)
        for p in h["points"]:
            t.add_row(esc(p["run"]), _f(p.get("params"), "{:.3g}"), _f(p.get("tokens"), "{:.3g}"), _f(p["loss"]),
                      _f(p["predicted"]), esc(f"[{p['pi'][0]:.4g}, {p['pi'][1]:.4g}]"), "yes" if p["inside"] else "NO")
        c.print(t)
        c.print(esc(summary_line(h)))
    s = res.get("sensitivity")
    if s:
        _sensitivity(c, s)


def _sensitivity(c, s: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from depthwidth.fit.sensitivity import summary_line

    fitted = [r for r in s["choices"] if "values" in r]
    t = Table(title="sensitivity: value under each fitting choice")
    t.add_column("number", no_wrap=True)
    for r in fitted:
        t.add_column(esc(r["short"]), justify="right", no_wrap=True)
    for col in ("spread", "CI width", ""):
        t.add_column(col, justify="right", no_wrap=True)
    for k, v in s["numbers"].items():
        t.add_row(esc(k), *[_f(v["values"].get(r["key"])) for r in fitted], _f(v["spread"]), _f(v["ci_width"]),
                  "[red]spread > CI[/red]" if v["flagged"] else "")
    c.print(t)
    for r in fitted:
        c.print(esc(f"  {r['short']}: {r['label']}, {r['n']} points"))
    for r in s["choices"]:
        if "skipped" in r:
            c.print(esc(f"  {r['short']}: skipped ({r['skipped']})"))
    c.print(esc(summary_line(s)) + (f" ({s['note']})" if s.get("note") else ""))
