"""``make readme-demo``: rewrite the README's demo section from the real demo output.

    python -m depthwidth.report.readme --readme README.md --report out/demo --figure docs/demo_loss_vs_depth.png

Reads the demo store (``$DW_RUNS/demo`` with its fit.json) and the figures
``dw report demo --plots out/demo`` wrote, copies ``loss_vs_depth.png`` to
``--figure`` (and ``entropy.png`` to ``--entropy-figure`` when the runs were
analysed: docs/guides/inside.md shows it; ``shape_profiles.png`` to ``--shapes-figure``:
docs/guides/shapes.md) and replaces the text between ``<!-- demo:begin -->`` and
``<!-- demo:end -->`` with table excerpts of that report: the loss grid, the shapes, the fit's
line, its verdict and the planted twin's, one figure.  Nothing here is
typed by hand but the prose around the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from depthwidth.fit.papers import DD_FIT
from depthwidth.core.atomic import write_text
from depthwidth.core.store import runs_root
from depthwidth.core.errors import BadInput, DwError
from depthwidth.report.load import load
from depthwidth.core.tables import Table
from depthwidth.fit.result import FitDocument
from depthwidth.report.render import md_table
from depthwidth.report.tables import build

BEGIN, END = "<!-- demo:begin -->", "<!-- demo:end -->"
MAX_FIGURE_BYTES = 200_000


def section(
    rep,
    figure_rel: str,
    seconds: str | None,
    entropy_rel: str | None = None,
    fit: FitDocument | None = None,
    planted: FitDocument | None = None,
) -> str:
    """The demo section; ``fit``: the fit (its fit.json), for the one line on what it does not identify;
    ``planted``: the fit of the demo grid planted by ``dw simulate`` (make demo's last step)."""
    T = rep["tables"]
    out = ["    make demo", ""]
    st = ", ".join(f"{n} {k}" for k, n in sorted(rep["states"].items()))
    timing = f" in {seconds} s (sweep, fit and report, 2 CPU workers)" if seconds else ""
    out += [
        f"The demo trains {rep['runs']} tiny models ({st}){timing}, then prints these tables "
        "and writes figures, `report.md` and `report.json` to `out/demo/`. Held-out loss "
        "(nats per token, bytes of Python's own documentation), `*` marks the best depth at each width:",
        "",
    ]
    out += [md_table(T["loss_grid"]), ""]
    if T["shapes"].rows:
        out += [
            "The four width shapes against the uniform model they are matched to:",
            "",
            md_table(
                _cut(
                    T["shapes"],
                    ("shape", "loss", "delta_loss", "params_ratio", "flops_ratio", "kv_ratio", "mean_width_over_h"),
                )
            ),
            "",
        ]
    if "fit" in T:
        rows = {r["quantity"]: r for r in T["fit"].rows}
        r2, rmse = rows.get("R²", {}).get("measured"), rows.get("RMSE (nats)", {}).get("measured")
        if r2 is not None and rmse is not None:
            out += [
                "`dw fit demo --law depth-delusion --where shape=uniform` fits the structural-penalty law with R² = "
                f"{r2:.3f}, "
                f"RMSE = {rmse:.3f} nats (the paper: {DD_FIT['r2']}, {DD_FIT['rmse']}) on "
                f"{rows.get('points / runs', {}).get('measured')} "
                "points / runs; its intervals and warnings are in the report.",
                "",
            ]
    said = fit.verdicts if fit else None  # decided by dw fit (fit.json's verdicts)
    line = said.truth_line if said else None
    if line:  # the claim is not identified: say so, and which law the figure draws (report/fit_view.py)
        out += [f"**{line[0].upper() + line[1:]}.**", ""]
    if planted and planted.sections.get("planted"):
        v = (planted.verdicts.notes or [None])[0]  # the D_crit ladder's line
        out += [
            f"Is that the grid or the data? `dw simulate demo --name demo-planted` writes the same 16 runs with "
            f"losses planted from the depth-delusion law near the paper's fit, and its fit answers: {v}; "
            f"{planted.verdicts.planted}.",
            "",
        ]
    draw = said.figure if said else None
    alt = f"Loss vs depth per width, with {draw['label']}" if draw else "Loss vs depth per width"
    if draw and draw.get("alternative"):
        alt += f", {draw['alternative']['label']} dashed"
    out += [f"![{alt}]({figure_rel})", ""]
    if "inside" in T and T["inside"].rows:  # the tables themselves: docs/guides/inside.md, with the figure
        out += [
            "Inside the models (`dw analyze`, run by each demo run as it ends): per-layer entropy, dead MLP units "
            "and the logit lens per shape, beside the Variable-Width paper's claims, in `dw report demo --all` "
            "and [Looking inside](docs/guides/inside.md).",
        ]
    return "\n".join(out)


def _cut(t, keys):
    cols = [c for c in t.cols if c.key in keys]
    return Table(t.key, t.title, cols, t.rows)


def rewrite(readme: Path, body: str) -> None:
    text = readme.read_text(encoding="utf-8")
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise BadInput(f"{readme} must hold one {BEGIN} ... {END} pair")
    a = text.index(BEGIN) + len(BEGIN)
    b = text.index(END)
    write_text(readme, text[:a] + "\n" + body.rstrip() + "\n" + text[b:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", type=Path, default=Path("README.md"))
    ap.add_argument("--report", type=Path, default=Path("out/demo"), help="the folder dw report demo --plots wrote")
    ap.add_argument("--figure", type=Path, default=Path("docs/demo_loss_vs_depth.png"))
    ap.add_argument("--entropy-figure", type=Path, default=Path("docs/demo_entropy.png"))
    ap.add_argument("--shapes-figure", type=Path, default=None, help="default: demo_shape_profiles.png beside --figure")
    ap.add_argument("--sweep", default="demo")
    a = ap.parse_args(argv)
    try:
        src = a.report / "loss_vs_depth.png"
        if not src.is_file():
            raise BadInput(f"{src} missing: run dw report {a.sweep} --plots {a.report} first")
        if src.stat().st_size > MAX_FIGURE_BYTES:
            raise BadInput(f"{src} is {src.stat().st_size} bytes (at most {MAX_FIGURE_BYTES} for the README)")
        data = load(a.sweep)
        rep = build(data)
        secs = None
        sf = a.report / "demo_seconds"
        if sf.is_file():
            secs = sf.read_text().strip() or None
        a.figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, a.figure)
        rel = os.path.relpath(a.figure, a.readme.parent)
        ent, ent_rel = a.report / "entropy.png", None
        if "inside" in rep["tables"] and ent.is_file() and ent.stat().st_size <= MAX_FIGURE_BYTES:
            a.entropy_figure.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(ent, a.entropy_figure)
            ent_rel = os.path.relpath(a.entropy_figure, a.readme.parent)
        shp = a.report / "shape_profiles.png"  # the width-shapes guide's figure (docs/guides/shapes.md)
        if shp.is_file() and shp.stat().st_size <= MAX_FIGURE_BYTES:
            dest = a.shapes_figure or a.figure.parent / "demo_shape_profiles.png"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(shp, dest)
        planted = None
        pf = runs_root() / f"{a.sweep}-planted" / "fit.json"
        if pf.is_file():
            planted = FitDocument.from_json(json.loads(pf.read_text(encoding="utf-8")))
        rewrite(a.readme, section(rep, rel, secs, ent_rel, fit=data.fit, planted=planted))
    except DwError as e:
        sys.stderr.write(f"report_readme: error: {' '.join(str(e).split())}\n")
        return e.exit_code
    print(f"rewrote the demo section of {a.readme}; figure {a.figure} ({a.figure.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
