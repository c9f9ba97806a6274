"""Does ``dw suggest`` reach the full grid's precision for less?  Rounds of design on planted worlds.

Candidates are the ``depth_delusion`` sweep's own space (608 at one seed: per block, its depths and
those between times its widths and those between; GPU-hours from the dry run's cost model on 80 GiB GPUs; the same code
``dw suggest`` uses);
the full grid is its 30 runs (22,360 GPU-hours).  For each planted world (the depth-delusion law,
log and power D_crit forms, D_crit moved by ``--shifts``, seed noise ``--noise``) and seed:

* grid: plant losses on the 30 runs, fit (``dw fit``'s pipeline, ``--bootstrap`` replicates) and
  take the target's 95% interval width: the precision to reach;
* design: round 0 from the published prior (``--first`` of the grid's GPU-hours), then rounds of
  fit -> ``design`` within ``--step`` of the grid's GPU-hours -> plant the picks' losses -> refit,
  up to ``--until`` of the grid's GPU-hours (default 10%);
* random: the same rounds with random candidates of the same GPU-hours.

Targets: D_crit at W = 512 and the compute-optimal width exponent W_exponent.  Reported per
target: GPU-hours until the interval is first as narrow as the grid's (median over worlds x seeds,
as a fraction of the grid's; never = not within ``--until``), the interval's width at ``--until``
against the grid's, and coverage of the final intervals (the planted value inside; adaptive
designs can bias intervals, and stopping at the first narrow interval would select overconfident
ones, so the rounds go on to ``--until``).  Target: the grid's precision at <= 50% of its
GPU-hours, coverage within 90-98%.

    python benchmarks/bench_design.py                        # 2 forms x 3 shifts x 2 noises x 3 seeds
    python benchmarks/bench_design.py --seeds 1 --shifts 1 --noise 0.01 --plot docs/design_bench.png

``--promise ROWS.jsonl``: is the interval ``dw suggest`` promises after its picks the one the refit
reports?  Per draw (form x shift x noise x seed): round 0 from the published prior (``--first`` of
the grid's GPU-hours) and round 1 from the fit of round 0's runs (``--step``); each round's promise
(``Design.width_after[-1]``) against the 95% interval the refit on the runs so far reports (``dw
fit``'s pipeline, ``--bootstrap`` replicates, the picks' losses planted afresh).  One row per draw
and round, appended as it ends (a rerun skips the draws the file has); the table gives the median
realized / promised ratio, its quartiles and 10-90% range per round kind, and the promise as it was
before #36 (the Kalman update of the ensemble's own replicates, from the trimmed interval) beside it.

    python benchmarks/bench_design.py --promise /tmp/promise.jsonl --seeds 4        # 48 draws
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

TARGETS = ("dcrit@512", "W_exponent")


def space() -> dict:
    """Candidates and the full grid of depth_delusion: law inputs and GPU-hours."""
    os.environ.setdefault("DW_RUNS", tempfile.mkdtemp(prefix="bench_design_"))  # an empty store
    from depthwidth.sweep.expand import expand
    from depthwidth.sweep.suggest import candidates, rows_of

    # one seed: a planted world's law is exact (no misfit), and replicates are dw suggest's to weigh, not the grid's
    runs, _ = candidates("depth_delusion", {"run.seed": [42]}, ["launcher=slurm"])
    grid = expand("depth_delusion", launcher_overrides=["launcher=slurm"], check_gpus=False).runs
    ids = [r.run_id for r in runs]
    return {
        "cand": rows_of(runs),
        "cost": [r.figures["gpu_hours"] for r in runs],
        "grid": [ids.index(r.run_id) for r in grid],  # the grid's runs are candidates too
    }


def _world(form: str, shift: float, noise: float):
    from depthwidth.simulate.world import Noise, world

    if form == "log":
        set_values = f"kappa={2.43 * shift}"
    else:
        set_values = f"c={0.981 * shift}"
    return world("depth-delusion", dcrit=form, set_values=set_values, noise=Noise(sigma=noise))


def _plant(w, rows: list[dict], seed: int) -> list[dict]:
    from depthwidth.simulate.world import losses

    if not rows:
        return []
    cols = {k: np.array([r[k] for r in rows], dtype=float) for k in ("depth", "width", "tokens")}
    cols["params"] = 12.0 * cols["depth"] * cols["width"] ** 2  # the world's N (12DW2)
    L = losses(w, cols, np.arange(len(rows)), seed)
    return [{**r, "loss": float(x), "run": f"s{seed}_{i}"} for i, (r, x) in enumerate(zip(rows, L))]


def _interval(table: list[dict], form: str, target: str, B: int, seed: int):
    """(ensemble, (lo, hi)) of the target after dw fit on ``table``; (None, None) when it cannot fit."""
    import pandas as pd

    from depthwidth.core.errors import BadInput
    from depthwidth.fit.pipeline import run_fit
    from depthwidth.fit.predict import ensemble_of, parse_target

    try:
        res = run_fit(
            runs=pd.DataFrame(table),
            law="depth-delusion",
            dcrit=form,
            bootstrap=B,
            max_starts=500,
            seed=seed,
            write=False,
        )
        ens = ensemble_of(res)
    except BadInput:
        return None, None
    t = parse_target(target, ens.law)
    v = t.values(ens, ens.theta)
    v = v[np.isfinite(v)]
    if len(v) < 10:
        return ens, None
    return ens, tuple(np.percentile(v, [2.5, 97.5]))


def _truth(w, target: str) -> float:
    from depthwidth.fit.predict import Ensemble, parse_target

    ens = Ensemble(w.law, w.law.internal(w.values), w.law.internal(w.values)[None, :], {"run": 0.0, "point": 0.0})
    return float(parse_target(target, w.law).values(ens, ens.theta)[0])


def one(job: dict) -> dict:
    """One world, seed and target: the grid's interval, then design and random rounds."""
    from depthwidth.fit.laws import get_law
    from depthwidth.fit.predict import design, parse_target
    from depthwidth.fit.prior import prior

    sp, form, shift, noise, seed, target, B = (
        job[k] for k in ("space", "form", "shift", "noise", "seed", "target", "B")
    )
    cand, cost = sp["cand"], np.asarray(sp["cost"])
    w = _world(form, shift, noise)
    truth = _truth(w, target)
    grid_rows = [cand[i] for i in sp["grid"]]
    grid_hours = float(cost[sp["grid"]].sum())
    _, gi = _interval(_plant(w, grid_rows, seed), form, target, B, seed)
    out = {k: job[k] for k in ("form", "shift", "noise", "seed", "target")}
    out.update(truth=truth, grid_hours=grid_hours, grid_width=None if gi is None else gi[1] - gi[0])
    out["grid_covered"] = None if gi is None else bool(gi[0] <= truth <= gi[1])
    rng = np.random.default_rng(seed + 1000)
    for method in ("design", "random"):
        pool = np.ones(len(cand), dtype=bool)
        table: list[dict] = []
        hours, curve, reached, ens, iv = 0.0, [], None, None, None
        r = 0
        while hours < job["until"] * grid_hours:
            budget = job["first"] * grid_hours if r == 0 else job["step"] * grid_hours
            idx = np.flatnonzero(pool)
            if method == "design":
                src = prior(get_law("depth-delusion", dcrit=form), seed=seed) if ens is None else ens
                d = design(src, parse_target(target, src.law), [cand[i] for i in idx], cost[idx], budget=budget)
                picks = idx[d.picks]
            else:
                picks, spent = [], 0.0
                for i in rng.permutation(idx):
                    if spent + cost[i] <= budget:
                        picks.append(i)
                        spent += cost[i]
                picks = np.array(picks, dtype=int)
            if not len(picks):
                break
            pool[picks] = False
            hours += float(cost[picks].sum())
            table += _plant(w, [cand[i] for i in picks], seed * 1000 + r)
            ens_new, iv = _interval(table, form, target, B, seed)
            ens = ens_new if ens_new is not None else ens
            width = None if iv is None else iv[1] - iv[0]
            curve.append((hours, width))
            if reached is None and width is not None and out["grid_width"] is not None and width <= out["grid_width"]:
                reached = hours  # the first time it is as narrow as the grid's; the rounds go on to --until
            r += 1
        last = curve[-1][1] if curve else None
        out[method] = {
            "hours": hours,
            "width_ratio": None if last is None or not out["grid_width"] else last / out["grid_width"],
            "hours_to_grid": reached,
            "fraction": None if reached is None else reached / grid_hours,
            "curve": curve,
            "covered": None if iv is None else bool(iv[0] <= truth <= iv[1]),
            "runs": len(table),
        }
    return out


