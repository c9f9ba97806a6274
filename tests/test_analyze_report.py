"""`dw report`'s "inside the models" section from analysis.json files planted in the
hand-written store of tests/report_store.py (no training: every number is known here)."""

from __future__ import annotations

import json

import pytest

from depthwidth.core.atomic import write_json
from depthwidth.measure.doc import SCHEMA
from tests import report_store as rs
from tests.helpers import dw

KEYS = (
    "entropy_prefix",
    "entropy_full",
    "mlp_density",
    "mlp_dead",
    "mlp_balance",
    "lens_ce",
    "lens_target_prob",
    "lens_entropy",
    "lens_kl_final",
    "lens_kl_prev",
)
UNIFORM = {
    "widths": [64] * 4,
    "entropy_prefix": [0.8, 0.1, 0.15, 0.7],
    "mlp_dead": [0.0, 0.3, 0.2, 0.0],
    "lens_ce": [3.0, 2.9, 2.55, 2.5],
    "lens_kl_prev": [0.5, 0.2, 0.4, 0.05],
}
X = {
    "widths": rs.SHAPE_WIDTHS["x"],
    "entropy_prefix": [0.85, 0.5, 0.45, 0.8],
    "mlp_dead": [0.0, 0.05, 0.1, 0.0],
    "lens_ce": [2.9, 2.45, 2.42, 2.4],
    "lens_kl_prev": [0.3, 0.1, 0.02, 0.01],
}


def _doc(p: dict) -> dict:
    layers = [
        {"layer": i + 1, "width": w, **{k: p.get(k, [0.5] * 4)[i] for k in KEYS}} for i, w in enumerate(p["widths"])
    ]
    return {
        "schema": SCHEMA,
        "step": 20,
        "widths": p["widths"],
        "eval_loss": p["lens_ce"][-1],
        "layers": layers,
        "eval": {"tokens": 8192},
        "options": {},
    }


@pytest.fixture()
def store(tmp_path):
    rs.build(tmp_path, "t")
    write_json(tmp_path / "t" / "u4x64s1" / "analysis.json", _doc(UNIFORM))
    write_json(tmp_path / "t" / "shape-x" / "analysis.json", _doc(X))
    return tmp_path


def _inside(root):
    from depthwidth import report

    rep = report.build("t", root=str(root))
    return {r["shape"]: r for r in rep["tables"]["inside"].rows}, rep["tables"]["inside_claims"].rows


def test_per_shape_table_from_the_planted_analyses(store):
    rows, _ = _inside(store)
    assert list(rows) == ["uniform", "x"]
    u, x = rows["uniform"], rows["x"]
    assert (u["min_entropy"], u["min_entropy_layer"], x["min_entropy"], x["min_entropy_layer"]) == (0.1, 2, 0.45, 3)
    # uniform: every layer equally narrow, so the middle one (2 of 4); x: its bottleneck (the first 40)
    assert (u["narrowest_layer"], u["dead_narrowest"], x["narrowest_layer"], x["dead_narrowest"]) == (2, 0.3, 2, 0.05)
    assert u["dead_middle"] == pytest.approx(0.25) and x["dead_middle"] == pytest.approx(0.075)
    assert (u["lens_converged_layer"], x["lens_converged_layer"]) == (3, 2)  # within 0.1 nats of the final CE
    assert (u["max_kl_prev"], x["max_kl_prev"]) == (0.4, 0.1)
    assert (u["width"], u["depth"], u["runs"]) == (64, 4, 1)


def _runs(p: dict, shape: str, n: int, step: float = 0.004) -> list[dict]:
    """``n`` analysed runs of one shape: ``p``'s profile, each seed's measures shifted by a few thousandths."""
    out = []
    for k in range(n):
        d = _doc({**p, **{key: [v + step * (k - 1) for v in p[key]] for key in ("entropy_prefix", "lens_kl_prev")}})
        out.append({"run": f"{shape}{k}", "state": "done", "shape": shape, "depth": 4, "width": 64, "doc": d})
    return out


