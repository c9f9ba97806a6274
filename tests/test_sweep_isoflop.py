"""IsoFLOP sweep files: ``isoflop:`` -> one block per budget; width solved for fixed params."""

import textwrap

import pytest

from depthwidth.config.compose import compose
from depthwidth.config.identity import run_id
from depthwidth.core.errors import BadInput
from depthwidth.sweep import expand as sweep
from tests.hydra_oracle import hydra_compose
from depthwidth.sweep.isoflop import params_of
from tests.helpers import assert_bad_input, dw

# worst |params - target| / target over the shipped runs (measured): 7.1% (isoflop_depth,
# depth 48 at 1e19: one 64-wide quantum at W = 640 moves matmul params by ±10%), 11.9% (the
# CPU variant, depth 8 at W = 32, where one 8-wide quantum is 25% of the width)
WORST = {"isoflop_depth": 0.072, "isoflop_depth_cpu": 0.12}


@pytest.mark.parametrize("name", ["isoflop_depth", "isoflop_depth_cpu"])
def test_params_stay_within_the_quantum_rounding_of_the_target(name):
    doc = sweep.load_file(name)
    sw = sweep.expand(name)
    iso = doc["isoflop"]
    assert len(sw.runs) == len(iso["budgets"]) * len(iso["depths"]) and not sw.bad
    assert len(iso["budgets"]) >= 3 and len(iso["depths"]) >= 6
    groups, keys, count = doc["groups"], doc["fixed"], iso["count"]
    worst = 0.0
    for r in sw.runs:
        ref, f = r.ref, r.figures
        N, q = ref["target_params"], r.cfg.model.quantum
        P = params_of(groups, keys, f["depth"], f["width"], count)
        assert P == round(N * (1 + ref["params_error"]))
        # nearest multiple of the quantum: within half the step to either neighbouring width
        steps = [abs(params_of(groups, keys, f["depth"], f["width"] + s * q, count) - P) for s in (-1, 1)]
        assert abs(P - N) <= max(steps) / 2, (f["depth"], f["width"], P, N)
        assert f["width"] % q == 0 and r.label == f"C={ref['budget']:.0e}"
        assert f["tokens"] >= round(20 if name == "isoflop_depth" else 2) * N * 0.99  # T = k·N, fixed per budget
        worst = max(worst, abs(P - N) / N)
    assert worst <= WORST[name], worst
    per_budget = {}
    for r in sw.runs:
        per_budget.setdefault(r.ref["budget"], set()).add(r.figures["tokens"])
    assert all(len(t) == 1 for t in per_budget.values())  # every run of a budget trains on the same tokens


def test_cpu_variant_composes_like_hydra():
    for r in sweep.expand("isoflop_depth_cpu").runs:
        full = compose(r.overrides)
        assert r.run_id == run_id(full) == run_id(hydra_compose(r.overrides))


def test_dry_run_shows_the_flops_error_per_run():
    p = dw("sweep", "isoflop_depth_cpu", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "C err" in p.stdout and "N err" in p.stdout and "C=3e+11" in p.stdout


def _write(tmp_path, body):
    d = tmp_path / "sweeps"
    d.mkdir(exist_ok=True)
    (d / "iso.yaml").write_text(textwrap.dedent(body))
    return {"DW_SWEEPS": str(d), "DW_RUNS": str(tmp_path / "runs")}


BASE = """
groups: {model: vwt, data: pydoc}
fixed: {model.heads: 4, model.quantum: 8, model.shape: uniform, train.seq_len: 64, train.batch_size: 8}
"""


def test_size_axis_tokens_follow_from_c(tmp_path, monkeypatch):
    env = _write(
        tmp_path,
        BASE
        + textwrap.dedent("""\
    isoflop:
      budgets: [1e12]
      axis: size
      count: total
      sizes: [{model.depth: 2, model.width: 64}, {model.depth: 4, model.width: 96}]
    """),
    )
    monkeypatch.setenv("DW_SWEEPS", env["DW_SWEEPS"])
    sw = sweep.expand("iso")
    assert len(sw.runs) == 2
    for r in sw.runs:
        N = r.figures["params"]
        assert r.cfg.train.tokens == round(1e12 / (6 * N))


@pytest.mark.parametrize(
    "iso,needle",
    [
        ("{budgets: [1e12], axis: width, depths: [1, 2]}", "isoflop.axis"),
        ("{budgets: [], depths: [1, 2]}", "isoflop.budgets"),
        ("{budgets: [1e12], depths: [0, 2]}", "isoflop.depths"),
        ("{budgets: [-1], depths: [1, 2]}", "isoflop.budgets"),
        ("{budgets: [1e12], depths: [1], every: 2}", "unknown key 'every'"),
        ("{budgets: [1e12], depths: [1], count: all}", "isoflop.count"),
    ],
)
def test_bad_isoflop_blocks_are_bad_input(tmp_path, monkeypatch, iso, needle):
    env = _write(tmp_path, BASE + f"isoflop: {iso}\n")
    line = assert_bad_input(dw("sweep", "iso", "--dry-run", env=env))
    assert needle in line
    monkeypatch.setenv("DW_SWEEPS", env["DW_SWEEPS"])
    with pytest.raises(BadInput, match=needle.replace("'", ".")):
        sweep.expand("iso")