def _promises(ens, target: str, rows, cost, budget: float) -> tuple[list[int], float, float, float]:
    """(picks, the promise, the promise before #36, the interval now) of one design round."""
    from dataclasses import replace

    from depthwidth.fit.predict import _joint, design, parse_target

    t = parse_target(target, ens.law)
    d = design(ens, t, rows, cost, budget=budget)
    kalman = design(replace(ens, source="fit"), t, rows, cost, budget=budget)  # the ensemble's own update
    T, _, _ = _joint(ens, t, rows)
    lo, hi = np.percentile(T[:, 0], [2.5, 97.5])
    old = kalman.width_after[-1] * (hi - lo) / kalman.width_now  # from the trimmed replicates, as before
    return list(d.picks), float(d.width_after[-1]), float(old), float(d.width_now)


def promise_draw(job: dict) -> list[dict]:
    """Round 0 (prior) and round 1 (fit) of one planted world: promise against the refit's interval."""
    from depthwidth.fit.laws import get_law
    from depthwidth.fit.prior import prior

    sp, form, shift, noise, seed, target, B = (
        job[k] for k in ("space", "form", "shift", "noise", "seed", "target", "B")
    )
    cand, cost = sp["cand"], np.asarray(sp["cost"])
    grid_hours = float(cost[sp["grid"]].sum())
    w = _world(form, shift, noise)
    key = {k: job[k] for k in ("form", "shift", "noise", "seed", "target")}
    pool = np.ones(len(cand), dtype=bool)
    table: list[dict] = []
    ens = prior(get_law("depth-delusion", dcrit=form), seed=seed)
    out = []
    for r, frac in enumerate((job["first"], job["step"])):
        idx = np.flatnonzero(pool)
        picks, promised, old, now = _promises(ens, target, [cand[i] for i in idx], cost[idx], frac * grid_hours)
        chosen = idx[picks]
        pool[chosen] = False
        table += _plant(w, [cand[i] for i in chosen], seed * 1000 + r)
        new, iv = _interval(table, form, target, B, seed)
        got = None if iv is None else float(iv[1] - iv[0])
        out.append(
            {
                **key,
                "round": r,
                "from": "prior" if r == 0 else "fit",
                "runs": len(table),
                "picks": len(chosen),
                "now": now,
                "promised": promised if np.isfinite(promised) else None,
                "promised_before": old,
                "realized": got,
            }
        )
        if new is None:
            break
        ens = new
    return out


