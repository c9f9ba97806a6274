"""FLOPs to match uniform (fit/match.py, report/matching.py, ``dw fit --match``).

Planted tables (tests/planted.py ``match_table``): the x shape follows the
uniform curve shifted in FLOPs, L_x(C) = L_u(C / 0.78), and has 0.95x the
uniform FLOPs and 0.9x its mean width at the same (h, L).  Along x, mean width
∝ h ∝ C^(1/4) and KV ∝ h² ∝ C^(1/2), so at the matched point the ratios are
exactly 0.9·(0.78/0.95)^(1/4) (mean width) and 0.9·(0.78/0.95)^(1/2) (KV).
"""

import json

import numpy as np
import pytest

from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput
from depthwidth.fit.match import NEEDS, flops_to_match
from tests.helpers import assert_bad_input, dw_in_process, run_dw
from tests.planted import match_table

F = 0.78
MW = 0.9 * (F / 0.95) ** 0.25
KV = 0.9 * (F / 0.95) ** 0.5


_dw = dw_in_process


def test_noise_free_shift_is_recovered_exactly():
    m = flops_to_match(match_table(noise=0.0), bootstrap=0)
    assert [r.width for r in m.rows] == [256, 384, 512, 768, 1024, 1536]
    for r in m.rows:
        assert r.flops_fraction == pytest.approx(F, rel=1e-5)
        assert r.mean_width_ratio == pytest.approx(MW, rel=1e-5)
        assert r.kv_ratio == pytest.approx(KV, rel=1e-5)
    # C* = 0.78·C_u lies below x's smallest size (0.95·C_u) only for the smallest uniform size
    assert [r.extrapolated for r in m.rows] == [True] + [False] * 5
    u = m.curves[0]
    assert u.shape == "uniform" and u.sizes == 6 and u.runs == 12
    assert u.params["E"] == pytest.approx(1.8, rel=1e-4) and u.params["alpha"] == pytest.approx(0.15, rel=1e-4)


def test_planted_shift_lies_in_a_narrow_interval():
    m = flops_to_match(match_table(seed=2), bootstrap=200, seed=2)
    assert [c.replicates_used for c in m.curves] == [200, 200]
    for r in m.rows[1:5]:  # interior sizes
        lo, hi = r.flops_fraction_ci
        assert lo <= F <= hi, (r.width, lo, hi)
        # narrow enough to tell 0.78 from "no gain" (1) and from the same-size FLOPs ratio (0.95)
        assert hi - lo < 0.12 and hi < 0.9, (r.width, lo, hi)
        assert abs(r.flops_fraction - F) < 0.03
        assert r.mean_width_ratio_ci[0] <= MW <= r.mean_width_ratio_ci[1]
        assert r.mean_width_ratio_ci[1] - r.mean_width_ratio_ci[0] < 0.04
        assert r.kv_ratio_ci[0] <= KV <= r.kv_ratio_ci[1]


def test_intervals_cover_across_noise_draws_and_an_unshifted_table_gives_one():
    cover, widths = [], []
    for sd in range(5):
        for r in flops_to_match(match_table(seed=sd), bootstrap=100, seed=sd).rows[1:5]:
            lo, hi = r.flops_fraction_ci
            cover.append(lo <= F <= hi)
            widths.append(hi - lo)
    assert np.mean(cover) >= 0.8 and np.median(widths) < 0.1, (cover, widths)
    for r in flops_to_match(match_table(fraction=1.0, seed=2), bootstrap=100, seed=2).rows[1:5]:
        lo, hi = r.flops_fraction_ci
        assert lo <= 1.0 <= hi and lo > F, (r.width, lo, hi)


def test_two_sizes_fit_a_pure_power_law():
    m = flops_to_match(match_table(sizes=(256, 512), seeds=3, noise=0.0), bootstrap=0)
    assert all(c.params["E"] == 0.0 and c.formula == "A*(C/C_ref)^-alpha" for c in m.curves)
    assert any("2 sizes: fitted without E" in w for w in m.warnings)
    # a pure power law through two sizes: the fraction is still finite and below 1
    assert all(0.5 < r.flops_fraction < 1.0 for r in m.rows)


def test_one_size_per_shape_is_a_clear_message(tmp_path):
    t = match_table(sizes=(512,))
    with pytest.raises(BadInput, match=NEEDS):
        flops_to_match(t)
    t.to_csv(tmp_path / "one.csv", index=False)
    out = tmp_path / "m.json"
    line = assert_bad_input(run_dw("fit", "--runs", str(tmp_path / "one.csv"), "--match", "--out", str(out)))
    assert NEEDS in line and "uniform 1, x 1" in line
    assert not out.exists()


