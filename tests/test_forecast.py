"""The early warning: a run's final loss forecast from its curve so far (fit/forecast.py), and
`dw status` showing it (fit/run_forecast.py, cli/status.py).  No training here."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from depthwidth.config.node import nodes
from depthwidth.core import store
from depthwidth.core.atomic import write_json
from depthwidth.fit import run_forecast
from depthwidth.fit.forecast import Forecast, Schedule, flag, forecast
from tests.helpers import REPO, dw_in_process

T = 1e6  # tokens of the synthetic runs
E, B, BETA = 2.0, 40.0, 0.3  # their curve: E + B·t^-β


def _power_curve(seed: int, n: int = 30, sigma: float = 0.03):
    """The first half of a constant-lr run's curve, n points with Gaussian noise."""
    rng = np.random.default_rng(seed)
    t = np.linspace(T / 60, T / 2, n)
    return t, E + B * t**-BETA + rng.normal(0, sigma, n)


def test_the_first_half_of_a_known_curve_forecasts_its_end():
    t, y = _power_curve(seed=0)  # one curve; how often an interval misses is the next test's
    f = forecast(t, y, T)
    truth = E + B * T**-BETA
    assert f.lo <= truth <= f.hi and abs(f.mean - truth) < 0.05
    assert f.decay == "none" and f.n_points == 30 and f.tokens_used == t[-1]


def test_interval_coverage_over_100_synthetic_curves_is_near_nominal():
    """95% intervals over 100 noisy curves (seeds 0..99) cover the true end 85–99 times: an
    interval from the curve's fit alone, or one ignoring the refits' (β, a0), would cover far
    fewer; one padded for safety, all 100."""
    truth = E + B * T**-BETA
    covered = sum(f.lo <= truth <= f.hi for f in (forecast(*_power_curve(s), T, seed=s) for s in range(100)))
    assert 85 <= covered <= 99, covered


def _steps_schedule(kind: str, steps: int = 1000, warm: int = 20):
    """{"tokens", "lr"} per step of a cosine or WSD (20% decay) run of ``steps`` steps to T tokens."""
    s = np.arange(steps)
    lr = np.minimum(1.0, (s + 1) / warm)
    if kind == "cosine":
        lr = np.where(s < warm, lr, 0.1 + 0.45 * (1 + np.cos(np.pi * (s - warm) / (steps - warm))))
    else:
        lr = np.where(s < 0.8 * steps, lr, 1 + (0.1 - 1) * np.minimum(1, (s - 0.8 * steps + 1) / (0.2 * steps)))
    return {"tokens": T / steps * (s + 1), "lr": 3e-4 * lr}


def test_a_cosine_run_fits_its_annealing_gain_from_the_curve():
    """Half-way through a cosine the lr has fallen by 45%: the decay gain C is fitted, not ruled."""
    sched = _steps_schedule("cosine")
    S = Schedule(sched, T)

    def truth(t):
        return E + B * S.area(t) ** -BETA - 0.15 * S.annealed(t)

    rng = np.random.default_rng(7)
    t = np.arange(10, 501, 10) * T / 1000
    f = forecast(t, truth(t) + rng.normal(0, 0.03, len(t)), T, sched)
    assert f.decay == "fitted" and f.lo <= truth(T) <= f.hi


def test_wsd_stable_phase_takes_the_decay_gain_from_the_rule():
    """Before a WSD decay the curve cannot show its gain: the forecast says "rule", its middle is
    the constant-lr extrapolation and its band reaches down to twice the progress forgone."""
    sched = _steps_schedule("wsd")
    t, y = _power_curve(seed=1, sigma=0.0)
    f = forecast(t, y, T, sched)
    S = Schedule(sched, T)
    area_only = E + B * S.area(T) ** -BETA
    flat = E + B * (S.area(t[-1]) + T - t[-1]) ** -BETA
    assert f.decay == "rule"
    assert f.mean == pytest.approx(flat, abs=0.01) and f.hi >= area_only - 0.01 and f.lo <= 2 * flat - area_only + 0.01


@pytest.mark.parametrize(
    "n, upto, why",
    [(7, 0.5, "7 points"), (30, 0.1, "10% of the tokens"), (0, 0.5, "no points")],
)
def test_too_little_curve_gives_no_forecast(n, upto, why):
    t = np.linspace(T * upto / max(n, 1), T * upto, n)
    assert forecast(t, E + B * t**-BETA, T) is None, why


