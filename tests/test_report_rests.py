"""``dw report --runs TABLE --fit fit.json`` shows what the fit rests on: identification, hold-out, sensitivity."""

import json

from depthwidth.fit.laws import get_law
from tests.helpers import dw
from tests.planted import PLANTED, planted_table


def test_report_has_identification_holdout_and_sensitivity(tmp_path):
    df = planted_table(
        get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.002, run_noise=0.01, seed=3
    )
    f, fit = tmp_path / "t.csv", tmp_path / "fit.json"
    df.to_csv(f, index=False)
    # 20 replicates: the report's layout is tested here, not the intervals
    p = dw(
        "fit",
        "--runs",
        str(f),
        "--holdout",
        "largest:2",
        "--sensitivity",
        "--bootstrap",
        "20",
        "--max-starts",
        "50",
        "--out",
        str(fit),
    )
    assert p.returncode == 0, p.stderr
    assert "rests on 80 runs, 240 points" in p.stdout and "sensitivity (7 fits)" in p.stdout
    assert "hold-out (largest 2 of 80 runs by FLOPs)" in p.stdout
    res = json.loads(fit.read_text())
    r = dw("report", "--runs", str(f), "--fit", str(fit), "--format", "markdown")
    assert r.returncode == 0, r.stderr
    md = r.stdout
    assert "## What the fit rests on: 80 runs, 240 points" in md
    assert f"- {res['identification']['line']}" in md
    assert "## Hold-out: largest 2 of 80 runs by FLOPs predicted from the others" in md
    assert md.count("| r") >= 6  # the six held-out points, one row each
    assert "## Sensitivity: each number under each fitting choice" in md
    assert "| compute_optimal.N_exponent |" in md and "- no emb.: skipped (" in md
    j = json.loads(dw("report", "--runs", str(f), "--fit", str(fit), "--format", "json").stdout)
    assert {"fit_identification", "fit_holdout", "fit_sensitivity"} <= set(j["tables"])


def test_report_isoflop_table_and_figure(tmp_path):
    from tests.planted import PLANTED as P, isoflop_table

    df, _ = isoflop_table(
        get_law("width-depth"), P["width-depth"], axis="depth", span=0.8, offset=0.2, noise=0.005, seed=1
    )
    f, fit, plots = tmp_path / "t.csv", tmp_path / "fit.json", tmp_path / "plots"
    df.to_csv(f, index=False)
    # 50 replicates: the layout is tested here (the intervals in tests/test_fit_isoflop.py)
    p = dw(
        "fit",
        "--runs",
        str(f),
        "--law",
        "width-depth",
        "--approach",
        "isoflop",
        "--bootstrap",
        "50",
        "--max-starts",
        "50",
        "--out",
        str(fit),
    )
    assert p.returncode == 0, p.stderr
    shown = " ".join(p.stdout.split())  # dw fit prints the report's own table (its title may wrap)
    assert "IsoFLOP profiles (approach 2): loss vs ln depth per budget" in shown and "D* ∝ C^a: isoFLOP" in shown
    r = dw("report", "--runs", str(f), "--fit", str(fit), "--plots", str(plots))
    assert r.returncode == 0, r.stderr
    rep = json.loads((plots / "report.json").read_text())
    assert len(rep["tables"]["fit_isoflop"]["rows"]) == 4
    (iso_fig,) = [x for x in rep["figures"] if x["file"] == "isoflop.png"]
    assert (plots / "isoflop.png").stat().st_size > 10_000 and (iso_fig["width_px"], iso_fig["height_px"]) == (
        1650,
        660,
    )
    assert "## IsoFLOP profiles (approach 2): loss vs ln depth per budget" in (plots / "report.md").read_text()


def test_loss_vs_depth_says_when_dcrit_is_not_identified(tmp_path):
    from tests.planted import PLANTED as P, planted_table as table

    dd = get_law("depth-delusion")
    df = table(dd, P["depth-delusion[log]"], noise=0.005, seed=2)
    df = df[df["depth"] <= 8]  # planted D_crit >= 10 at every width: nothing shows where depth starts to hurt
    f, fit, plots = tmp_path / "t.csv", tmp_path / "fit.json", tmp_path / "plots"
    df.to_csv(f, index=False)
    p = dw(
        "fit", "--runs", str(f), "--law", "depth-delusion", "--bootstrap", "0", "--max-starts", "100", "--out", str(fit)
    )
    assert p.returncode == 0, p.stderr
    ident = json.loads(fit.read_text())["identification"]
    assert ident["verdict"] == "no-penalty"
    verdict = ident["line"] + ": drawn without its penalty"  # the data show none: none is drawn
    assert dw("report", "--runs", str(f), "--fit", str(fit), "--plots", str(plots)).returncode == 0
    rep = json.loads((plots / "report.json").read_text())
    (fig,) = [x for x in rep["figures"] if x["file"] == "loss_vs_depth.png"]
    assert fig["caption"].endswith("; " + verdict)
