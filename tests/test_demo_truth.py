"""The demo tells the truth about its own fit (issue 15, deliverable 6).

Planted fit.json documents over the hand-written store of tests/report_store.py:
when D_crit is not identified and ``--compare`` ranks another law lower on
held-out error, ``loss_vs_depth`` draws that law solid and depth-delusion
dashed, the report and the README's demo section say so in one line, and
derived optima outside the physically meaningful range read "not identified".
When D_crit is identified the figure keeps the fitted law alone.
"""

from __future__ import annotations

import json

import pytest

from depthwidth.fit.verdicts import meaningful_dcrit, meaningful_optimum
from depthwidth.fit.userlaw import law_of_label
from depthwidth.fit.result import FitDocument
from depthwidth.fit.verdicts import preferred
from tests import report_store as rs
from tests.planted import PLANTED

DD = PLANTED["depth-delusion[log]"]
WD = PLANTED["width-depth"]
VERDICT_NO = (
    "D_crit identified: no, because only 0 run(s) are deeper than the fitted D_crit "
    "(deepest depth/D_crit = 0.5): nothing shows where extra depth starts to hurt"
)


def _doc(identified: bool, wd_loro: float = 0.0947, with_options: bool = True, power: float | None = None) -> dict:
    derived = {
        "dcrit": {
            "form": "log",
            "formula": "kappa*ln W",
            "widths": {"32": {"value": 0.17, "ci": [0.17, 1.6]}, "64": {"value": 2.5, "ci": [2.0, 3.0]}},
            "reference": {
                "GPT-3": {
                    "width": 12288,
                    "depth": 96,
                    "dcrit": 0.47,
                    "dcrit_ci": [0.4, 5.0],
                    "depth_over_dcrit": 204.0,
                    "depth_over_dcrit_ci": [19.0, 240.0],
                }
            },
        },
        "compute_optimal": {
            "constraint": "C = 6*N*T, N = 12*D*W^2",
            "c_ref": 1e21,
            "N_exponent": 0.53,
            "D_opt": 0.54,
            "W_opt": 49894.9,
            "ci": {"N_exponent": [0.5, 0.56], "D_opt": [0.3, 0.9]},
            "tie_break": "deepest penalty-free shape: D* = D_crit(W*)",
        },
    }
    claim = {
        "parameter": "D_crit",
        "identified": identified,
        "because": "4 runs lie at or below and 3 runs beyond the fitted D_crit"
        if identified
        else VERDICT_NO.split("because ", 1)[1],
    }
    rows = [
        {"law": "depth-delusion[log]", "params": DD, "loro_rmse": 0.143, "extrapolation_rmse": 0.105},
        {"law": "width-depth", "params": WD, "loro_rmse": wd_loro, "extrapolation_rmse": 0.12},
        {"law": "chinchilla", "params": PLANTED["chinchilla"], "loro_rmse": 0.34, "extrapolation_rmse": 0.24},
    ]
    if power is not None:  # the other D_crit form: rests on D_crit too
        rows.append(
            {
                "law": "depth-delusion[power]",
                "params": PLANTED["depth-delusion[power]"],
                "loro_rmse": power,
                "extrapolation_rmse": 0.2,
            }
        )
    for r in rows:  # per-run held-out errors: each of the 14 runs at the law's mean squared error
        r["loro_runs"] = {f"run{i}": r["loro_rmse"] ** 2 for i in range(14)}
    if with_options:
        for r in rows:
            r["options"] = {"dcrit": "log", "irreducible": False} if r["law"].startswith("depth") else {}
    return {
        "schema": "dw.fit/1",
        "law": "depth-delusion",
        "options": {"dcrit": "log", "irreducible": False},
        "formula": "planted",
        "params": DD,
        "ci": {},
        "n": 14,
        "n_runs": 14,
        "r2": 0.9,
        "rmse": 0.1,
        "derived": derived,
        "compare": {
            "laws": rows,
            "best": {"loro": min(rows, key=lambda r: r["loro_rmse"])["law"], "extrapolation": "depth-delusion[log]"},
        },
        "identification": {
            "points": 14,
            "runs": 14,
            "ranges": {"loss": [2.0, 3.5]},
            "claim": claim,
            "verdict": VERDICT_NO if not identified else f"D_crit identified: yes, because {claim['because']}",
            "optimum": meaningful_optimum(derived, quantum=8),
            "dcrit_range": meaningful_dcrit(derived),
        },
    }


@pytest.fixture()
def store(tmp_path):
    rs.build(tmp_path, "t")
    return tmp_path


def _report(root, doc):
    from depthwidth.report.load import load
    from depthwidth.report.tables import build

    (root / "t" / "fit.json").write_text(json.dumps(doc))
    data = load("t", root=str(root))
    return data, build(data)