def test_warmup_points_do_not_count():
    """Points before twice the warm-up are not fitted: 10 points of which 3 fall there are too few."""
    sched = _steps_schedule("cosine", warm=100)  # warm-up ends at 1e5 tokens: the fit starts at 2e5
    t = np.linspace(0.05, 0.5, 10) * T
    assert forecast(t, E + B * t**-BETA, T, sched) is None
    assert forecast(np.linspace(0.2, 0.5, 10) * T, E + B * np.linspace(0.2, 0.5, 10) ** -BETA, T, sched) is not None


@pytest.mark.parametrize(
    "lo, hi, law, want",
    [
        (2.0, 2.2, (2.1, 2.3), False),  # overlapping
        (2.0, 2.2, (2.2, 2.3), False),  # touching
        (2.0, 2.2, (2.25, 2.4), True),  # the law expects worse: the run is better than it should be
        (2.5, 2.7, (2.1, 2.3), True),  # the run heads for a worse loss than the law allows
        (2.0, 2.2, (None, None), None),  # no law prediction yet
    ],
)
def test_flag_is_disjoint_intervals(lo, hi, law, want):
    f = Forecast(
        mean=(lo + hi) / 2,
        lo=lo,
        hi=hi,
        level=0.95,
        form="",
        decay="none",
        n_points=10,
        tokens_used=1.0,
        total_tokens=2.0,
        params={},
    )
    assert flag(f, *law) is want
    assert flag(f.to_dict(), *law) is want
    assert flag(None, 2.0, 2.1) is None


# -- dw status --------------------------------------------------------------------------------

STEPS, BATCH, SEQ = 200, 4, 32  # 128 tokens a step
RUN_OVERRIDES = [
    "model=vwt",
    "data=pydoc",
    f"train.steps={STEPS}",
    f"train.batch_size={BATCH}",
    f"train.seq_len={SEQ}",
    "optim.schedule=wsd",
    "train.log_every=5",
]


