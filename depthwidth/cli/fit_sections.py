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
        from depthwidth.fit.identify import not_identified_line
        from depthwidth.fit.prefer import preferred

        for line in (not_identified_line(ident), (preferred(res) or {}).get("line")):
            if line:
                c.print(esc(line))
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
    iso = res.get("isoflop")
    if iso:
        _isoflop(c, iso)
    s = res.get("sensitivity")
    if s:
        _sensitivity(c, s, (ident or {}).get("quantum"))
    if res.get("planted"):
        _planted(c, res["planted"])


def _planted(c, p: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from depthwidth.fit.planted import summary_line

    t = Table(title=esc(f"planted truth ({p['world'].get('label')}): is it inside the interval?"))
    for col in ("number", "planted", "fitted", "CI", "inside"):
        t.add_column(col, justify="right", no_wrap=True)
    for k, v in p["numbers"].items():
        ci = v.get("ci")
        t.add_row(esc(k), _f(v["planted"]), _f(v["estimate"]), esc(f"[{ci[0]:.4g}, {ci[1]:.4g}]") if ci else "—",
                  {True: "yes", False: "[red]NO[/red]", None: "—"}[v["covered"]])
    c.print(t)
    c.print(esc(summary_line(p)))


def _isoflop(c, iso: dict) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from depthwidth.fit.isoflop import ci_text, row_note, summary_lines

    lvl = f"{100 * iso['level']:.0f}%"
    t = Table(title=esc(f"isoFLOP profiles: loss vs ln {iso['axis']} per budget (fitted minima)"))
    for col in ("C (FLOPs)", "runs", f"{iso['axis']} range", f"{iso['axis']}*", f"{lvl} CI", "loss at min", ""):
        t.add_column(col, justify="right", no_wrap=True)
    for b in iso["budgets"]:
        t.add_row(f"{b['C']:.3g}", str(b["runs"]), f"{b['x_range'][0]:.4g}–{b['x_range'][1]:.4g}", _f(b.get("x_opt")),
                  esc(ci_text(b.get("x_opt_ci"))), _f(b.get("loss_opt")), esc(row_note(b, iso["level"])))
    c.print(t)
    for line in summary_lines(iso):
        c.print(esc(line))


def _short_of(s: dict, key) -> str:
    return next((r["short"] for r in s["choices"] if r["key"] == key), str(key))


def _sensitivity(c, s: dict, quantum: int | None = None) -> None:
    from rich.markup import escape as esc
    from rich.table import Table

    from depthwidth.fit.identify import below_floor
    from depthwidth.fit.sensitivity import WIDTH_NOTE, summary_line

    fitted = [r for r in s["choices"] if "values" in r]
    t = Table(title="sensitivity: value under each fitting choice")
    t.add_column("number", no_wrap=True)
    for r in fitted:
        t.add_column(esc(r["short"]), justify="right", no_wrap=True)
    for col in ("spread", "CI width", ""):
        t.add_column(col, justify="right", no_wrap=True)
    for k, v in s["numbers"].items():
        vals = [v["values"].get(r["key"]) for r in fitted]
        t.add_row(esc(k), *["not identified" if below_floor(k, x, quantum) else _f(x) for x in vals],
                  _f(v["spread"]), _f(v.get("compared_width", v["ci_width"])),
                  f"[red]spread > CI[/red] ({esc(_short_of(s, v['farthest']))})" if v["flagged"] else "")
    c.print(t)
    for r in fitted:
        c.print(esc(f"  {r['short']}: {r['label']}, {r['n']} points"))
    for r in s["choices"]:
        if "skipped" in r:
            c.print(esc(f"  {r['short']}: skipped ({r['skipped']})"))
    c.print(esc(f"  CI width: {WIDTH_NOTE}"))
    c.print(esc(summary_line(s)) + (f" ({s['note']})" if s.get("note") else ""))