def _figure(monkeypatch, tmp_path, data, rep):
    """Draw loss_vs_depth and keep its matplotlib figure open for inspection."""
    from depthwidth.report import figs

    kept = {}

    def keep(plt, fig, out, file, title, caption):
        kept.update(fig=fig, title=title, caption=caption)
        return {"file": file, "title": title, "caption": caption}

    monkeypatch.setattr(figs, "_save", keep)
    r = figs.loss_vs_depth(figs._plt(), data, rep, tmp_path)
    assert isinstance(r, dict), r
    ax = kept["fig"].axes[0]
    curves = [ln for ln in ax.get_lines() if len(ln.get_xdata()) == 200]  # the fitted curves (200 depths each)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    return kept, ax, curves, legend


def test_not_identified_draws_the_preferred_law_solid_and_depth_delusion_dashed(store, tmp_path, monkeypatch):
    data, rep = _report(store, _doc(identified=False))
    kept, ax, curves, legend = _figure(monkeypatch, tmp_path, data, rep)
    styles = sorted(ln.get_linestyle() for ln in curves)
    assert styles == ["-", "-", "--", "--"]  # two widths: one solid + one dashed curve each
    assert "width-depth (held-out preferred)" in legend and "depth-delusion[log] (alternative)" in legend
    assert not any(t.startswith("fit: ") for t in legend)
    # the solid curve is the width-depth law, the dashed one depth-delusion, at the same depths
    solid = [ln for ln in curves if ln.get_linestyle() == "-"]
    dashed = [ln for ln in curves if ln.get_linestyle() == "--"]
    assert [list(a.get_ydata()) != list(b.get_ydata()) for a, b in zip(solid, dashed)] == [True, True]
    line = preferred(data.fit.to_json())["line"]
    assert line.startswith(
        "D_crit not identified: the held-out comparison prefers width-depth (leave-one-run-out RMSE 0.0947 vs 0.143"
        " nats for depth-delusion[log], lower on 14 of 14 runs, paired test p = 6.1e-05"
    )
    assert "the lowest extrap. error is depth-delusion[log]'s (not tested)" in line and line.endswith(
        "depth-delusion[log] dashed as the alternative"
    )
    assert kept["caption"].endswith("; " + line)
    assert "D_crit not identified: the held-out comparison prefers width-depth" in ax.get_xlabel().replace("\n", " ")
    assert "held-out preferred" in kept["title"]


def test_identified_keeps_the_fitted_law_alone(store, tmp_path, monkeypatch):
    data, rep = _report(store, _doc(identified=True))
    assert preferred(data.fit.to_json()) is None
    kept, _ax, curves, legend = _figure(monkeypatch, tmp_path, data, rep)
    assert [ln.get_linestyle() for ln in curves] == ["-", "-"]
    assert "the fitted depth-delusion[log] law" in legend and not any("preferred" in t for t in legend)
    assert kept["title"] == "Loss vs depth per width: the fitted depth-delusion[log] law"
    assert "not identified" not in kept["caption"]
    notes = rep["tables"]["fit_identification"].notes
    assert not any("held-out comparison prefers" in n for n in notes)


def test_not_identified_without_a_better_law_draws_the_fitted_law_dashed(store, tmp_path, monkeypatch):
    """Not identified, and no other law has a lower held-out error than depth-delusion: the fitted law
    is drawn dashed, as a curve its verdict does not vouch for (#34)."""
    data, rep = _report(store, _doc(identified=False, wd_loro=0.2))
    assert preferred(data.fit.to_json()) is None
    kept, _ax, curves, legend = _figure(monkeypatch, tmp_path, data, rep)
    assert [ln.get_linestyle() for ln in curves] == ["--", "--"]
    assert "the fitted depth-delusion[log] law (its claim not identified)" in legend
    assert kept["caption"].endswith("; " + VERDICT_NO)


BOUND = "derived from D_crit, which the fit does not identify"


