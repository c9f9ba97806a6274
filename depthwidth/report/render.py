"""Render a report: rich tables in the terminal, markdown, csv, json, and the
files ``dw report --plots DIR`` writes (report.md, report.json, tables/)."""

from __future__ import annotations

from pathlib import Path

from depthwidth.core.atomic import write_text
from depthwidth.core.tables import Table

ORDER = (
    "loss_grid",
    "apart",
    "u_shape",
    "width_sweep",
    "pairs",
    "shapes",
    "router",
    "fit",
    "fit_compare",
    "fit_identification",
    "fit_optimal",
    "fit_holdout",
    "fit_downstream",
    "fit_downstream_holdout",
    "fit_tuning",
    "halving",
    "fit_tuned_vs_fixed",
    "fit_lr",
    "fit_sensitivity",
    "fit_isoflop",
    "fit_planted",
    "dcrit_widths",
    "dcrit_models",
    "flops_curves",
    "flops_match",
    "paper",
    "inside",
    "inside_claims",
    "downstream",
    "missing",
    "provenance",
)


# what the papers claim or published, beside this sweep's numbers: on a sweep that is not one of the
# papers' grids these come last, under their own heading (report/tables.py sets rep["papers_grid"])
PAPER_KEYS = ("dcrit_models", "paper", "inside_claims")
PAPER_HEADING = "Beside the papers: their claims and published numbers (this sweep is not one of their grids)"


def in_order(tables: dict) -> list[str]:
    """The keys of ``tables`` in print order: ORDER's, then any other (a new analysis's) as built."""
    return [k for k in ORDER if k in tables] + [k for k in tables if k not in ORDER]


def _tables(rep):
    return [t for _, t in _sections(rep)]


def _sections(rep) -> list[tuple[str | None, Table]]:
    """(heading or None, table) in print order."""
    keys = in_order(rep["tables"])
    if rep.get("papers_grid", True):
        return [(None, rep["tables"][k]) for k in keys]
    own = [(None, rep["tables"][k]) for k in keys if k not in PAPER_KEYS]
    return own + [(PAPER_HEADING, rep["tables"][k]) for k in keys if k in PAPER_KEYS]


def _title(rep) -> str:
    s = rep["source"]
    what = f"sweep {s['sweep']}" if s.get("sweep") else f"run table {s.get('runs')}"
    st = ", ".join(f"{n} {k}" for k, n in sorted(rep["states"].items()))
    apart = len(rep["tables"]["apart"].rows) if "apart" in rep.get("tables", {}) else 0
    more = f"; {apart} more set apart" if apart else ""
    return f"dw report — {what}: {rep['runs']} runs ({st or 'none'}{more})"


def print_table(t: Table, console, skip: tuple[str, ...] = ()) -> None:
    """One report table and its notes on a rich console, less the columns ``skip``."""
    from rich.markup import escape
    from rich.table import Table as RT

    head, rows = t.display(skip)
    rt = RT(title=escape(t.title), title_justify="left")
    for i, h in enumerate(head):
        rt.add_column(escape(h), justify="left" if i == 0 and not t.pivot else "right")
    for r in rows:
        rt.add_row(*(escape(x) for x in r))
    if rows:
        console.print(rt)
    else:
        console.print(f"[bold]{escape(t.title)}[/bold]: —")
    for n in t.notes:
        console.print(f"  [dim]{escape(n)}[/dim]")


# the terminal's report without --all: the sweep's own headline tables; the rest are named in one line
BRIEF = (
    "loss_grid",
    "apart",
    "shapes",
    "fit",
    "fit_identification",
    "fit_optimal",
    "fit_planted",
    "dcrit_widths",
    "inside",
    "downstream",
    "missing",
)


def render_rich(rep, console, brief: bool = False) -> None:
    """Every table on a rich console; ``brief``: the BRIEF ones, the others named at the end."""
    from rich.markup import escape

    console.print(f"[bold]{escape(_title(rep))}[/bold]")
    said, rest = None, []
    for head, t in _sections(rep):
        if brief and t.key not in BRIEF:
            rest.append(t.title)
            continue
        if head and head != said:
            console.print(f"\n[bold underline]{escape(head)}[/bold underline]")
            said = head
        print_table(t, console)
    if rest:
        console.print(
            escape(f"{len(rest)} more tables (dw report NAME --all, or --plots DIR for report.md): " + "; ".join(rest)),
            style="dim",
        )
    for n in rep["notes"]:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")
    for f in rep["figures"]:
        console.print(escape(f"figure: {f['path']} ({f['width_px']}×{f['height_px']} px) — {f['title']}"))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def _md_note(n: str) -> str:
    return n.replace("*", "\\*")


def md_table(t: Table) -> str:
    head, rows = t.display()
    out = [
        "| " + " | ".join(_md_cell(h) for h in head) + " |",
        "|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|",
    ]
    out += ["| " + " | ".join(_md_cell(x) for x in r) + " |" for r in rows]
    return "\n".join(out)


def render_markdown(rep, fig_base: str | None = None) -> str:
    """Markdown a person can paste into a draft; figures linked relative to ``fig_base``."""
    out = [f"# {_title(rep)}", ""]
    said = None
    for head, t in _sections(rep):
        if head and head != said:
            out += [f"## {head}", ""]
            said = head
        out += [f"{'###' if head else '##'} {t.title}", ""]
        out += [md_table(t), ""] if t.rows else ["—", ""]
        out += [f"- {_md_note(n)}" for n in t.notes] + ([""] if t.notes else [])
    if rep["notes"]:
        out += ["## Notes", ""] + [f"- {n}" for n in rep["notes"]] + [""]
    if rep["figures"]:
        out += ["## Figures", ""]
        for f in rep["figures"]:
            link = f["file"] if fig_base is None else f"{fig_base.rstrip('/')}/{f['file']}"
            out += [f"![{f['title']}]({link})", "", f"*{f['title']}* — {f['caption']}", ""]
    return "\n".join(out).rstrip() + "\n"


def csv_frame(rep):
    """All tables in one rectangular frame: column ``table`` names the table, other columns are its keys."""
    import pandas as pd

    frames = []
    for t in _tables(rep):
        if t.rows:
            frames.append(pd.DataFrame(t.rows).assign(table=t.key))
    if not frames:
        return pd.DataFrame(columns=["table"])
    df = pd.concat(frames, ignore_index=True, sort=False)
    return df[["table"] + [c for c in df.columns if c != "table"]]


def render_csv(rep) -> str:
    return csv_frame(rep).to_csv(index=False)


def to_json(rep) -> dict:
    from depthwidth.fit.files import jsonable

    out = {k: v for k, v in rep.items() if k != "tables"}
    out["tables"] = {t.key: t.to_json() for t in _tables(rep)}
    return jsonable(out)


def write_outputs(rep, out_dir: Path) -> list[str]:
    """report.md (figures linked), report.json and tables/NAME.csv in ``out_dir``."""
    import json

    written = []
    write_text(out_dir / "report.md", render_markdown(rep))
    write_text(out_dir / "report.json", json.dumps(to_json(rep), indent=2) + "\n")
    written += [str(out_dir / "report.md"), str(out_dir / "report.json")]
    for t in _tables(rep):
        if t.rows:
            import pandas as pd

            p = out_dir / "tables" / f"{t.key}.csv"
            write_text(p, pd.DataFrame(t.rows).to_csv(index=False))
            written.append(str(p))
    return written