def _claims_of(u: dict, x: dict, n: int = 3) -> list[dict]:
    from depthwidth.report.inside import tables

    return tables(_runs(u, "uniform", n) + _runs({**x, "widths": rs.SHAPE_WIDTHS["x"]}, "x", n))["inside_claims"].rows


def test_every_claim_gets_a_verdict_from_three_runs_of_each_shape():
    claims = _claims_of(UNIFORM, X)
    assert [c["verdict"] for c in claims] == ["supported"] * 5, claims
    assert "0.100" in claims[0]["measured"] and "p = 0.05" in claims[4]["measured"]
    # the opposite numbers: x collapses, uniform does not; no valley in the uniform model: nothing for x to avoid
    claims = _claims_of({**X, "widths": [64] * 4}, UNIFORM)
    assert [c["verdict"] for c in claims] == ["not supported", "not measurable on this sweep"] + ["not supported"] * 3
    x_collapses = {**UNIFORM, "entropy_prefix": [0.8, 0.05, 0.1, 0.7]}
    assert _claims_of(UNIFORM, x_collapses)[1]["verdict"] == "not supported"


def test_one_run_of_each_shape_supports_no_claim(store):
    """One run a shape cannot tell a difference (or a level) from its seed: every claim is not measurable and
    says why (before: a difference of means of one run each was "supported", and a × model planted identical
    to uniform was "supported" in 41-62% of tables; benchmarks/bench_verdicts.py, kind inside)."""
    _, claims = _inside(store)
    assert [c["verdict"] for c in claims] == ["not measurable on this sweep"] * 5
    assert "too few to tell" in claims[0]["measured"] and "3 runs of each can" in claims[4]["measured"]
    # two runs of each: a permutation test cannot reach 5% (1/6), three can (1/20)
    assert [c["verdict"] for c in _claims_of(UNIFORM, X, n=2)][2:] == ["not measurable on this sweep"] * 3


def test_a_difference_within_seed_scatter_is_not_supported():
    """× planted like uniform, its seeds' values interleaved with uniform's: not supported (p > 0.05)."""
    u = _runs(UNIFORM, "uniform", 3, step=0.05)
    x = _runs({**UNIFORM, "widths": rs.SHAPE_WIDTHS["x"], "lens_kl_prev": [0.5, 0.2, 0.39, 0.05]}, "x", 3, step=0.05)
    from depthwidth.report.inside import tables

    smooth = tables(u + x)["inside_claims"].rows[4]
    assert smooth["verdict"] == "not supported" and "p = 0.35" in smooth["measured"], smooth


def test_without_an_x_analysis_the_comparisons_are_not_measurable(store):
    (store / "t" / "shape-x" / "analysis.json").unlink()
    rows, claims = _inside(store)
    assert list(rows) == ["uniform"]
    assert [c["verdict"] for c in claims] == ["not measurable on this sweep"] * 5


def test_no_analyses_no_inside_tables(tmp_path):
    from depthwidth import report

    rs.build(tmp_path, "t")
    assert "inside" not in report.build("t", root=str(tmp_path))["tables"]


