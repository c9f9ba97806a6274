"""`dw report` on a small store written by hand (tests/report_store.py: summary.json,
probes.jsonl, manifest and task files in the formats of docs/CONTRACTS.md; no
training), fitted once with the real `dw fit` engine."""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests import report_store as rs
from tests.helpers import REPO, assert_bad_input, dw

TABLES = (
    "loss_grid",
    "u_shape",
    "width_sweep",
    "pairs",
    "shapes",
    "fit",
    "fit_compare",
    "dcrit_widths",
    "dcrit_models",
    "paper",
    "missing",
)
FIGURES = (
    "loss_vs_depth.png",
    "grad_profiles.png",
    "tau_vs_width.png",
    "shape_profiles.png",
    "loss_vs_flops.png",
    "fit_residuals.png",
    "entropy.png",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A finished sweep 't' (grid with 3 seeds in one cell, 4 shapes) and its fit.json."""
    from depthwidth.fit.pipeline import run_fit

    root = tmp_path_factory.mktemp("runs")
    runs = rs.build(root, "t")
    # 40 replicates: few of this ill-posed 7-parameter fit's refits converge, and an interval needs two
    run_fit("t", root=str(root), law="depth-delusion", bootstrap=40, max_starts=30, compare="chinchilla")
    return root, runs


@pytest.fixture(scope="module")
def plotted(store, tmp_path_factory):
    root, runs = store
    out = tmp_path_factory.mktemp("plots") / "figs"
    p = dw("report", "t", "--root", str(root), "--plots", str(out), "--format", "json")
    assert p.returncode == 0, p.stderr
    return root, runs, out, json.loads(p.stdout)


def _final(s):
    return s["budgets"][-1]["val_loss"]


def test_every_table_present_and_numbers_are_the_stores(plotted):
    root, runs, out, rep = plotted
    assert set(TABLES) <= set(rep["tables"]), set(TABLES) - set(rep["tables"])
    grid = {(r["depth"], r["width"]): r for r in rep["tables"]["loss_grid"]["rows"]}
    uniform = [s for s in runs.values() if s["shape"] == "uniform"]
    assert set(grid) == {(s["depth"], s["width"]) for s in uniform}
    for (d, w), row in grid.items():
        losses = [_final(s) for s in uniform if (s["depth"], s["width"]) == (d, w)]
        assert row["loss"] == pytest.approx(statistics.mean(losses), abs=1e-12)
        assert row["seeds"] == len(losses)
        if len(losses) > 1:
            assert row["sd"] == pytest.approx(statistics.stdev(losses), abs=1e-12)
        else:
            assert row["sd"] is None
    for w in rs.GRID_WIDTHS:  # the made-up law bottoms out at depth 4
        assert [r["depth"] for r in grid.values() if r["width"] == w and r["best"]] == [4]
    # shapes: params, FLOPs/token, KV bytes and mean width come from each summary
    shapes = {r["shape"]: r for r in rep["tables"]["shapes"]["rows"]}
    assert set(shapes) == {"uniform", *rs.SHAPE_WIDTHS}
    base = runs["u4x64s1"]
    for s, ws in rs.SHAPE_WIDTHS.items():
        summ = runs[f"shape-{s}"]
        row = shapes[s]
        assert row["loss"] == _final(summ) and row["params"] == summ["params"]
        assert row["kv_ratio"] == pytest.approx(summ["kv_bytes_per_token"] / base["kv_bytes_per_token"])
        assert row["flops_ratio"] == pytest.approx(summ["flops_per_token"] / base["flops_per_token"])
        assert row["mean_width_over_h"] == pytest.approx(sum(ws) / len(ws) / 64)
        assert row["delta_loss"] == pytest.approx(_final(summ) - _final(base))
    # the fit table repeats fit.json; paper columns carry the published numbers
    fit = json.loads((root / "t" / "fit.json").read_text())
    ft = {r["quantity"]: r for r in rep["tables"]["fit"]["rows"]}
    for k, v in fit["params"].items():
        assert ft[k]["measured"] == pytest.approx(v)
        assert [ft[k]["ci_lo"], ft[k]["ci_hi"]] == pytest.approx(fit["ci"][k])
    assert ft["R²"]["measured"] == pytest.approx(fit["r2"]) and ft["R²"]["paper"] == 0.922
    assert ft["τ(W) ∝ W^p: p"]["measured"] == pytest.approx(0.44, abs=1e-6)  # profiles were built with W^0.44
    models = {r["model"]: r for r in rep["tables"]["dcrit_models"]["rows"]}
    gpt3 = fit["derived"]["dcrit"]["reference"]["GPT-3"]["dcrit"]  # below one layer reads "not identified"
    assert models["GPT-3"]["paper"] == 22.9 and models["GPT-3"]["measured"] == (
        pytest.approx(gpt3) if gpt3 >= 1 else "not identified"
    )
    dw = {r["width"]: r for r in rep["tables"]["dcrit_widths"]["rows"]}
    assert dw[64]["paper"] == pytest.approx(2.43 * math.log(64))
    assert dw[64]["profiles"] == pytest.approx(rs.tau(64) + 1, rel=1e-6)  # a depth: 1 + tau for exact exponentials
    paper = rep["tables"]["paper"]["rows"]
    assert [(r["config"], r["paper_loss"], r["measured_loss"]) for r in paper] == [
        ("2L×64", 3.1, _final(runs["u2x64s1"]))
    ]
    assert rep["tables"]["missing"]["rows"] == []
    pairs = rep["tables"]["pairs"]["rows"]
    assert pairs and all(r["delta_loss"] == pytest.approx(r["dn_loss"] - r["sw_loss"]) for r in pairs)


def _png_size(path: Path):
    b = path.read_bytes()
    assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", path
    return struct.unpack(">II", b[16:24])


def test_provenance_section_counts_runs_and_warns_on_mixed_commits_and_precisions(plotted):
    root, runs, out, rep = plotted
    t = rep["tables"]["provenance"]
    done = [s for s in runs.values() if s is not None]
    rows = {r["commit"]: r for r in t["rows"]}
    assert rows["a" * 12]["runs"] == sum(s["shape"] != "x" for s in done) and rows["a" * 12]["precision"] == "fp32"
    assert rows["b" * 12]["runs"] == 1 and rows["b" * 12]["dirty"] is True and rows["b" * 12]["precision"] == "bf16"
    notes = " ".join(rep["notes"])
    assert "2 different commits" in notes and "2 precisions: bf16, fp32" in notes and "dirty tree" in notes
    assert any(n.startswith("fit.json: dw ") for n in t["notes"])  # the fit's own provenance


def test_every_figure_is_a_png_of_the_stated_size(plotted):
    root, runs, out, rep = plotted
    figs = {f["file"]: f for f in rep["figures"]}
    assert set(figs) == set(FIGURES), rep["notes"]
    for name, f in figs.items():
        p = out / name
        assert p.stat().st_size > 10_000, name
        assert _png_size(p) == (f["width_px"], f["height_px"]), name
        assert f["width_px"] >= 900  # 6.4 in at 150 dpi: a full text width


def test_markdown_export_parses_and_links_the_figures(plotted):
    root, runs, out, rep = plotted
    md = (out / "report.md").read_text()
    for key in TABLES:
        assert rep["tables"][key]["title"] in md
    # every markdown table is rectangular: header, separator, rows with as many cells
    blocks, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            blocks.append(cur)
            cur = []
    assert len(blocks) >= len(TABLES) - 1  # 'paper' may be a one-row table; all are tables here
    for b in blocks:
        n = len(_md_cells(b[0]))
        assert set(b[1].replace("|", "").replace(":", "")) == {"-"}
        assert all(len(_md_cells(r)) == n for r in b[2:]), b
    grid = blocks[0]
    assert _md_cells(grid[0]) == ["depth \\ width", "W=32", "W=64"]
    row4 = _md_cells(next(r for r in grid[2:] if _md_cells(r)[0] == "4"))
    s = [runs[k] for k in ("u4x32s1", "u4x32s2", "u4x32s3")]
    m, sd = statistics.mean(map(_final, s)), statistics.stdev(map(_final, s))
    assert row4[1] == f"{m:.4f} ± {sd:.4f} *"
    links = [line[line.index("](") + 2 : -1] for line in md.splitlines() if line.startswith("![")]
    assert sorted(links) == sorted(FIGURES)
    assert all((out / link).is_file() for link in links)
    assert {p.name for p in (out / "tables").iterdir()} >= {f"{k}.csv" for k in TABLES if k != "missing"}


def _md_cells(line):
    return [c.strip() for c in line.strip().strip("|").split(" | ")]


def test_csv_parses_into_the_same_tables(store):
    import pandas as pd

    root, runs = store
    p = dw("report", "t", "--root", str(root), "--format", "csv")
    assert p.returncode == 0, p.stderr
    df = pd.read_csv(io.StringIO(p.stdout))
    assert set(TABLES) - {"missing"} <= set(df["table"])
    g = df[df.table == "loss_grid"].set_index(["depth", "width"])
    assert g.loc[(6, 64), "loss"] == pytest.approx(_final(runs["u6x64s1"]), abs=1e-12)
    assert list(csv.reader(io.StringIO(p.stdout)))[0][0] == "table"


def test_rich_and_markdown_on_stdout(store):
    root, _ = store
    p = dw("report", "t", "--root", str(root), "--all")
    assert p.returncode == 0, p.stderr
    for title in (
        "depth × width",
        "U-shape",
        "Shallow-wide vs deep-narrow",
        "Width-shape families",
        "Law comparison",
        "D_crit extrapolated",
        "Published numbers beside ours",
        "What is missing",
    ):
        assert title in p.stdout
    assert "nothing: all 12 runs are done" in p.stdout
    # without --all the terminal gets the headline tables and one line naming the others (before: every table)
    brief = dw("report", "t", "--root", str(root))
    assert brief.returncode == 0 and "depth × width" in brief.stdout and "What is missing" in brief.stdout
    assert "more tables (dw report NAME --all" in brief.stdout
    assert len(brief.stdout.splitlines()) < 0.8 * len(p.stdout.splitlines())
    md = dw("report", "t", "--root", str(root), "--format", "markdown")
    assert md.returncode == 0 and md.stdout.startswith("# dw report — sweep t")


def test_the_gradient_profile_figure_is_its_analysis_module_s_data(tmp_path):
    """The gradient-profile figure is fit/analyses/gradient_persistence.py's ``figures`` (report/figs.py
    only draws it): a panel per width, per healthy uniform run its per-layer gradient norms at the probe
    step nearest 1000 and, dashed, the least-squares exponential decay from the top layer, as
    report/figs.py drew them before the figure moved; and, without probes, why it is not drawn."""
    import numpy as np

    from depthwidth import report
    from depthwidth.core.figures import Figure
    from depthwidth.fit import analyses
    from depthwidth.report import figs

    rs.build(tmp_path, "t", failed=True)  # f8x32 failed, d8x64 diverged: their profiles are not drawn
    data = report.load("t", root=str(tmp_path))
    fig = analyses.figures(None, "gradient_persistence", probes=data.probes)["grad_profiles"]
    title = "Per-layer gradient norms with fitted exp(−(L−l)/τ)"
    assert isinstance(fig, Figure) and (fig.file, fig.title, fig.size) == ("grad_profiles.png", title, (6.4, 3.6))
    assert fig.caption.startswith("solid: measured at the probe step nearest 1000; dashed: least-squares")
    assert fig.grid == (1, 2) and fig.sharey and fig.suptitle == title + ", step 20"  # step 20: the nearest 1000
    want = []  # what report/figs.py drew before the figure moved: per width, per run by depth, measured and fitted
    for w in rs.GRID_WIDTHS:
        ps = [
            p
            for p in data.probes
            if p["width"] == w and p["shape"] == "uniform" and p["status"] not in ("failed", "diverged")
        ]
        ps.sort(key=lambda p: len(p["probes"][-1]["grad_norm"]["block"]))  # stable: by depth
        ats = np.linspace(0.05, 0.85, len(ps))
        series = []
        for p, at in zip(ps, ats):
            g = p["probes"][-1]["grad_norm"]["block"]  # steps 10 and 20: 20 is the nearest 1000
            L = len(g)
            b, a = np.polyfit((L - 1) - np.arange(L), np.log(g), 1)
            layers = np.arange(1, L + 1)
            col = {"cmap": "viridis", "at": at}
            series.append(("plot", list(layers), list(g), "o-", col, f"L={L}, τ={-1 / b:.2g}"))
            series.append(("plot", list(layers), list(np.exp(a - (L - layers) / (-1 / b))), "--", col, None))
        want.append((f"W = {w}", series))
    got = [
        (q.title, [(s.kind, list(s.x), list(s.y), s.fmt, s.style["color"], s.style.get("label")) for s in q.series])
        for q in fig.panels
    ]
    assert got == want and [t for t, _ in got] == ["W = 32", "W = 64"]
    assert not any("L=8" in (s.style.get("label") or "") for q in fig.panels for s in q.series)  # failed runs left out
    assert sum(1 for _, ws in want[:1] for s in ws if s[3] == "o-") == 5  # W = 32: depths 2, 4 (3 seeds), 6
    for k, q in enumerate(fig.panels):
        assert (q.xscale, q.yscale, q.xlabel, q.legend, q.legend_fontsize) == (
            "linear",
            "log",
            "layer l (1 = bottom)",
            "best",
            7,
        )
        assert q.ylabel == ("‖grad_l‖ (gradient L2 norm)" if k == 0 else "")  # the first column's only
    drawn = figs.draw(figs._plt(), fig)
    assert [ax.get_yscale() for ax in drawn.axes] == ["log", "log"] and drawn._suptitle.get_text() == fig.suptitle
    assert drawn.axes[0].get_shared_y_axes().joined(drawn.axes[0], drawn.axes[1])

    assert analyses.figures(None, "gradient_persistence", probes=[])["grad_profiles"] == (
        "no probes.jsonl with per-layer gradient norms of uniform runs of depth >= 2"
    )


def test_failed_diverged_and_pending_runs_are_listed(tmp_path):
    rs.build(tmp_path, "p", failed=True, pending=True, seeds=False)  # the pending task's worker is this process
    p = dw("report", "p", "--root", str(tmp_path), "--format", "json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    miss = {r["run"]: r for r in rep["tables"]["missing"]["rows"]}
    assert {k: v["state"] for k, v in miss.items()} == {"f8x32": "failed", "d8x64": "diverged", "p2x96": "pending"}
    assert "out of memory" in miss["f8x32"]["reason"]
    assert "loss grid (2L×96)" in miss["p2x96"]["incomplete"]
    assert rep["states"] == {"done": 10, "failed": 1, "diverged": 1, "pending": 1}
    grid = {(r["depth"], r["width"]): r for r in rep["tables"]["loss_grid"]["rows"]}
    assert grid[(8, 32)]["state"] == "failed" and grid[(8, 32)]["loss"] is None
    assert "fit" not in rep["tables"] and any("no fit.json" in n for n in rep["notes"])
    rich = dw("report", "p", "--root", str(tmp_path))
    assert "(failed)" in rich.stdout and "(pending)" in rich.stdout and "d8x64" in rich.stdout


def test_run_table_input_matches_the_paper_and_needs_no_store(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text(
        "run,depth,width,params,tokens,loss\n"
        "a,16,512,1.02e8,6.4e9,3.50\nb,8,512,7.7e7,6.4e9,3.60\nc,16,256,4e7,6.4e9,3.95\n"
    )
    p = dw("report", "--runs", str(f), "--format", "json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    paper = {r["config"]: r for r in rep["tables"]["paper"]["rows"]}
    assert paper["16L×512"]["paper_loss"] == 3.435 and paper["16L×512"]["measured_loss"] == 3.50
    assert paper["16L×512"]["delta"] == pytest.approx(3.50 - 3.435)
    assert paper["8L×512"]["from"] == "docs/science.md"
    assert [r["loss"] for r in rep["tables"]["u_shape"]["rows"]] == [3.60, 3.50]


def test_bad_input_is_one_line_exit_2(store, tmp_path):
    root, _ = store
    for args in (
        ("t", "--root", str(root), "--format", "xml"),
        ("nope", "--root", str(root)),
        ("t", "--runs", "x.csv", "--root", str(root)),
        ("t", "--root", str(root), "--at-width", "48"),
        ("t", "--root", str(root), "--fit", str(tmp_path / "missing.json")),
    ):
        assert_bad_input(dw("report", *args))


def test_help_shows_an_example():
    p = dw("report", "--help")
    assert p.returncode == 0 and "Example: dw report demo --plots out/demo" in p.stdout


_IMPORTS = """
import sys
from depthwidth.cli import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    assert not e.code, e.code
print(json.dumps({"torch": "torch" in sys.modules, "matplotlib": "matplotlib" in sys.modules}))
"""


@pytest.mark.parametrize("plots", [False, True])
def test_report_never_imports_torch_and_matplotlib_only_for_plots(store, tmp_path, plots):
    root, _ = store
    args = ["report", "t", "--root", str(root), "--format", "csv"] + (["--plots", str(tmp_path / "o")] if plots else [])
    p = subprocess.run(
        [sys.executable, "-c", "import json\n" + _IMPORTS, *args], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got == {"torch": False, "matplotlib": plots}


def test_status_watch_returns_when_every_run_has_ended(store, tmp_path):
    root, _ = store
    p = dw("status", "t", "--watch", "--interval", "0.2", "--timeout", "60", env={"DW_RUNS": str(root)}, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "12 done" in p.stdout and "u4x32s2" in p.stdout
    rs.build(tmp_path, "w", pending=True, seeds=False)
    p = dw("status", "w", "--watch", "--interval", "0.2", "--timeout", "1", env={"DW_RUNS": str(tmp_path)})
    assert p.returncode == 1 and "1 pending" in p.stderr
    assert_bad_input(dw("status", "w", "--watch", "--json", env={"DW_RUNS": str(tmp_path)}))


def test_readme_demo_rewrites_only_between_the_markers(plotted, tmp_path, monkeypatch):
    from depthwidth.report import readme as report_readme

    root, runs, out, rep = plotted
    readme = tmp_path / "README.md"
    readme.write_text("# title\n\nbefore\n<!-- demo:begin -->\nold text\n<!-- demo:end -->\nafter\n")
    monkeypatch.setenv("DW_RUNS", str(root))
    fig = tmp_path / "docs" / "demo.png"
    assert (
        report_readme.main(["--readme", str(readme), "--report", str(out), "--figure", str(fig), "--sweep", "t"]) == 0
    )
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n<!-- demo:begin -->\n") and text.endswith("<!-- demo:end -->\nafter\n")
    assert "old text" not in text and "![Loss vs depth per width, with " in text
    assert f"| 6 | {_final(runs['u6x32s1']):.4f} | {_final(runs['u6x64s1']):.4f} |" in text
    assert fig.read_bytes() == (out / "loss_vs_depth.png").read_bytes() and fig.stat().st_size < 200_000
    readme.write_text("no markers\n")
    assert (
        report_readme.main(["--readme", str(readme), "--report", str(out), "--figure", str(fig), "--sweep", "t"]) == 2
    )


def test_status_watch_into_a_log_prints_a_line_when_a_run_ends_not_at_every_start(monkeypatch, capsys):
    from depthwidth.cli import status as cli_status
    from depthwidth.launch import status as runs_status

    def st(**counts):
        runs = [
            {
                "run_id": f"r{i}",
                "label": "",
                "state": k,
                "tokens": 0,
                "tokens_total": 1,
                "last_loss": None,
                "progress": None,
                "attempts": 1,
                "job_id": "j",
                "launcher": "local",
            }
            for i, (k, n) in enumerate((k, n) for k, n in counts.items() for _ in range(n))
        ]
        return {
            "sweep": "w",
            "total": 3,
            "runs": runs,
            "counts": {k: counts.get(k, 0) for k in runs_status.STATES},
            "problems": [],
        }

    seq = iter(
        [
            st(pending=3),
            st(pending=2, running=1),
            st(pending=1, running=2),
            st(pending=1, running=1, done=1),
            st(running=2, done=1),
            st(running=1, done=2),
            st(running=1, done=2),
            st(done=3),
        ]
    )
    monkeypatch.setattr(runs_status, "status", lambda name: next(seq))
    cli_status._watch("w", 0, None)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("w: 3 runs")]
    assert len(lines) == 4, lines  # the first look, then each of the three runs ending