def promise_summary(rows: list[dict]) -> list[dict]:
    out = []
    for kind in ("prior", "fit"):
        rs = [r for r in rows if r["from"] == kind and r["realized"] is not None]
        for col, label in (("promised", "after #36"), ("promised_before", "before #36")):
            v = np.array([r["realized"] / r[col] for r in rs if r[col]])
            if not len(v):
                continue
            out.append(
                {
                    "from": kind,
                    "promise": label,
                    "draws": int(len(v)),
                    "not_determined": int(sum(1 for r in rs if not r[col])),
                    "median": float(np.median(v)),
                    "q25": float(np.percentile(v, 25)),
                    "q75": float(np.percentile(v, 75)),
                    "p10": float(np.percentile(v, 10)),
                    "p90": float(np.percentile(v, 90)),
                    "optimistic": float(np.mean(v > 1)),
                }
            )
    return out


def draws(a, sp, targets: list[str]) -> list[dict]:
    """One job per planted draw: every target, D_crit form, shift, noise level and seed asked for."""
    return [
        {
            "space": sp,
            "form": f,
            "shift": float(s),
            "noise": float(n),
            "seed": k,
            "target": t,
            "B": a.bootstrap,
            "first": a.first,
            "step": a.step,
        }
        for t in targets
        for f in a.forms.split(",")
        for s in a.shifts.split(",")
        for n in a.noise.split(",")
        for k in range(a.seeds)
    ]