def test_report_draws_the_inside_figures(store, tmp_path):
    out = tmp_path / "figs"
    p = dw("report", "t", "--root", str(store), "--plots", str(out), "--format", "json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    files = {f["file"] for f in rep["figures"]}
    assert {"entropy.png", "mlp_dead.png", "logit_lens.png", "entropy_training.png"} <= files, rep["notes"]
    for f in ("entropy.png", "mlp_dead.png", "logit_lens.png", "entropy_training.png"):
        assert (out / f).stat().st_size > 10_000
    md = (out / "report.md").read_text()
    assert "The paper's claims about the inside of the models" in md and "| not measurable on this sweep |" in md


def test_the_inside_section_keeps_dw_report_torch_free(store):
    import subprocess
    import sys

    from tests.helpers import REPO

    code = (
        "import sys\nfrom depthwidth.cli import main\ntry:\n    main(['report', 't', '--root', sys.argv[1], "
        "'--format', 'json'])\nexcept SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    p = subprocess.run([sys.executable, "-c", code, str(store)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert '"inside_claims"' in p.stdout


def test_a_dead_fraction_gap_of_a_few_units_is_no_finding(store):
    """uniform 0.001 vs × 0.000 dead in the middle layers (the demo's numbers) is not "supported"
    (before: any gap > 0 was); 1% of the units or more is (three runs of each)."""
    tiny = {**UNIFORM, "mlp_dead": [0.0, 0.001, 0.001, 0.0]}
    write_json(store / "t" / "u4x64s1" / "analysis.json", _doc(tiny))
    write_json(store / "t" / "shape-x" / "analysis.json", _doc({**X, "mlp_dead": [0.0] * 4}))
    dead = _inside(store)[1][2]
    assert dead["verdict"] == "not measurable on this sweep" and "a gap under 1% of the units" in dead["measured"]
    assert _claims_of({**UNIFORM, "mlp_dead": [0.0, 0.02, 0.02, 0.0]}, {**X, "mlp_dead": [0.0] * 4})[2]["verdict"] == (
        "supported"
    )


def test_figures_say_which_line_is_which_and_keep_their_axes_honest(store, tmp_path, monkeypatch):
    """mlp_dead's fractions start at 0 (before: below 0), layer axes tick whole layers (before: 2.5),
    every entropy_training line is named (before: 2 of them), loss_vs_flops labels each run L×W."""
    from depthwidth import report
    from depthwidth.report import figs, inside_figs
    from depthwidth.report.load import load

    kept = {}
    real_save = figs._save

    def keep(plt, fig, out, file, title, caption):
        kept[file] = fig
        return real_save(plt, fig, out, file, title, caption)

    monkeypatch.setattr(figs, "_save", keep)
    data = load("t", root=str(store))
    rep = report.tables.build(data)
    plt = figs._plt()
    fig = inside_figs.mlp_dead(plt, data, rep, tmp_path)[0]
    dead_ax = fig.axes[0]
    assert dead_ax.get_ylim()[0] == 0.0 and all(float(t).is_integer() for t in dead_ax.get_xticks())
    fig = inside_figs.entropy_training(plt, data, rep, tmp_path)[0]
    for ax in fig.axes:
        assert len(ax.get_legend().get_texts()) == len(ax.get_lines())
    figs.loss_vs_flops(plt, data, rep, tmp_path)
    labels = {t.get_text() for t in kept["loss_vs_flops.png"].axes[0].texts}
    assert {"2×32", "4×64", "6×64"} <= labels
    figs.shape_profiles(plt, data, rep, tmp_path)
    assert all(float(t).is_integer() for t in kept["shape_profiles.png"].axes[0].get_xticks())


def test_a_one_off_run_of_another_config_is_not_averaged_into_the_inside_table(store):
    """``dw sweep t train.steps=1000 --only ...`` after the sweep: its 4x64 run is set apart in the
    loss tables, and its analysis.json is not averaged with the sweep's 4x64 one either."""
    from depthwidth.core.atomic import append_jsonl

    d = store / "t"
    write_json(d / "u4x64-long" / "summary.json", rs.summary("u4x64-long", 4, 64, 1))
    write_json(d / "u4x64-long" / "analysis.json", _doc({**UNIFORM, "entropy_prefix": [0.9, 0.6, 0.6, 0.9]}))
    append_jsonl(
        d / "manifest",
        [
            {
                "event": "submit",
                "run_id": "u4x64-long",
                "run_dir": str(d / "u4x64-long"),
                "launcher": "local",
                "overrides": [
                    "model.depth=4",
                    "model.width=64",
                    "model.shape=uniform",
                    "run.seed=1",
                    "train.steps=1000",
                ],
                "job_id": "local-y_0",
                "label": "grid",
                "ref": None,
                "tokens_total": 10000,
                "index": 0,
            },
            {"event": "start", "run_id": "u4x64-long", "job_id": "local-y_0", "restart": 0},
        ],
    )
    write_json(d / "jobs" / "y" / "task-0.json", {"job_id": "local-y_0", "state": "completed"})
    rows, _ = _inside(store)
    assert (rows["uniform"]["runs"], rows["uniform"]["min_entropy"]) == (1, 0.1)  # before: 2 runs, 0.35
