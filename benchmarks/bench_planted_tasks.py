"""dw's design against random picks on planted tasks in ScaleBench's style, unlike the three held.

An independent check of the default design (fit/design_rounds.checkpoint_design, fit/predict.design,
scored through fit/target_fit.fit_for_target) on tasks dw was not developed on.  Each task is planted
here from a fixed seed: a pool of runs with a cost each, a target region of larger runs beyond the
pool, checkpoint budgets as fractions of the pool's total cost.  The protocol, the design, the random
picks and the score (target-region R², clipped to [-1, 1]) are bench_scalebench's own functions,
imported (``dw_design``, ``random_order``, ``score``, ``_near_quarter``), not copied.  The fitted law
of every task is close to, but not, the planted form (a misfit, as real laws have).

* ``lr_bsz``: inputs N (params), D (tokens), lr, bsz; 2,000 runs, most small (cost 6·N·D).  Planted:
  a Chinchilla-like loss times (1 + an asymmetric penalty in ln lr: k·Δ²·exp(0.35·Δ), worse on the
  high side) plus a quadratic penalty in ln bsz; the best lr falls with N (slope -0.30 in ln N) and
  with D (-0.08 in ln D), the best bsz grows with D (0.45 in ln D).  Fitted: the power law plus a
  symmetric, additive quadratic in ln lr and ln bsz, the best lr drifting with ln N only, the best bsz
  with ln D (``a[1..6]``; 11 parameters).  Target: 40 runs of N 1.5–4e9, D 20–40 N, lr and bsz within
  ±0.4 (ln) of the planted optimum.  Budgets 1/5/10%.
* ``vocab``: inputs N (non-embedding params), V (vocabulary), D; 1,000 runs.  Planted: the data term
  reads characters, D·cpt(V), cpt growing with ln V (3.2 + 0.35·ln(V/3e4), saturating), and a penalty
  in ln V about V*(N) = 2.5e4·(N/1e8)^0.45 that is steeper for too small a vocabulary.  Fitted: the
  power law in N and D (tokens) plus a symmetric quadratic in ln V about a[2] + a[3]·ln N (8
  parameters).  Target: N 2–6e9, D = 20 N, V from 3e4 to 5e5.  Budgets 1/5/10%.
* ``moe_tiny``: inputs N (active params), G (experts), D; 60 runs (6 sizes × 5 expert counts × 2
  token ratios), cost 6·N·D·(1 + 0.03·G).  Planted: E + exp(d + a·ln N + b·ln Ĝ + c·ln N·ln Ĝ) +
  B·D^-β with Ĝ = G/(1 + G/96) saturating.  Fitted: the same form with ln G (7 parameters).  Target:
  N 2e9 and 5e9, G 1–64, D = 20 N.  Budgets 20/35/50% (the tiny pool's: the initial design's share and
  dw against random picks there).

Noise: log loss plus N(0, 0.005) (lr_bsz, vocab) or N(0, 0.003) (moe_tiny).  Reported per task and
budget: mean ± std of the R² over seeds for dw and random, runs picked, the share of the spend on the
pool's quarter nearest the target, and dw's stats (ensembles, RML, fallbacks, initial share).

    python benchmarks/bench_planted_tasks.py --seeds 3 --workers 1
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import numpy as np  # noqa: E402

import bench_scalebench as sb  # noqa: E402

TASK_SEED = 20261205  # the planted worlds are fixed; --seeds varies the picks and the design's bootstrap


# ---------------------------------------------------------------------------------------------- laws

LAWS = {
    "lr_bsz": {
        "name": "lr_bsz_quadratic",
        "define": {
            "n": "log(N/1e8)",
            "x": "log(lr)",
            "y": "log(bsz)",
            "d": "log(D/1e10)",
        },
        "formula": ("E + A*exp(-alpha*n) + B*exp(-beta*d) + a[1]*(x - a[2] - a[3]*n)**2 + a[4]*(y - a[5] - a[6]*d)**2"),
        "params": {
            "E": {"bounds": [0.5, 3.0]},
            "A": {"bounds": [0.01, 10.0], "log": True},
            "alpha": {"bounds": [0.05, 1.0]},
            "B": {"bounds": [0.01, 10.0], "log": True},
            "beta": {"bounds": [0.05, 1.0]},
            "a[1..1]": {"bounds": [0.0, 0.5]},
            "a[2..2]": {"bounds": [-9.0, -4.0]},
            "a[3..3]": {"bounds": [-1.0, 0.5]},
            "a[4..4]": {"bounds": [0.0, 0.5]},
            "a[5..5]": {"bounds": [3.0, 9.0]},
            "a[6..6]": {"bounds": [-0.5, 1.0]},
        },
    },
    "vocab": {
        "name": "vocab_quadratic",
        "define": {"n": "log(N/1e8)", "d": "log(D/1e10)", "v": "log(V)"},
        "formula": "E + A*exp(-alpha*n) + B*exp(-beta*d) + a[1]*(v - a[2] - a[3]*n)**2",
        "params": {
            "E": {"bounds": [0.5, 3.0]},
            "A": {"bounds": [0.01, 10.0], "log": True},
            "alpha": {"bounds": [0.05, 1.0]},
            "B": {"bounds": [0.01, 10.0], "log": True},
            "beta": {"bounds": [0.05, 1.0]},
            "a[1..1]": {"bounds": [0.0, 0.3]},
            "a[2..2]": {"bounds": [7.0, 13.0]},
            "a[3..3]": {"bounds": [-0.5, 1.5]},
        },
    },
    "moe_tiny": {
        "name": "moe_loglinear",
        "define": {"n": "log(N/1e8)", "g": "log(G)", "d": "log(D/1e10)"},
        "formula": "E + exp(c0 + a*n + b*g + c*n*g) + B*exp(-beta*d)",
        "params": {
            "E": {"bounds": [0.5, 3.0]},
            "c0": {"bounds": [-3.0, 2.0]},
            "a": {"bounds": [-1.0, 0.0]},
            "b": {"bounds": [-0.5, 0.2]},
            "c": {"bounds": [-0.2, 0.2]},
            "B": {"bounds": [0.01, 10.0], "log": True},
            "beta": {"bounds": [0.05, 1.0]},
        },
    },
}
COLUMNS = {"lr_bsz": ("N", "D", "lr", "bsz"), "vocab": ("N", "V", "D"), "moe_tiny": ("N", "G", "D")}
BUDGETS = {"lr_bsz": (0.01, 0.05, 0.1), "vocab": (0.01, 0.05, 0.1), "moe_tiny": (0.2, 0.35, 0.5)}


def _cost(task: str, df) -> np.ndarray:
    c = 6.0 * df["N"].to_numpy(float) * df["D"].to_numpy(float)
    return c * (1.0 + 0.03 * df["G"].to_numpy(float)) if task == "moe_tiny" else c


for _t, _cols in COLUMNS.items():  # dw_design reads a task's columns from bench_scalebench's table
    sb.TASKS.setdefault(_t, {"columns": _cols, "cost": (lambda t: lambda d: _cost(t, d))(_t)})


# ---------------------------------------------------------------------------------------------- worlds


def _lr_bsz_loss(N, D, lr, bsz):
    n, d = np.log(N / 1e8), np.log(D / 1e10)
    base = 1.75 + 0.9 * np.exp(-0.34 * n) + 0.7 * np.exp(-0.28 * d)
    lr_opt = -6.4 - 0.30 * n - 0.08 * d
    b_opt = 5.6 + 0.45 * d
    dx, dy = np.log(lr) - lr_opt, np.log(bsz) - b_opt
    return base * (1.0 + 0.045 * dx**2 * np.exp(0.35 * dx)) + 0.03 * dy**2


def _vocab_loss(N, V, D):
    n = np.log(N / 1e8)
    cpt = 3.2 + 0.35 * np.tanh(np.log(V / 3e4))  # characters per token, saturating in ln V
    dc = np.log(D * cpt / 3.2e10)
    dv = np.log(V) - np.log(2.5e4) - 0.45 * n
    pen = 0.025 * dv**2 * np.where(dv < 0, 1.6, 1.0)
    return 1.7 + 1.0 * np.exp(-0.32 * n) + 0.8 * np.exp(-0.27 * dc) + pen


def _moe_loss(N, G, D):
    n, d = np.log(N / 1e8), np.log(D / 1e10)
    gh = np.log(G / (1.0 + G / 96.0))
    return 1.6 + np.exp(0.15 - 0.30 * n - 0.10 * gh + 0.012 * n * gh) + 0.6 * np.exp(-0.3 * d)


def plant(task: str) -> dict:
    """The task's one group: pool, costs, target (DataFrames with the law's columns and loss)."""
    import pandas as pd

    rng = np.random.default_rng([TASK_SEED, list(COLUMNS).index(task)])
    if task == "lr_bsz":
        m = 2000
        N = 10 ** (7.0 + 2.0 * rng.beta(1.2, 3.0, m))  # 1e7..1e9, most small
        D = N * 10 ** rng.uniform(np.log10(5), np.log10(60), m)
        n, d = np.log(N / 1e8), np.log(D / 1e10)
        lr = np.exp(-6.4 - 0.30 * n - 0.08 * d + rng.uniform(-2.0, 2.0, m))
        bsz = np.exp(np.clip(np.round((5.6 + 0.45 * d + rng.uniform(-1.8, 1.8, m)) / np.log(2)), 3, 14) * np.log(2))
        pool = pd.DataFrame({"N": N, "D": D, "lr": lr, "bsz": bsz})
        k = 40
        Nt = 10 ** rng.uniform(np.log10(1.5e9), np.log10(4e9), k)
        Dt = Nt * rng.uniform(20, 40, k)
        nt, dt = np.log(Nt / 1e8), np.log(Dt / 1e10)
        lrt = np.exp(-6.4 - 0.30 * nt - 0.08 * dt + rng.uniform(-0.4, 0.4, k))
        bt = np.exp(5.6 + 0.45 * dt + rng.uniform(-0.4, 0.4, k))
        target = pd.DataFrame({"N": Nt, "D": Dt, "lr": lrt, "bsz": bt})
        f, sd = _lr_bsz_loss, 0.005
    elif task == "vocab":
        m = 1000
        N = 10 ** (7.0 + 1.8 * rng.beta(1.3, 2.5, m))  # 1e7..6e8
        D = N * 10 ** rng.uniform(np.log10(8), np.log10(40), m)
        V = np.round(10 ** rng.uniform(np.log10(4e3), np.log10(2.6e5), m))
        pool = pd.DataFrame({"N": N, "V": V, "D": D})
        Nt = np.repeat([2e9, 3.5e9, 6e9], 8)
        Vt = np.tile(np.round(np.geomspace(3e4, 5e5, 8)), 3)
        target = pd.DataFrame({"N": Nt, "V": Vt, "D": 20 * Nt})
        f, sd = _vocab_loss, 0.005
    elif task == "moe_tiny":
        Ns, Gs, rs = np.geomspace(2e7, 6e8, 6), (1, 4, 8, 16, 64), (10, 40)
        g = np.array([(n, gg, r * n) for n in Ns for gg in Gs for r in rs])
        pool = pd.DataFrame({"N": g[:, 0], "G": g[:, 1], "D": g[:, 2]})
        Nt = np.repeat([2e9, 5e9], 5)
        target = pd.DataFrame({"N": Nt, "G": np.tile([1.0, 4, 8, 16, 64], 2), "D": 20 * Nt})
        f, sd = _moe_loss, 0.003
    else:
        raise KeyError(task)
    cols = list(COLUMNS[task])
    pool["loss"] = f(*[pool[c].to_numpy(float) for c in cols]) * np.exp(rng.normal(0, sd, len(pool)))
    target["loss"] = f(*[target[c].to_numpy(float) for c in cols]) * np.exp(rng.normal(0, sd, len(target)))
    return {"group": task, "pool": pool, "cost": _cost(task, pool), "target": target}


# ---------------------------------------------------------------------------------------------- jobs


def one(job: dict) -> dict:
    """One task under one method and seed (``all``: the law fitted on the whole pool)."""
    from depthwidth.fit.userlaw import load_law

    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    task = job["task"]
    spec = LAWS[task]
    law = load_law(spec)
    g = plant(task)
    budgets = list(BUDGETS[task])
    stats = {
        "refits": 0,
        "refit_seconds": 0.0,
        "fallbacks": 0,
        "fallback_reasons": {},
        "rml": 0,
        "rml_reasons": {},
        "replicates": 0,
        "initial_share_max": 0.0,
    }
    if job["method"] == "all":
        chosen_per, budgets = [np.arange(len(g["cost"]))], [1.0]
    elif job["method"] == "random":
        chosen_per = sb.random_order(g, budgets, np.random.default_rng([job["seed"], 0]))
    else:
        chosen_per = sb.dw_design(law, spec, g, budgets, job, stats)
    near = sb._near_quarter(law, g)
    total = float(g["cost"].sum())
    res = []
    for b, c in zip(budgets, chosen_per):
        s = sb.score(law, [g], [c], job["fit_starts"])
        paid = float(g["cost"][c].sum())
        s.update(
            budget=b,
            runs=int(len(c)),
            spent=paid / total,
            near=float(g["cost"][c][near[c]].sum()) / paid if paid else 0.0,
            # what it bought: the runs' median and largest cost, as fractions of the target's mean cost
            cost_median=float(np.median(g["cost"][c])) if len(c) else 0.0,
            cost_max=float(g["cost"][c].max()) if len(c) else 0.0,
        )
        res.append(s)
    return {
        "task": task,
        "method": job["method"],
        "seed": job["seed"],
        "checkpoints": res,
        "stats": stats,
        "seconds": time.perf_counter() - t0,
    }


def table(task: str, rs: list[dict], seeds: int) -> str:
    budgets = BUDGETS[task]
    g = plant(task)
    heads = [f"{b:.0%}" for b in budgets]
    lines = [
        f"{task} ({len(g['pool'])} pool runs, {len(g['target'])} target rows, law of "
        f"{len(load_params(task))} parameters; {seeds} seed(s); target-region R², mean ± std over seeds)",
        "| method | " + " | ".join(heads) + " | runs picked | spend on the nearest quarter |",
        "|---|" + "---:|" * len(heads) + "---|---|",
    ]
    for m, name in (("random", "random (dw's fit)"), ("dw", "dw design (dw's fit)")):
        mine = [r for r in rs if r["method"] == m]
        if not mine:
            continue
        cells, runs, near = [], [], []
        for i in range(len(budgets)):
            v = np.array([r["checkpoints"][i]["r2"] for r in mine])
            cells.append(f"{v.mean():+.2f} ± {v.std():.2f}")
            runs.append(f"{np.mean([r['checkpoints'][i]['runs'] for r in mine]):.0f}")
            near.append(f"{np.mean([r['checkpoints'][i]['near'] for r in mine]):.0%}")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {'/'.join(runs)} | {'/'.join(near)} |")
    alld = [r for r in rs if r["method"] == "all"]
    if alld:
        lines.append(f"| all data (100%, dw's fit): {alld[0]['checkpoints'][0]['r2']:+.3f} | | | | | |")
    return "\n".join(lines)


def load_params(task: str) -> list[str]:
    from depthwidth.fit.userlaw import load_law

    return list(load_law(LAWS[task]).params)


def stats_lines(rs: list[dict]) -> list[str]:
    mine = [r for r in rs if r["method"] == "dw"]
    if not mine:
        return []
    tot = {k: sum(r["stats"].get(k, 0) for r in mine) for k in ("refits", "refit_seconds", "fallbacks", "rml")}
    tot["weighted"] = sum(r["stats"].get("weighted_rounds", 0) for r in mine)
    share = max(r["stats"]["initial_share_max"] for r in mine)
    out = [
        f"dw design: {tot['refits']} ensembles ({tot['refit_seconds']:.0f} s), {tot['rml']} RML, "
        f"{tot['weighted']} weighted rounds, {tot['fallbacks']} fallback round(s); initial runs at most "
        f"{share:.0%} of a checkpoint; {sum(r['seconds'] for r in mine):.0f} s in all"
    ]
    for k, label in (("rml_reasons", "RML"), ("fallback_reasons", "fallback")):
        agg: dict = {}
        for r in mine:
            for why, n in r["stats"][k].items():
                agg[why] = agg.get(why, 0) + n
        out += [f"  {label} x{n}: {why}" for why, n in sorted(agg.items(), key=lambda x: -x[1])]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default=",".join(COLUMNS))
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1")
    ap.add_argument("--methods", default="random,dw")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--bootstrap", type=int, default=50, help="replicates of each design refit")
    ap.add_argument("--fit-starts", type=int, default=256, help="max_starts of every checkpoint fit")
    ap.add_argument("--design-starts", type=int, default=64, help="max_starts of the design's refits")
    ap.add_argument("--refit-growth", type=float, default=0.5)
    ap.add_argument("--no-all-data", action="store_true", help="skip the all-data row")
    ap.add_argument("--rows", default=None, help="append each job's result to this JSONL file; a rerun skips those")
    ap.add_argument("--json", default=None, help="also write every result to this file")
    a = ap.parse_args()
    tasks = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in COLUMNS]
    if unknown:
        print(f"bench_planted_tasks: unknown task {unknown[0]!r} (allowed: {', '.join(COLUMNS)})")
        return 2
    base = {
        "bootstrap": a.bootstrap,
        "fit_starts": a.fit_starts,
        "design_starts": a.design_starts,
        "refit_growth": a.refit_growth,
        "cost_power": 1.0,
        "weigh": True,
    }
    jobs = []
    for t in tasks:
        if not a.no_all_data:
            jobs.append({**base, "task": t, "method": "all", "seed": 0})
        for s in range(a.seeds):
            jobs += [{**base, "task": t, "method": m, "seed": s} for m in a.methods.split(",")]
    jobs.sort(key=lambda j: j["seed"])  # seed by seed: a run cut short still covers every task
    results: list[dict] = []
    if a.rows and Path(a.rows).exists():
        results = [json.loads(x) for x in Path(a.rows).read_text().splitlines() if x.strip()]
        have = {(r["task"], r["method"], r["seed"]) for r in results}
        jobs = [j for j in jobs if (j["task"], j["method"], j["seed"]) not in have]
    t0 = time.perf_counter()

    def keep(r: dict) -> dict:
        if a.rows:
            with open(a.rows, "a") as fh:
                fh.write(json.dumps(r, default=float) + "\n")
        cp = " ".join(f"{c['r2']:+.3f}({c['runs']})" for c in r["checkpoints"])
        print(f"  {r['task']} {r['method']} seed {r['seed']}: {cp}  [{r['seconds']:.0f} s]", flush=True)
        return r

    if a.workers > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(a.workers) as ex:
            for f in as_completed([ex.submit(one, j) for j in jobs]):
                results.append(keep(f.result()))
    else:
        results += [keep(one(j)) for j in jobs]
    wall = time.perf_counter() - t0
    print()
    for t in tasks:
        rs = [r for r in results if r["task"] == t]
        print(table(t, rs, a.seeds))
        for line in stats_lines(rs):
            print(line)
        for i, b in enumerate(BUDGETS[t]):
            d = [r["checkpoints"][i]["r2"] for r in rs if r["method"] == "dw"]
            q = [r["checkpoints"][i]["r2"] for r in rs if r["method"] == "random"]
            if d and q and np.mean(d) < np.mean(q):
                print(f"below random: {t} {b:.0%}: dw {np.mean(d):+.3f} < random {np.mean(q):+.3f}")
        print()
    print(f"{len(jobs)} jobs in {wall:.0f} s on {a.workers} worker(s)")
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "seconds": wall, "results": results}, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