def promise_main(a, sp) -> int:
    path = Path(a.promise)
    done = []
    if path.exists():
        done = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    have = {(r["form"], r["shift"], r["noise"], r["seed"], r["target"]) for r in done}
    target = a.targets.split(",")[0] if a.targets != ",".join(TARGETS) else "dcrit@512"
    jobs = draws(a, sp, [target])
    jobs = [j for j in jobs if (j["form"], j["shift"], j["noise"], j["seed"], j["target"]) not in have]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max(1, a.workers)) as ex, path.open("a") as fh:
        for rows in ex.map(promise_draw, jobs):
            for r in rows:
                fh.write(json.dumps(r) + "\n")
            fh.flush()
            done += rows
    print(f"{len(jobs)} draws run now in {time.perf_counter() - t0:.0f} s; {len(done)} rows in {path}")
    print("| round from | promise | draws | realized / promised: median | quartiles | 10-90% | optimistic |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for s in promise_summary(done):
        print(
            f"| {s['from']} | {s['promise']} | {s['draws']} | {s['median']:.2f} | {s['q25']:.2f}-{s['q75']:.2f} | "
            f"{s['p10']:.2f}-{s['p90']:.2f} | {s['optimistic']:.0%} |"
        )
    return 0


def summarize(results: list[dict]) -> dict:
    s = {}
    for t in TARGETS:
        rs = [r for r in results if r["target"] == t]
        if not rs:
            continue
        row = {"cases": len(rs), "grid_hours": rs[0]["grid_hours"]}
        for m in ("design", "random"):
            fr = [r[m]["fraction"] for r in rs]
            got = [f for f in fr if f is not None]
            wr = [r[m]["width_ratio"] for r in rs if r[m]["width_ratio"] is not None]
            row[m] = {
                "median_fraction": float(np.median([f if f is not None else np.inf for f in fr])),
                "reached": f"{len(got)}/{len(fr)}",
                "median_width_ratio_at_end": float(np.median(wr)) if wr else None,
                "coverage": float(np.mean([r[m]["covered"] for r in rs if r[m]["covered"] is not None] or [np.nan])),
            }
        row["grid_coverage"] = float(np.mean([r["grid_covered"] for r in rs if r["grid_covered"] is not None]))
        s[t] = row
    return s


def plot(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(TARGETS), figsize=(11, 4))
    for ax, t in zip(np.atleast_1d(axes), TARGETS):
        rs = [r for r in results if r["target"] == t]
        for m, c in (("design", "C0"), ("random", "C1")):
            for k, r in enumerate(rs):
                xs = [h / r["grid_hours"] for h, wd in r[m]["curve"] if wd is not None]
                ys = [wd / r["grid_width"] for h, wd in r[m]["curve"] if wd is not None and r["grid_width"]]
                ax.plot(xs[: len(ys)], ys, color=c, alpha=0.4, label=m if k == 0 else None)
        ax.axhline(1.0, color="k", lw=0.8, ls="--", label="full grid")
        ax.axvline(0.5, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GPU-hours / full grid's")
        ax.set_ylabel("95% interval width / full grid's")
        ax.set_title(t)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forms", default="log,power")
    ap.add_argument("--shifts", default="0.7,1,1.4", help="planted D_crit as a multiple of the paper's")
    ap.add_argument("--noise", default="0.005,0.01", help="seed-to-seed sigma of log loss")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--bootstrap", type=int, default=100)
    ap.add_argument("--first", type=float, default=0.01, help="round 0's GPU-hours, a fraction of the grid's")
    ap.add_argument("--step", type=float, default=0.02, help="each later round's GPU-hours, a fraction of the grid's")
    ap.add_argument("--until", type=float, default=0.1, help="rounds go on to this fraction of the grid's GPU-hours")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--plot", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--promise", default=None, help="measure the promise ratio; rows appended to this JSONL file")
    a = ap.parse_args()
    t0 = time.perf_counter()
    sp = space()
    if a.promise:
        return promise_main(a, sp)
    jobs = [{**j, "until": a.until} for j in draws(a, sp, a.targets.split(","))]
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers) as ex:
            results = list(ex.map(one, jobs))
    else:
        results = [one(j) for j in jobs]
    s = summarize(results)
    print(
        f"{'target':<12} {'cases':>5} {'grid GPU-h':>10} {'method':<7} {'to grid precision (median)':>27} "
        f"{'reached':>8} {f'width/grid at {a.until:.0%}':>18} {'coverage':>9}"
    )
    for t, row in s.items():
        for m in ("design", "random"):
            mf = row[m]["median_fraction"]
            frac = "never" if not np.isfinite(mf) else f"{mf:.1%} of grid"
            wr = row[m]["median_width_ratio_at_end"]
            print(
                f"{t:<12} {row['cases']:>5} {row['grid_hours']:>10,.0f} {m:<7} {frac:>27} {row[m]['reached']:>8} "
                f"{'—' if wr is None else f'{wr:.2f}':>18} {row[m]['coverage']:>9.0%}"
            )
        print(f"{t:<12} {'':>5} {'':>10} {'grid':<7} {'':>27} {'':>8} {'1.00':>18} {row['grid_coverage']:>9.0%}")
    print(f"{len(jobs)} cases in {time.perf_counter() - t0:.0f} s")
    if a.plot:
        plot(results, a.plot)
    doc = {"summary": s, "results": results, "args": vars(a)}
    if a.json:
        Path(a.json).write_text(json.dumps(doc, default=float))
    print(json.dumps({"summary": s}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
