"""The run store's read side and ``dw fit NAME`` end to end on a fake store (real files)."""

import json
import math

import numpy as np
import pytest

from tests.planted import PLANTED
from depthwidth.fit.laws import get_law
from depthwidth.track.run_source import probe_profiles, run_table
from tests.helpers import dw

TAU_K, TAU_P = 0.5, 0.44  # planted gradient persistence: tau(W) = 0.5 * W^0.44


def _profile(depth, width, noise, rng):
    tau = TAU_K * width**TAU_P
    dist = (depth - 1) - np.arange(depth)
    g = 3.0 * np.exp(-dist / tau) * np.exp(rng.normal(0, noise, depth))
    return [float(x) for x in g]


def make_store(root, name="toy", seeds=2, diverged=True, probes=True):
    """A sweep of real run directories: summary.json (+ probes.jsonl) per run."""
    law = get_law("depth-delusion", dcrit="log")
    truth = PLANTED["depth-delusion[log]"]
    rng = np.random.default_rng(0)
    sweep = root / name
    runs = []
    for w in (64, 128, 256, 512):
        for d in (2, 4, 8, 16, 32):
            for s in range(seeds):
                N = 12 * d * w * w
                toks = [int(f * max(20 * N, 2e8)) for f in (0.25, 0.5, 1.0)]
                pts = {"params": [N] * 3, "tokens": toks, "depth": [d] * 3, "width": [w] * 3, "loss": [1.0] * 3}
                L = law.predict(truth, pts) * np.exp(rng.normal(0, 0.003, 3))
                rid = f"w{w}d{d}s{s}"
                runs.append(
                    dict(
                        run_id=rid,
                        sweep=name,
                        status="done",
                        reason=None,
                        final_val_loss=float(L[-1]),
                        tokens=toks[-1],
                        steps=1000,
                        params=N,
                        params_non_embedding=N,
                        flops_per_token=6.0 * N,
                        kv_bytes_per_token=0,
                        depth=d,
                        width=w,
                        widths=[w] * d,
                        shape="uniform",
                        seed=s,
                        budgets=[
                            {"tokens": t, "step": 100 * (i + 1), "val_loss": float(x)}
                            for i, (t, x) in enumerate(zip(toks, L))
                        ],
                        bayes_loss=None,
                        wall_time_s=1.0,
                        device="cpu",
                    )
                )
    if diverged:
        runs.append(
            {
                **runs[0],
                "run_id": "boom",
                "status": "diverged",
                "reason": "loss is nan",
                "final_val_loss": None,
                "budgets": [{"tokens": 1000, "step": 1, "val_loss": None}],
            }
        )
    runs.append(
        {
            **runs[1],
            "run_id": "nobudget",
            "budgets": [],
            "final_val_loss": runs[1]["budgets"][-1]["val_loss"],
            "seed": 7,
        }
    )
    for r in runs:
        d = sweep / r["run_id"]
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(r))
        if probes and r["status"] == "done":
            lines = [
                {"step": st, "tokens": st * 1000, "grad_norm": {"block": _profile(r["depth"], r["width"], 0.02, rng)}}
                for st in (200, 1000)
            ]
            (d / "probes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (sweep / "not_a_run").mkdir()  # directories without summary.json are ignored
    return sweep


def test_run_table_has_one_row_per_budget_point(tmp_path):
    sweep = make_store(tmp_path)
    df = run_table(sweep)
    assert list(df.columns[:12]) == [
        "run",
        "params",
        "params_non_embedding",
        "params_active",
        "tokens",
        "loss",
        "depth",
        "width",
        "flops",
        "seed",
        "shape",
        "status",
    ]
    assert (df["params_non_embedding"].dropna() == df["params"].dropna()).all()  # the store wrote N for both
    assert df["params_active"].isna().all() and not df["simulated"].any()  # summaries without them
    assert (df.groupby("run").size().drop(["boom", "nobudget"]) == 3).all()
    nb = df[df.run == "nobudget"]
    assert len(nb) == 1 and nb["loss"].iloc[0] > 0  # empty budgets: final_val_loss at tokens
    boom = df[df.run == "boom"]
    assert boom["status"].iloc[0] == "diverged" and math.isnan(boom["loss"].iloc[0])
    r = df[df.run == "w64d2s0"].iloc[-1]
    assert r["flops"] == pytest.approx(6.0 * r["params"] * r["tokens"])
    assert df.attrs["unreadable"] == []


def test_unreadable_summaries_are_listed_not_fatal(tmp_path):
    sweep = make_store(tmp_path, seeds=1, diverged=False, probes=False)
    (sweep / "w64d2s0" / "summary.json").write_text("{torn")
    df = run_table(sweep)
    assert df.attrs["unreadable"] == ["w64d2s0"]
    assert "w64d2s0" not in set(df.run)
    assert len(run_table(tmp_path / "missing")) == 0


def test_probe_profiles(tmp_path):
    sweep = make_store(tmp_path, seeds=1)
    prof = probe_profiles(sweep)
    assert len(prof) == 20 + 1  # done runs (incl. nobudget) have probes; the diverged one does not
    p = next(x for x in prof if x["run"] == "w128d8s0")
    assert p["width"] == 128 and p["depth"] == 8 and [r["step"] for r in p["probes"]] == [200, 1000]
    assert len(p["probes"][1]["grad_norm"]["block"]) == 8


def test_dw_fit_sweep_end_to_end(tmp_path):
    make_store(tmp_path / "runs")
    p = dw(
        "fit",
        "toy",
        "--root",
        str(tmp_path / "runs"),
        "--law",
        "depth-delusion",
        "--bootstrap",
        "30",
        "--max-starts",
        "400",
        "--json",
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)
    for k in ("law", "n", "params", "ci", "r2", "rmse", "objective", "excluded", "derived"):
        assert k in res
    assert res["law"] == "depth-delusion" and res["n"] == 121
    assert res["excluded"] == [{"run": "boom", "points": 1, "reason": "status diverged"}]
    assert res["r2"] > 0.99
    assert set(res["ci"]) == set(res["params"])
    lo, hi = res["ci"]["kappa"]
    assert lo <= res["params"]["kappa"] <= hi
    assert "seed_ci" not in res  # the seeds-only interval never covered: removed (#34)
    gp = res["gradient_persistence"]
    assert gp["tau_law"]["p"] == pytest.approx(TAU_P, abs=0.05)
    assert gp["tau_law"]["r2"] > 0.95
    assert gp["tau_law"]["p_ci"][0] <= TAU_P <= gp["tau_law"]["p_ci"][1]
    ref = res["derived"]["dcrit"]["reference"]["GPT-3"]
    assert ref["depth_over_dcrit"] == pytest.approx(96 / ref["dcrit"])
    written = json.loads((tmp_path / "runs" / "toy" / "fit.json").read_text())
    assert written["params"] == res["params"] and written["schema"] == "dw.fit/1"
    # the table view of the same fit
    t = dw(
        "fit",
        "toy",
        "--root",
        str(tmp_path / "runs"),
        "--law",
        "depth-delusion",
        "--bootstrap",
        "0",
        "--max-starts",
        "300",
        "--no-write",
        timeout=600,
    )
    assert t.returncode == 0, t.stderr
    assert "D_crit" in t.stdout and "excluded: boom" in t.stdout and "no intervals" in t.stdout