def test_report_without_enough_sizes_says_so_in_markdown_and_json(tmp_path):
    from depthwidth import report

    match_table(sizes=(512,)).to_csv(tmp_path / "one.csv", index=False)
    rep = report.build(runs=str(tmp_path / "one.csv"))
    t = rep["tables"]["flops_match"]
    assert t.rows == [] and any(NEEDS in n for n in t.notes)
    md = report.render_markdown(rep)
    assert "## FLOPs to match uniform" in md and NEEDS in md
    js = report.to_json(rep)["tables"]["flops_match"]
    assert js["rows"] == [] and any(NEEDS in n for n in js["notes"])


def _sweep(root, sizes=(256, 512, 1024)):
    """A sweep directory of summary.json files holding match_table's runs (no training)."""
    for r in match_table(sizes=sizes, seed=2).to_dict("records"):
        h, L = int(r["width"]), int(r["depth"])
        widths = [h] * L if r["shape"] == "uniform" else [round(1.1 * h)] * (L // 2) + [round(0.7 * h)] * (L // 2)
        T = r["tokens"]
        write_json(
            root / "scal" / r["run"] / "summary.json",
            {
                "run_id": r["run"],
                "status": "done",
                "depth": L,
                "width": h,
                "widths": widths,
                "shape": r["shape"],
                "seed": r["seed"],
                "params": r["params"],
                "flops_per_token": r["flops"] / T,
                "kv_bytes_per_token": 4.0 * sum(widths),
                "tokens": T,
                "final_val_loss": r["loss"],
                "budgets": [
                    {"tokens": T / 2, "step": 5, "val_loss": r["loss"] + 0.5},  # not the final budget: unused
                    {"tokens": T, "step": 10, "val_loss": r["loss"]},
                ],
            },
        )
    return root


def test_dw_fit_match_writes_match_json_and_the_report_shows_it(tmp_path, capsys):
    root = _sweep(tmp_path)
    code, out, err = _dw(capsys, "fit", "scal", "--root", str(root), "--match", "--bootstrap", "50")
    assert code == 0, err
    assert "FLOPs to match uniform" in out and "0.778" in out
    doc = json.loads((root / "scal" / "match.json").read_text())
    assert doc["schema"] == "dw.match/1" and doc["provenance"]["data"]
    assert [c["sizes"] for c in doc["curves"]] == [3, 3] and len(doc["rows"]) == 3
    mid = doc["rows"][1]
    assert mid["flops_fraction"] == pytest.approx(F, abs=0.05)
    assert mid["mean_width_ratio"] == pytest.approx(MW, abs=0.02)  # mean width from the summaries' widths
    assert not (root / "scal" / "fit.json").exists()

    code, out, err = _dw(capsys, "report", "scal", "--root", str(root), "--format", "json")
    assert code == 0, err
    t = json.loads(out)["tables"]["flops_match"]
    assert [r["width"] for r in t["rows"]] == [256, 512, 1024]
    assert t["rows"][1]["flops_fraction"] == pytest.approx(mid["flops_fraction"], rel=1e-12)
    assert t["rows"][2]["paper_flops"] == 0.778 and t["rows"][1]["paper_flops"] is None
    assert any("match.json" in n for n in t["notes"])
    assert not any("recomputed" in n for n in t["notes"])

    # a match.json written before more runs finished is out of date: the report recomputes and says so
    f = root / "scal" / "match.json"
    stale = json.loads(f.read_text())
    stale["curves"][0]["runs"] -= 1
    stale["rows"][1]["flops_fraction"] = 0.123
    f.write_text(json.dumps(stale))
    code, out, err = _dw(capsys, "report", "scal", "--root", str(root), "--format", "json")
    t = json.loads(out)["tables"]["flops_match"]
    assert any("recomputed" in n for n in t["notes"]) and t["rows"][1]["flops_fraction"] != 0.123

    (root / "scal" / "match.json").unlink()  # without the file the report computes it itself
    plots = tmp_path / "plots"
    code, out, err = _dw(capsys, "report", "scal", "--root", str(root), "--format", "markdown", "--plots", str(plots))
    assert code == 0, err
    assert "## FLOPs to match uniform" in out and "computed by dw report" in out
    assert (plots / "flops_match.png").is_file() and "flops_match.png" in out


def test_diverged_and_lossless_runs_are_left_out_and_named():
    t = match_table(noise=0.0)
    t.loc[0, "status"] = "diverged"
    t.loc[1, "loss"] = float("nan")
    m = flops_to_match(t, bootstrap=0)
    assert m.curves[0].runs == 10 and m.curves[0].sizes == 5  # both runs of the smallest uniform size are gone
    assert any(w.startswith("2 run(s) left out") and "uniform-h256-s0" in w for w in m.warnings)
    assert all(r.flops_fraction == pytest.approx(F, rel=1e-5) for r in m.rows)


def test_a_shape_whose_floor_is_above_the_uniform_loss_never_matches():
    t = match_table(noise=0.0)
    x = t["shape"] == "x"
    t.loc[x, "loss"] = 2.6 + 1.2 * (t.loc[x, "flops"] / 1e18) ** -0.2  # E_x = 2.6 > L_u(C) = 2.48 at h 1536
    m = flops_to_match(t, bootstrap=20)
    last = m.rows[-1]
    assert last.width == 1536 and last.flops_match is None and last.flops_fraction is None
    assert last.flops_fraction_ci is None and last.unreachable == 1.0
    assert any("never reaches the uniform loss" in w for w in m.warnings)
    assert m.rows[0].flops_fraction == pytest.approx(1.0, abs=0.05)  # the curves cross near the smallest size


def test_the_match_figure_is_its_analysis_module_s_data(tmp_path):
    """The FLOPs-to-match figure is fit/analyses/match.py's ``figures`` (report/figs.py only draws it):
    per shape, the runs' final points, the fitted curve and the dotted inversions, from the tables the
    report shows; and, without a match, why it is not drawn."""
    from depthwidth import report
    from depthwidth.core.figures import Figure
    from depthwidth.fit import analyses
    from depthwidth.report import figs
    from depthwidth.report.matching import run_frame

    match_table(sizes=(256, 512, 1024), seed=2).to_csv(tmp_path / "t.csv", index=False)
    data = report.load(runs=str(tmp_path / "t.csv"))
    rep = report.build(data)
    T = rep["tables"]
    (fig,) = analyses.figures(None, "match", tables=T, points=lambda: run_frame(data)).values()
    assert isinstance(fig, Figure) and fig.file == "flops_match.png" and fig.size == (6.4, 4.2)
    (p,) = fig.panels
    assert p.xscale == "log" and p.yscale == "linear" and p.legend == "best"
    assert p.title == fig.title == "Loss vs training compute per shape, fitted L(C) = E + A·C^-α"
    pts = run_frame(data)
    want = []  # what report/matching.py drew before the figure moved: per shape, points, curve, inversions
    for i, c in enumerate(T["flops_curves"].rows):
        g = pts[pts["shape"] == c["shape"]]
        want.append(("scatter", list(g["flops"]), list(g["loss"]), "", f"C{i}"))
        C = np.geomspace(c["flops_min"] / 2, c["flops_max"] * 2, 100)
        want.append(("plot", list(C), list(c["E"] + c["A"] * (C / c["c_ref"]) ** -c["alpha"]), "-", f"C{i}"))
        for r in T["flops_match"].rows:
            if r["shape"] == c["shape"] and r["flops_match"] is not None:
                x, y = [r["flops_uniform"], r["flops_match"]], [r["loss_uniform_fit"]] * 2
                want.append(("plot", x, y, ":", f"C{i}"))
    got = [(s.kind, list(s.x), list(s.y), s.fmt, s.style["color"]) for s in p.series]
    assert got == want and sum(w[3] == ":" for w in want) == 3  # an inversion per uniform size
    labels = [s.style["label"] for s in p.series if "label" in s.style]  # the scatters', one per shape
    assert [x.split(":")[0] for x in labels] == ["uniform", "×"] and "α = " in labels[0] and "E = " in labels[1]
    drawn = figs.draw(figs._plt(), fig)
    assert drawn.axes[0].get_xscale() == "log" and drawn.axes[0].get_legend() is not None

    match_table(sizes=(512,)).to_csv(tmp_path / "one.csv", index=False)
    one = report.build(report.load(runs=str(tmp_path / "one.csv")))
    (why,) = analyses.figures(None, "match", tables=one["tables"]).values()
    assert why.startswith("no FLOPs-to-match fit (") and NEEDS in why
    assert analyses.figures(None, "match") == {"flops_match_curves": "no FLOPs-to-match fit (absent)"}
