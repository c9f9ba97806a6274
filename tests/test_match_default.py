"""Shapes are matched exactly by default (issue #26, items 1 and 13): the generic vwt
preset is uniform and `match: exact`, the demo's shapes are within 1% of their uniform
model, `dw shapes` warns when a shape is more than 1% off and takes --heads."""

import json

import pytest

from depthwidth.config.compose import compose
from depthwidth.core.errors import BadInput
from depthwidth.model import shapes
from depthwidth.model.accounting import count_params
from depthwidth.model.resolve import from_config
from tests.helpers import assert_bad_input, dw

FAMILIES = ("increasing", "decreasing", "diamond", "x")
# sweeps/demo.yaml's shapes block: model=vwt, 4 heads, quantum 8, 96 x 6, the pydoc bytes (V = 256)
DEMO = ["model=vwt", "data=pydoc", "model.heads=4", "model.quantum=8", "model.width=96", "model.depth=6"]


def _total(overrides):
    return count_params(from_config(compose(overrides).model))["total"]


@pytest.mark.parametrize("family", FAMILIES)
def test_the_demo_shapes_are_within_one_percent_of_the_uniform_model(family):
    uniform = _total([*DEMO, "model.shape=uniform"])
    spec = from_config(compose([*DEMO, f"model.shape={family}"]).model)
    assert len(set(spec.widths)) > 1
    assert abs(count_params(spec)["total"] / uniform - 1) <= shapes.MATCH_TOLERANCE
    assert not spec.extra.get("warning")  # within exact matching's own 0.5%


def test_the_demo_sweep_runs_its_shapes_at_matched_parameters():
    from depthwidth.sweep import expand

    runs = expand.expand("demo").runs
    base = [r for r in runs if (r.figures["shape"], r.figures["width"], r.figures["depth"]) == ("uniform", 96, 6)]
    assert len(base) == 1
    shaped = [r for r in runs if r.figures["shape"] != "uniform"]
    assert {r.figures["shape"] for r in shaped} == set(FAMILIES)
    for r in shaped:
        assert r.figures["params"] / base[0].figures["params"] == pytest.approx(1, abs=shapes.MATCH_TOLERANCE)


def test_the_vwt_preset_is_uniform_and_exact_the_paper_presets_keep_their_x_and_convention():
    m = compose(["model=vwt"]).model
    assert (m.shape, m.match) == ("uniform", "exact")
    spec = from_config(compose(["model=vwt", "model.depth=2"]).model)  # used to fail: "at least 3 for x"
    assert spec.widths == (960, 960)
    for preset in ("vwt_200m", "vwt_500m", "vwt_1b", "vwt_2b", "moe_1b3b"):
        m = compose([f"model={preset}"]).model
        assert (m.shape, m.match) == ("x", "vwt"), preset


def test_the_vwt_convention_stays_one_override_away():
    """The old default at the demo's size: 10% more parameters than uniform for x."""
    uniform = _total([*DEMO, "model.shape=uniform"])
    assert _total([*DEMO, "model.shape=x", "model.match=vwt"]) / uniform == pytest.approx(1.104, abs=0.001)


def test_the_tolerance_has_one_home():
    from depthwidth.report import tables

    assert tables.MATCH_TOLERANCE is shapes.MATCH_TOLERANCE == 0.01


def _warnings(proc):
    return [ln for ln in proc.stderr.splitlines() if "warning:" in ln]


def test_dw_shapes_warns_with_the_ratio_when_a_shape_is_more_than_one_percent_off():
    p = dw("shapes", "x", "-w", "128", "-d", "4", "--vocab", "257", "--match", "vwt", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["match"] == "vwt" and out["params_ratio"] == pytest.approx(0.9412, abs=1e-4)
    (line,) = _warnings(p)
    assert line.startswith("dw: warning: params ×uniform 0.941") and "--match exact" in line
    assert out["warning"] in line


def test_dw_shapes_matches_exactly_by_default_and_then_does_not_warn():
    p = dw("shapes", "diamond", "-w", "96", "-d", "6", "-q", "8", "-H", "4", "--vocab", "256", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["match"] == "exact" and out["heads"] == 4 and out["head_dim"] is None
    assert abs(out["params_ratio"] - 1) <= shapes.MATCH_TOLERANCE
    assert out["warning"] is None and _warnings(p) == []
    # the same widths `dw train` builds for the demo's diamond
    assert out["widths"] == list(from_config(compose([*DEMO, "model.shape=diamond"]).model).widths)
    assert all(w % 8 == 0 for w in out["widths"])  # 4 heads of an even size


def test_dw_shapes_heads_that_do_not_divide_a_width_name_it_and_suggest_heads():
    # the 16-head default cannot split the demo's x widths (multiples of 8)
    line = assert_bad_input(dw("shapes", "x", "-w", "96", "-d", "6", "-q", "8", "--vocab", "256"))
    assert "width of layer 1: 144" in line and "head count 16" in line
    assert "--heads (model.heads) 8, 4 or 2 would fit" in line and "--quantum" in line
    line = assert_bad_input(dw("shapes", "x", "-w", "96", "-d", "6", "-q", "8", "--heads", "5"))
    assert "width of layer 1: 96" in line and "head count 5" in line and "--heads" in line
    line = assert_bad_input(dw("shapes", "x", "-w", "96", "-d", "6", "--heads", "4", "--head-dim", "8"))
    assert "--heads" in line and "--head-dim" in line


def test_a_training_config_gets_the_same_hint():
    with pytest.raises(BadInput) as e:
        from_config(compose(["model=vwt", "model.shape=x", "model.width=96", "model.depth=6", "model.quantum=8"]).model)
    msg = str(e.value)
    assert "width of layer 1: 144" in msg and "model.heads" in msg and "\n" not in msg


def test_a_shape_off_its_match_is_warned_before_anything_trains(tmp_path):
    """The dry run and the submission say what dw train would warn of a run (here: a quantum too
    coarse for exact matching), in one line naming the runs, before anything trains."""
    from tests.helpers import dw

    (tmp_path / "off.yaml").write_text(
        "groups: {model: vwt, data: synthetic}\n"
        "fixed: {model.heads: 4, model.quantum: 32, train.steps: 4, train.seq_len: 32, train.batch_size: 4}\n"
        "axes:\n  model.shape: [uniform, x]\n  model.width: [64]\n  model.depth: [4]\n"
    )
    env = {"DW_SWEEPS": str(tmp_path), "DW_RUNS": str(tmp_path / "runs")}
    said = [ln for ln in dw("sweep", "off", "--dry-run", env=env).stderr.splitlines() if "warning" in ln]
    assert said == [
        "dw: warning: 1 of 2 runs (run 1): model.match=exact: widths rounded to multiples of 32 leave "
        "the parameters 24.20% off the uniform model (0.5% wanted); lower model.quantum"
    ]