def test_report_says_it_in_one_line_and_optima_read_not_identified(store):
    from depthwidth.report.render import render_markdown

    data, rep = _report(store, _doc(identified=False))
    line = preferred(data.fit.to_json())["line"]
    md = render_markdown(rep)
    assert md.count(f"- {line}") == 1
    opt = {r["quantity"]: r for r in rep["tables"]["fit_optimal"].rows}
    assert opt["D_opt at C = 1e+21"]["value"] == "not identified" and opt["D_opt at C = 1e+21"]["ci_lo"] is None
    assert opt["D_opt at C = 1e+21"]["note"] == "the law's optimum D_opt = 0.54 is below one layer"
    # W_opt = 49,895 is a width, but one derived from the D_crit the fit does not identify
    assert opt["W_opt at C = 1e+21"]["value"] == "not identified" and opt["W_opt at C = 1e+21"]["ci_lo"] is None
    assert opt["W_opt at C = 1e+21"]["note"] == BOUND
    assert data.fit.verdicts.optimum["W_opt"] == {"value": None, "identified": False, "because": BOUND}
    assert not any(n.startswith("W_opt") for n in data.fit.verdicts.notes)  # the table's caveat says it once
    assert opt["N* ∝ C^x"]["value"] == 0.53 and opt["N* ∝ C^x"]["ci_lo"] == 0.5
    assert "| D_opt at C = 1e+21 | not identified | — | — | the law's optimum D_opt = 0.54 is below one layer |" in md
    assert "0.54 |" not in md.split("## Compute-optimal allocation")[1].split("##")[0].replace("D_opt = 0.54", "")
    # D_crit below one layer in the D_crit tables
    w = {r["width"]: r for r in rep["tables"]["dcrit_widths"].rows}
    assert w[32]["law"] == "not identified" and w[32]["ci_lo"] is None and w[64]["law"] == 2.5
    m = {r["model"]: r for r in rep["tables"]["dcrit_models"].rows}
    assert m["GPT-3"]["measured"] == "not identified" and m["GPT-3"]["depth_over_dcrit"] == "not identified"
    assert "D_crit below one layer at W=32, GPT-3: not identified" in md


def test_another_dcrit_form_is_never_the_preferred_law():
    """depth-delusion[power] ranks first, but rests on D_crit too: width-depth is drawn, the power form named."""
    pref = preferred(_doc(identified=False, power=0.05))
    assert pref["law"] == "width-depth" and pref["alternative"] == "depth-delusion[log]"
    assert "depth-delusion[power] ranks first (0.05) but rests on D_crit too" in pref["line"]
    assert preferred(_doc(identified=False, wd_loro=0.2, power=0.05)) is None  # only the other form beats it


def test_a_lower_held_out_error_within_the_runs_scatter_prefers_no_law():
    """width-depth's LORO RMSE is lower (0.0947 vs 0.143) but run by run the two laws trade places: no law is
    preferred (before: any lower RMSE was, a coin's toss between laws that fit alike), and a fit.json
    without per-run errors prefers none either."""
    doc = _doc(identified=False)
    rows = {r["law"]: r for r in doc["compare"]["laws"]}
    wd = [0.0947**2 * f for f in (0.1, 1.9) * 7]  # the same mean square as before, each run far from it
    dd = [0.143**2 * f for f in (1.9, 0.1) * 7]
    rows["width-depth"]["loro_runs"] = {f"run{i}": v for i, v in enumerate(wd)}
    rows["depth-delusion[log]"]["loro_runs"] = {f"run{i}": v for i, v in enumerate(dd)}
    assert preferred(doc) is None
    doc = _doc(identified=False)
    for r in doc["compare"]["laws"]:
        del r["loro_runs"]
    assert preferred(doc) is None


def test_old_fit_json_without_flags_or_row_options():
    """A fit.json from before the flags: the report recomputes them; compare rows parse their labels."""
    from depthwidth.fit.verdicts import flags

    doc = _doc(identified=False, with_options=False)
    del doc["identification"]["optimum"], doc["identification"]["dcrit_range"]
    opt, dcr = flags(doc)
    assert not opt["D_opt"]["identified"] and not dcr["dcrit[W=32]"]["identified"] and dcr["dcrit[W=64]"]["identified"]
    assert preferred(doc)["fit"] == {"law": "width-depth", "options": {}, "params": WD}
    law = law_of_label("depth-delusion[power+E]")
    assert (law.name, law.options["dcrit"], law.options["irreducible"]) == ("depth-delusion", "power", True)


def test_width_below_the_quantum_is_not_identified():
    opt = meaningful_optimum({"compute_optimal": {"D_opt": 12.0, "W_opt": 5.0}}, quantum=8)
    assert opt["W_opt"] == {
        "value": None,
        "identified": False,
        "because": "the law's optimum W_opt = 5 is below the width quantum (8)",
    }
    assert opt["D_opt"] == {"value": 12.0, "identified": True}
    assert meaningful_optimum({"compute_optimal": {"W_opt": 5.0}})["W_opt"]["identified"]  # no quantum: one unit


def test_readme_demo_section_says_it_in_one_line(store):
    from depthwidth.report.readme import section

    data, rep = _report(store, _doc(identified=False))
    text = section(rep, "docs/demo.png", None, fit=data.fit)
    line = preferred(data.fit.to_json())["line"]
    assert text.count(line[1:]) == 1 and f"**D{line[1:]}.**" in text
    assert (
        "![Loss vs depth per width, with width-depth (held-out preferred), depth-delusion[log] (alternative) "
        "dashed](docs/demo.png)" in text
    )
    data, rep = _report(store, _doc(identified=True))
    text = section(rep, "docs/demo.png", None, fit=data.fit)
    assert "not identified" not in text
    assert "![Loss vs depth per width, with the fitted depth-delusion[log] law](docs/demo.png)" in text