def _run_dir(root, sweep, rid, steps_done, state, tmp_cfg):
    """A run directory as the trainer writes it: config.yaml (the resolved config and run id),
    metrics.jsonl (a line every 5 steps: step, tokens, loss, lr, grad_norm, tokens_per_s, mfu)
    and summary.json."""
    from depthwidth.train import optim

    rd = root / sweep / rid
    rd.mkdir(parents=True)
    (rd / "config.yaml").write_text(yaml.safe_dump({**tmp_cfg, "run_id": rid}))
    per_step = BATCH * SEQ
    rng = np.random.default_rng(len(rid) + steps_done)
    lines = []
    for step in range(5, steps_done + 1, 5):
        tokens = step * per_step
        lr = optim.lr_at(step - 1, STEPS, nodes(tmp_cfg).optim, per_step)
        loss = 2.0 + 6.0 * tokens**-0.3 + rng.normal(0, 0.02)
        lines.append(
            {
                "step": step,
                "tokens": tokens,
                "loss": loss,
                "lr": lr,
                "grad_norm": 1.0,
                "tokens_per_s": 1000.0,
                "mfu": None,
            }
        )
    (rd / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    write_json(
        rd / "summary.json",
        {
            "run_id": rid,
            "sweep": sweep,
            "status": state,
            "tokens": steps_done * per_step,
            "tokens_total": STEPS * per_step,
            "steps": steps_done,
            "final_val_loss": 2.3 if state == "done" else None,
            "last_loss": lines[-1]["loss"] if lines else None,
        },
    )
    return rd


@pytest.fixture(scope="module")
def resolved_config():
    from depthwidth.config.compose import compose
    from depthwidth.config.node import plain

    return plain(compose(RUN_OVERRIDES))


@pytest.fixture
def small_store(tmp_path, monkeypatch, resolved_config):
    """Sweep ``s``: a running run half-way (100 of 200 steps: 20 points), a running run just
    started (20 steps: 4 points) and a finished run, with local task files saying so."""
    monkeypatch.setenv("DW_RUNS", str(tmp_path))
    sub = tmp_path / "s" / "jobs" / "sub"
    sub.mkdir(parents=True)
    runs = [("halfway00000", 100, "running"), ("juststarted0", 20, "running"), ("finished0000", STEPS, "done")]
    events = []
    for i, (rid, done, state) in enumerate(runs):
        rd = _run_dir(tmp_path, "s", rid, done, state, resolved_config)
        jid = f"local-sub_{i}"
        events += [
            {
                "event": "submit",
                "run_id": rid,
                "job_id": jid,
                "launcher": "local",
                "run_dir": str(rd),
                "tokens_total": STEPS * BATCH * SEQ,
            },
            {"event": "start", "run_id": rid, "job_id": jid},
        ]
        task = (
            {"job_id": jid, "state": "running", "pid": os.getpid()}
            if state == "running"
            else {"job_id": jid, "state": "completed"}
        )
        write_json(sub / f"task-{i}.json", task)
    store.append_events("s", events)
    return tmp_path


def test_status_table_shows_the_forecast_of_running_runs(small_store, capsys):
    code, out, err = dw_in_process(capsys, "status", "s")
    assert code == 0, err
    assert "forecast [95%]" in out
    rows = {ln.split("│")[1].strip(): ln for ln in out.splitlines() if ln.startswith("│")}
    assert "[" in rows["halfway00000"] and " train" in rows["halfway00000"]  # 2.xxx [lo, hi] train
    assert "—" in rows["juststarted0"]  # 4 points: too few
    assert "[" not in rows["finished0000"]  # finished runs only with --backtest
    assert "final val loss" not in out and "law [95%]" not in out


def test_status_json_has_the_forecast_keys(small_store, capsys):
    code, out, _ = dw_in_process(capsys, "status", "s", "--json")
    assert code == 0
    by = {r["run_id"]: r for r in json.loads(out)["runs"]}
    for r in by.values():
        assert {"forecast", "forecast_note", "law_pred", "flag"} <= set(r)
    f = by["halfway00000"]["forecast"]
    assert {"mean", "lo", "hi", "level", "form", "decay", "curve", "n_points", "params"} <= set(f)
    assert f["curve"] == "train" and f["decay"] == "rule" and f["lo"] <= f["mean"] <= f["hi"] and f["level"] == 0.95
    assert by["juststarted0"]["forecast"] is None and "needs 8" in by["juststarted0"]["forecast_note"]
    assert by["finished0000"]["forecast"] is None and by["finished0000"]["forecast_note"] is None
    assert by["halfway00000"]["law_pred"] is None and by["halfway00000"]["flag"] is None


def test_backtest_forecasts_finished_runs_beside_their_final_loss(small_store, capsys):
    code, out, _ = dw_in_process(capsys, "status", "s", "--backtest", "0.5")
    assert code == 0 and "final val loss" in out
    row = next(ln for ln in out.splitlines() if ln.startswith("│ finished0000"))
    assert "[" in row and "2.3000" in row
    code, out, _ = dw_in_process(capsys, "status", "s", "--backtest", "0.5", "--json")
    f = next(r for r in json.loads(out)["runs"] if r["run_id"] == "finished0000")["forecast"]
    assert f["tokens_used"] <= 0.5 * STEPS * BATCH * SEQ
    code, _, err = dw_in_process(capsys, "status", "s", "--backtest", "1.5")
    assert code == 2 and "--backtest" in err


def test_the_law_hook_sets_the_flag(small_store, capsys, monkeypatch):
    """Where fit/predict.py will plug in: a law interval far from the forecast flags the run."""
    monkeypatch.setattr(run_forecast, "law_prediction", lambda sweep, row: {"mean": 9.0, "lo": 8.9, "hi": 9.1})
    code, out, _ = dw_in_process(capsys, "status", "s", "--json")
    by = {r["run_id"]: r for r in json.loads(out)["runs"]}
    assert by["halfway00000"]["flag"] is True and by["halfway00000"]["law_pred"]["lo"] == 8.9
    assert by["juststarted0"]["flag"] is None  # no forecast: nothing to compare
    code, out, _ = dw_in_process(capsys, "status", "s")
    assert "law [95%]" in out and "FLAG" in out


def test_status_with_a_forecast_does_not_import_torch(small_store):
    code = (
        "import sys\nfrom depthwidth.cli import main\ntry:\n    main(['status', 's'])\nexcept SystemExit:\n    pass\n"
        "print('MODS', 'torch' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, env=dict(os.environ))
    assert "forecast [95%]" in p.stdout and p.stdout.strip().endswith("MODS False"), p.stdout + p.stderr