def test_dw_fit_prints_dcrit_below_one_layer_and_the_preferred_law(capsys):
    from depthwidth.cli.fit import render

    res = {
        **_doc(identified=False),
        "ci": {k: None for k in DD},
        "pinned": {},
        "on_bound": ["kappa"],
        "starts": {"converged": 1, "total": 1, "in_best_basin": 1},
        "objective": 0.0,
        "excluded": [],
        "warnings": [],
    }
    for r in res["compare"]["laws"]:
        r.update(k=len(r["params"]), r2=0.9, rmse=0.1, aic=-200.0, bic=-190.0)
    res["compare"]["best"].update(aic="width-depth", bic="width-depth")
    render(FitDocument.from_json(res))
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 5}
    assert "not identified" in rows["32"] and "0.17" not in rows["32"] and "2.5" in rows["64"]  # the D_crit table
    assert "GPT-3" not in rows and "204" not in out  # unreachable: named in the table's note, no row of numbers
    assert "not identified this far from the sweep's widths: GPT-3" in " ".join(out.split())
    assert "D_crit below one layer at W=32, GPT-3: not identified" in out
    assert "D_crit not identified: the held-out comparison prefers width-depth" in " ".join(out.split())


def test_dw_fit_sensitivity_table_reads_not_identified_below_one_layer(capsys):
    from depthwidth.cli.fit import render

    s = {
        "choices": [{"key": "base", "short": "base", "label": "as fitted", "n": 14, "values": {}}],
        "numbers": {
            "compute_optimal.D_opt": {
                "values": {"base": 0.54},
                "spread": 0.0,
                "ci_width": 0.6,
                "flagged": False,
                "farthest": None,
            }
        },
        "flagged": [],
    }
    render(FitDocument.from_json({"law": "", "params": {}, "sensitivity": s}))  # its section alone
    row = next(line for line in capsys.readouterr().out.splitlines() if "compute_optimal.D_opt" in line)
    assert "not identified" in row and "0.54" not in row


def test_the_width_quantum_comes_from_the_runs(tmp_path):
    from depthwidth.fit.files import sweep_quantum

    for i, q in enumerate((16, 8)):
        (tmp_path / f"r{i}").mkdir()
        (tmp_path / f"r{i}" / "config.yaml").write_text(f"model:\n  depth: 2\n  quantum: {q}\n")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.yaml").write_text("model: [unclosed\n")
    assert sweep_quantum(tmp_path) == 8
    assert sweep_quantum(None, {"quantum": [32.0, 64.0]}) == 32
    assert sweep_quantum(None) is None and sweep_quantum(tmp_path / "none") is None


def test_sensitivity_values_outside_the_range_read_not_identified(store):
    from depthwidth.fit.verdicts import below_floor

    assert below_floor("compute_optimal.D_opt", 0.54) and not below_floor("compute_optimal.D_opt", 1.0)
    assert below_floor("dcrit[W=32]", 0.17) and not below_floor("alpha", 0.1)
    assert below_floor("compute_optimal.W_opt", 5.0, quantum=8) and not below_floor("compute_optimal.W_opt", 5.0)
    assert not below_floor("compute_optimal.D_opt", None)
    doc = _doc(identified=False)
    doc["identification"]["quantum"] = 8
    doc["sensitivity"] = {
        "choices": [
            {"key": "base", "short": "base", "label": "as fitted", "n": 14, "values": {}},
            {"key": "delta", "short": "δ=1e-2", "label": "Huber δ 1e-2", "n": 14, "values": {}},
        ],
        "numbers": {
            "compute_optimal.D_opt": {
                "values": {"base": 0.54, "delta": 1.5},
                "spread": 0.96,
                "ci_width": 0.6,
                "flagged": True,
                "farthest": "delta",
            },
            "alpha": {
                "values": {"base": 0.3, "delta": 0.31},
                "spread": 0.01,
                "ci_width": 0.1,
                "flagged": False,
                "farthest": "delta",
            },
        },
        "flagged": ["compute_optimal.D_opt"],
    }
    _data, rep = _report(store, doc)
    rows = {r["number"]: r for r in rep["tables"]["fit_sensitivity"].rows}
    assert rows["compute_optimal.D_opt"]["base"] == "not identified" and rows["compute_optimal.D_opt"]["delta"] == 1.5
    assert rows["alpha"]["base"] == 0.3
