"""dw's design against ScaleBench ("Spend Less, Fit Better", Li et al., arXiv 2604.22753).

Three of the benchmark's tasks (farseer, parallel, data_constrained: real run tables, each a pool of
runnable experiments with a cost and a held-out high-cost target region) read from
``../shared/data/scalebench`` (relative to the repository root; ``--data DIR``), never copied here.
Each task's laws are dw user-law files, ``benchmarks/scalebench_laws/<task>/sl_*.yaml`` (formulas and
parameter bounds from the benchmark's repository, PlanarG/active-sl; every one of the 21 is written in
dw's expression language, none skipped).

Protocol (the paper's, benchmark/runner.py of active-sl).  Per group of a task (the parquet's
``group``), the budget is a fraction (1%, 5%, 10%) of the group's pool's total cost (farseer and
data_constrained 6·N·D, parallel N); runs are picked until the next pick would exceed the
checkpoint's budget, and selection goes on from there to the next checkpoint.  At each checkpoint the
law is fitted per group on the picked runs with dw's engine (``fit_law``: robust Huber fit of log L,
multi-start LM and an L-BFGS-B polish; default settings except ``--fit-starts``) and judged by R² on
the target rows of every group with a fit, pooled, clipped to [-1, 1]; a group with fewer runs than
the law's parameters has no fit (dw's engine refuses an underdetermined fit), and a checkpoint with no
group fitted scores -1 (the benchmark scores a failed prediction so).  Reported: mean ± std over every
law of the task × seeds.

* ``random``: a random order of the pool, taken while within budget (the paper's Random).
* ``dw``: fit/design_rounds.checkpoint_design.  First the cheapest runs, up to int(2.5·P) of them
  for a law of P parameters (the initial design the paper's V-opt and MSPE start from, ``cheap_init``
  in active-sl's vopt.py / mspe.py), never more than ``INITIAL_SHARE`` (half) of a checkpoint's
  budget; then greedy picks by ``depthwidth.fit.predict.design`` with target ``Region(rows=the
  group's target rows)``: the expected fall of the summed variance of the target region's predicted
  log losses per unit of cost, the law's misfit correlated between neighbouring configurations and
  part of the region's prediction (docs/design.md).  The ensemble (``round_ensemble``: the fit's
  bootstrap, ``--bootstrap`` replicates and ``--design-starts`` starts, from as many runs as
  parameters; before that, or where the bootstrap leaves fewer than 10 replicates, the RML ensemble)
  is formed again after every batch; a batch is max(1, ceil(``--refit-growth`` · runs so far)) picks,
  chosen greedily with the covariance conditioned on each pick before the next (geometric: about
  log(n_end / n_start) / log(1 + growth) ensembles).  Every batch stays inside the checkpoint's
  budget.  Where no ensemble can be formed the round takes the batch's k cheapest affordable runs
  and counts a fallback, with its reason, printed.  ``--cost-power p`` ranks by value / cost^p
  instead (the paper's V-opt: p = 0.3); the default 1 is dw's own design.

The check (``shortfalls``, issue #36's target), printed after the tables beside a row of the mean over
the tasks (``task_means``: each task's mean weighted alike, the paper's methods' means of their
published figures): at every budget on each task dw's mean at least the paper's V-opt and at least
the ``random`` picks fitted by dw's engine ("random (dw's fit)"), and the mean over the tasks at
least the paper's MSPE.  The paper's figures have 2 decimals: dw's mean equal to one at 2 decimals is
met, and printed as a tie; against its own random picks the comparison is exact.  A missing row
(a method not run) is a shortfall.  ``--rows`` keeps every job's result (``.gz``: compressed), and a
rerun on a complete file only prints: ``benchmarks/results/scalebench_rows.jsonl.gz`` is the run
behind README.md's table.

BLAS is held to one thread (set before numpy loads): scipy's L-BFGS-B polish inside dw's engine runs
~7x slower on a 2-core machine with OpenBLAS's default threads (a farseer fit: 15.8 s -> 2.4 s).

    python benchmarks/bench_scalebench.py --workers 2                  # 3 tasks, 5 seeds, 1/5/10%
    python benchmarks/bench_scalebench.py --rows benchmarks/results/scalebench_rows.jsonl.gz  # its table
    python benchmarks/bench_scalebench.py --tasks parallel --seeds 2 --laws sl_1,sl_9
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

# the project's shared folder sits beside the checkout (DW_SHARED points elsewhere, as for the tests)
DATA = Path(os.environ.get("DW_SHARED") or ROOT.parent / "shared") / "data" / "scalebench"
LAWS = ROOT / "benchmarks" / "scalebench_laws"
TASKS = {  # the law's input columns and the cost of one run
    "farseer": {"columns": ("N", "D"), "cost": lambda d: 6.0 * d["N"] * d["D"]},
    "parallel": {"columns": ("num_params", "parallel_size"), "cost": lambda d: d["num_params"].astype(float)},
    "data_constrained": {
        "columns": ("unique_tokens", "params", "tokens"),
        "cost": lambda d: 6.0 * d["params"] * d["tokens"],
    },
}
BUDGETS = (0.01, 0.05, 0.1)
METHODS = ("random", "dw")
# The paper's Table 2 on these tasks (the data's README.md): target-region R², mean ± std.
PUBLISHED = {
    "farseer": {
        0.01: {"Random": (-0.77, 0.55), "D-opt": (-0.11, 0.80), "V-opt": (0.67, 0.22), "MSPE": (0.60, 0.11)},
        0.05: {"Random": (0.78, 0.18), "D-opt": (0.49, 0.18), "V-opt": (0.87, 0.01), "MSPE": (0.88, 0.02)},
        0.1: {"Random": (0.79, 0.09), "D-opt": (0.87, 0.03), "V-opt": (0.92, 0.01), "MSPE": (0.93, 0.00)},
        1.0: {"All Data": (0.91, 0.01)},
    },
    "parallel": {
        0.01: {"Random": (-1.00, 0.00), "D-opt": (-1.00, 0.00), "V-opt": (-1.00, 0.00), "MSPE": (-1.00, 0.00)},
        0.05: {"Random": (0.27, 0.02), "D-opt": (0.70, 0.52), "V-opt": (0.69, 0.53), "MSPE": (0.77, 0.39)},
        0.1: {"Random": (0.19, 0.01), "D-opt": (0.99, 0.00), "V-opt": (0.99, 0.00), "MSPE": (0.99, 0.00)},
        1.0: {"All Data": (0.99, 0.00)},
    },
    "data_constrained": {
        0.01: {"Random": (-0.74, 0.48), "D-opt": (0.71, 0.43), "V-opt": (0.58, 0.53), "MSPE": (0.73, 0.37)},
        0.05: {"Random": (-0.36, 0.71), "D-opt": (0.80, 0.17), "V-opt": (0.83, 0.17), "MSPE": (0.85, 0.16)},
        0.1: {"Random": (0.12, 0.62), "D-opt": (0.77, 0.16), "V-opt": (0.85, 0.13), "MSPE": (0.86, 0.11)},
        1.0: {"All Data": (0.79, 0.23)},
    },
}
PAPER_METHODS = ("Random", "D-opt", "V-opt", "MSPE")
MIN_REPLICATES = 10  # design() needs at least this many replicates defining the target


def absent(data: Path, tasks) -> str | None:
    """Why the data cannot be read (one line), or None."""
    missing = [
        t for t in tasks if not ((data / t / "train.parquet").is_file() and (data / t / "test.parquet").is_file())
    ]
    if missing:
        return (
            f"bench_scalebench: ScaleBench data absent: no {missing[0]}/train.parquet and test.parquet under {data} "
            "(expected ../shared/data/scalebench beside the repository, or --data DIR)"
        )
    return None


def law_files(task: str, only=None) -> list[Path]:
    files = sorted((LAWS / task).glob("sl_*.yaml"), key=lambda p: int(p.stem.split("_")[1]))
    return [f for f in files if not only or f.stem in only]


def load_task(data: Path, task: str) -> list[dict]:
    """Per group: pool rows, their costs, target rows (DataFrames with the law's columns and loss)."""
    import pandas as pd

    spec = TASKS[task]
    train = pd.read_parquet(data / task / "train.parquet")
    test = pd.read_parquet(data / task / "test.parquet")
    keep = list(spec["columns"]) + ["loss"]
    groups = []
    for g in sorted(set(train["group"])):
        pool = train[train["group"] == g].reset_index(drop=True)
        target = test[test["group"] == g].reset_index(drop=True)
        if len(pool) and len(target):
            cost = spec["cost"](pool).to_numpy(dtype=float)
            groups.append({"group": str(g), "pool": pool[keep], "cost": cost, "target": target[keep]})
    return groups


def r2(y: np.ndarray, p: np.ndarray) -> float:
    """The benchmark's R², clipped to [-1, 1] (-1 where it is not finite)."""
    ss_tot = float(((y - y.mean()) ** 2).sum())
    v = 1.0 - float(((y - p) ** 2).sum()) / ss_tot if ss_tot > 0 else -1.0
    return float(np.clip(v, -1.0, 1.0)) if math.isfinite(v) else -1.0


def fit_predict(law, rows, target, starts: int, pool=None):
    """(predicted target losses, fit seconds, whether the fit was local), or (None, reason, False) where
    dw's engine gives no fit: dw's fit made for the target (fit/target_fit.fit_for_target, the pool
    setting the distances' scale).  With fewer runs than parameters (at least one) the prediction is
    the median over the RML ensemble's replicates (fit/design_rounds.rml_ensemble: the law's start
    grid as the prior, each replicate fitted to the runs), where the engine refuses a fit."""
    from depthwidth.core.errors import BadInput, WorkFailed
    from depthwidth.fit.design_rounds import DesignFailed, rml_ensemble
    from depthwidth.fit.target_fit import fit_for_target

    if len(rows) < len(law.params):
        if not len(rows):
            return None, "no runs", False
        t0 = time.perf_counter()
        try:
            ens = rml_ensemble(law, rows.reset_index(drop=True))
        except (DesignFailed, BadInput, WorkFailed) as e:
            return None, str(e)[:80], False
        with np.errstate(all="ignore"):
            p = law.to_loss(np.nanmedian(law.evaluate(ens.theta, law.data(target)), axis=0))
        if not np.isfinite(p).all():
            return None, "non-finite prediction (RML)", False
        return p, time.perf_counter() - t0, False
    t0 = time.perf_counter()
    try:
        tf = fit_for_target(rows.reset_index(drop=True), law, target, candidates=pool, max_starts=starts)
    except (BadInput, WorkFailed) as e:
        return None, str(e)[:80], False
    p = law.to_loss(law.evaluate(tf.fit.theta[None, :], law.data(target))[0])
    if not np.isfinite(p).all():
        return None, "non-finite prediction", False
    return p, time.perf_counter() - t0, tf.local


def score(law, groups: list[dict], chosen: list[np.ndarray], starts: int) -> dict:
    """Fit each group on its chosen runs; the pooled, clipped R² over the groups with a fit."""
    ys, ps, secs, fails, local = [], [], 0.0, [], 0
    for g, idx in zip(groups, chosen):
        p, info, was_local = fit_predict(law, g["pool"].iloc[idx], g["target"], starts, g["pool"])
        if p is None:
            fails.append(info)
            continue
        secs += info
        local += int(was_local)
        ys.append(g["target"]["loss"].to_numpy(dtype=float))
        ps.append(p)
    value = r2(np.concatenate(ys), np.concatenate(ps)) if ys else -1.0
    return {"r2": value, "fit_seconds": secs, "no_fit": fails, "local_fits": local}


def _near_quarter(law, g: dict) -> np.ndarray:
    """(pool,) whether each pool run is among the quarter nearest the target region: Euclidean distance
    to the nearest target row in the law's run columns (log where positive), in the pool's sd."""
    import pandas as pd

    from depthwidth.fit.misfit import law_coords, run_columns
    from depthwidth.fit.userlaw import OUTPUT, outputs

    cols = run_columns(law)
    both = pd.concat([g["pool"][cols], g["target"][cols]], ignore_index=True).assign(loss=1.0)
    if outputs(law):
        both[OUTPUT] = outputs(law)[0]  # the run columns alone are read
    x = law_coords(law, law.data(both))
    xp, xt = x[: len(g["pool"])], x[len(g["pool"]) :]
    sd = xp.std(axis=0)
    use = np.isfinite(sd) & (sd > 0)
    z, zt = xp[:, use] / sd[use], xt[:, use] / sd[use]
    d = np.sqrt(((z[:, None, :] - zt[None, :, :]) ** 2).sum(axis=2)).min(axis=1)
    return d <= np.quantile(d, 0.25)


def _affordable(cost: np.ndarray, taken: np.ndarray, room: float) -> np.ndarray:
    return np.flatnonzero(~taken & (cost <= room * (1 + 1e-12)))


def dw_design(law, spec: dict, g: dict, budgets, a, stats: dict) -> list[np.ndarray]:
    """The runs dw's design picks in one group, as index arrays, one per checkpoint (cumulative):
    fit/design_rounds.checkpoint_design with fit/design_rounds.round_ensemble (the fit's bootstrap,
    or from the first run the RML ensemble) and target Region(the group's target rows)."""
    from depthwidth.fit.design_rounds import checkpoint_design, round_ensemble
    from depthwidth.fit.predict import Region
    from depthwidth.fit.userlaw import outputs

    pool, cost, total = g["pool"], g["cost"], float(g["cost"].sum())
    cols = list(TASKS[a["task"]]["columns"])
    region = Region(rows=tuple(g["target"][cols].to_dict("records")))

    def ensemble(order):
        t0 = time.perf_counter()
        ens, why = round_ensemble(
            law,
            pool.iloc[order].reset_index(drop=True),
            law_spec=spec,
            bootstrap=a["bootstrap"],
            max_starts=a["design_starts"],
            seed=a["seed"],
        )
        stats["refit_seconds"] += time.perf_counter() - t0
        stats["refits"] += 1
        stats["replicates"] += len(ens.theta)
        if why:
            stats["rml"] += 1
            key = why.split(":")[0] if "fewer than" in why else why
            stats["rml_reasons"][key] = stats["rml_reasons"].get(key, 0) + 1
        return ens

    def weigh(order, ens):  # the weight the checkpoint's fit made for the target gives each pool run
        # The rule tests the plain fit's residuals: a fit's ensemble carries that fit (its point); an
        # RML ensemble's best replicate is fitted to the losses plus a draw of noise, not to them.
        if not a["weigh"] or not ens.from_fit:
            return None
        from depthwidth.fit.target_fit import locality

        loc = locality(pool.iloc[order], law, ens.point, g["target"], candidates=pool, extra=pool)
        return loc.extra_weights

    st: dict = {}
    out = checkpoint_design(
        pool[cols],
        cost,
        [b * total for b in budgets],
        region,
        len(law.params),
        ensemble,
        growth=a["refit_growth"],
        outputs=max(1, len(outputs(law))),
        stats=st,
        cost_power=a["cost_power"],
        weigh=weigh,
    )
    stats["fallbacks"] += st["fallbacks"]
    stats["weighted_rounds"] = stats.get("weighted_rounds", 0) + st["weighted_rounds"]
    for k, v in st["fallback_reasons"].items():
        stats["fallback_reasons"][k] = stats["fallback_reasons"].get(k, 0) + v
    stats["initial_share_max"] = max(stats["initial_share_max"], max(st["initial_spent"], default=0.0))
    return out


def random_order(g: dict, budgets, rng) -> list[np.ndarray]:
    cost, total = g["cost"], float(g["cost"].sum())
    perm = rng.permutation(len(cost))
    cum = np.cumsum(cost[perm])
    out = []
    for b in budgets:
        n = int(np.searchsorted(cum, b * total * (1 + 1e-12), side="right"))
        out.append(perm[:n])
    return out


def one(job: dict) -> dict:
    """One law of a task under one method and seed (or ``all``: the law fitted on the whole pool)."""
    import yaml

    from depthwidth.fit.userlaw import load_law

    warnings.filterwarnings("ignore")
    t0 = time.perf_counter()
    path = Path(job["law"])
    spec = yaml.safe_load(path.read_text())
    law = load_law(path)
    groups = load_task(Path(job["data"]), job["task"])
    budgets = job["budgets"]
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
        chosen_per = [[np.arange(len(g["cost"])) for g in groups]]
        budgets = [1.0]
    elif job["method"] == "random":
        per_group = [random_order(g, budgets, np.random.default_rng([job["seed"], i])) for i, g in enumerate(groups)]
        chosen_per = [[pg[c] for pg in per_group] for c in range(len(budgets))]
    else:
        per_group = [dw_design(law, spec, g, budgets, job, stats) for g in groups]
        chosen_per = [[pg[c] for pg in per_group] for c in range(len(budgets))]
    near = [_near_quarter(law, g) for g in groups]
    res = []
    for b, chosen in zip(budgets, chosen_per):
        s = score(law, groups, chosen, job["fit_starts"])
        paid = sum(float(g["cost"][c].sum()) for g, c in zip(groups, chosen))
        s["near"] = (
            sum(float(g["cost"][c][q[c]].sum()) for g, c, q in zip(groups, chosen, near)) / paid if paid else 0.0
        )
        spent = sum(float(g["cost"][c].sum()) / float(g["cost"].sum()) for g, c in zip(groups, chosen)) / len(groups)
        s.update(budget=b, runs=int(sum(len(c) for c in chosen)), spent=spent)
        s["picks"] = [np.asarray(c).tolist() for c in chosen]  # per group: the pool rows fitted (refit offline)
        res.append(s)
    return {
        "task": job["task"],
        "law": path.stem,
        "params": len(law.params),
        "method": job["method"],
        "seed": job["seed"],
        "checkpoints": res,
        "stats": stats,
        "seconds": time.perf_counter() - t0,
    }


def summarize(results: list[dict], tasks, budgets) -> dict:
    out = {}
    for t in tasks:
        rs = [r for r in results if r["task"] == t]
        row: dict = {"laws": sorted({r["law"] for r in rs}, key=lambda s: int(s.split("_")[1])), "budgets": {}}
        for m in METHODS:
            mine = [r for r in rs if r["method"] == m]
            for i, b in enumerate(budgets):
                v = np.array([r["checkpoints"][i]["r2"] for r in mine])
                if not len(v):
                    continue
                row["budgets"].setdefault(str(b), {})[m] = {
                    "mean": float(v.mean()),
                    "std": float(v.std()),
                    "n": int(len(v)),
                    "runs": float(np.mean([r["checkpoints"][i]["runs"] for r in mine])),
                    "spent": float(np.mean([r["checkpoints"][i]["spent"] for r in mine])),
                    "no_fit": int(sum(len(r["checkpoints"][i]["no_fit"]) for r in mine)),
                    "fits": int(sum(len(r["checkpoints"][i]["no_fit"]) == 0 for r in mine)),
                    "near": float(np.mean([r["checkpoints"][i].get("near", np.nan) for r in mine])),
                }
            if m == "dw" and mine:
                keys = ("refits", "refit_seconds", "fallbacks", "rml", "weighted_rounds")
                st = {k: sum(r["stats"].get(k, 0) for r in mine) for k in keys}
                for k in ("fallback_reasons", "rml_reasons"):
                    st[k] = {}
                    for r in mine:
                        for why, n in r["stats"][k].items():
                            st[k][why] = st[k].get(why, 0) + n
                st["initial_share_max"] = max(r["stats"]["initial_share_max"] for r in mine)
                st["seconds"] = float(sum(r["seconds"] for r in mine))
                row["dw_stats"] = st
        alld = [r for r in rs if r["method"] == "all"]
        if alld:
            v = np.array([r["checkpoints"][0]["r2"] for r in alld])
            row["all_data"] = {"mean": float(v.mean()), "std": float(v.std()), "n": int(len(v))}
            row["all_data_per_law"] = {r["law"]: r["checkpoints"][0]["r2"] for r in alld}
        out[t] = row
    return out


def task_means(summary: dict, budgets) -> dict:
    """The mean over the tasks run at each budget (each task's mean weighted alike), as README.md's row:
    dw's design and random picks (dw's fit) from ``summary``, the paper's methods from PUBLISHED (the
    mean of its 2-decimal figures).  A budget some task lacks a row for has no mean of that method."""
    out: dict = {}
    for b in budgets:
        cell: dict = {}
        for m in METHODS:
            got = [summary[t]["budgets"].get(str(b), {}).get(m) for t in summary]
            if got and all(g is not None for g in got):
                cell[m] = float(np.mean([g["mean"] for g in got]))
        for pm in PAPER_METHODS:
            pub = [PUBLISHED[t].get(b, {}).get(pm) for t in summary]
            if pub and all(x is not None for x in pub):
                cell[pm] = float(np.mean([x[0] for x in pub]))
        out[str(b)] = cell
    return out


def shortfalls(summary: dict, budgets, ties: list[str] | None = None) -> list[str]:
    """Issue #36's targets, each a line where missed: at every budget on each task dw's mean at least
    the paper's V-opt and at least dw's own random picks fitted by dw's engine ("random (dw's fit)");
    the mean over the tasks run (``task_means``) at least the paper's MSPE at every budget.

    The paper's figures have 2 decimals, so dw's mean is compared with them at 2 decimals: equal
    there is met, and said in ``ties`` (dw +0.987 against V-opt's +0.99 is a tie, +0.984 is short);
    dw against its random picks is exact (both measured here; equal only where both are clipped at
    -1), an exact tie is said there too.  A budget the paper does not report has only the random
    target; a row missing (a method not run) is a shortfall: the target is then not shown met."""
    lines: list[str] = []
    ties = [] if ties is None else ties

    def against(where: str, got: float | None, ref: float | None, name: str, exact: bool) -> None:
        if got is None or ref is None:
            lines.append(f"{where}: no {'dw design' if got is None else name} row to check (run every method)")
            return
        a, r = (got, ref) if exact else (round(got, 2), round(ref, 2))
        if a < r:
            lines.append(f"{where}: dw {got:+.3f} < {name} {ref:+.3f} (short by {ref - got:.3f})")
        elif a == r:
            ties.append(f"{where}: dw {got:+.3f} = {name} {ref:+.3f}" + ("" if exact else " at 2 decimals (met)"))

    for t, row in summary.items():
        for b in budgets:
            here = row["budgets"].get(str(b), {})
            got = here.get("dw", {}).get("mean")
            pub = PUBLISHED[t].get(b)
            if pub is not None:
                against(f"{t} {b:.0%}", got, pub["V-opt"][0], "paper V-opt", exact=False)
            against(f"{t} {b:.0%}", got, here.get("random", {}).get("mean"), "random (dw's fit)", exact=True)
    means = task_means(summary, budgets)
    for b in budgets:
        if all(PUBLISHED[t].get(b) is not None for t in summary):
            m = means[str(b)]
            against(f"mean of {len(summary)} task(s) {b:.0%}", m.get("dw"), m.get("MSPE"), "paper MSPE", exact=False)
    return lines


def _cell(x: dict | tuple | None) -> str:
    if x is None:
        return "—"
    m, s = (x["mean"], x["std"]) if isinstance(x, dict) else x
    return f"{m:+.2f} ± {s:.2f}"


def table(task: str, row: dict, budgets, seeds: int) -> str:
    heads = [f"{b:.0%}" for b in budgets]
    lines = [
        f"{task} ({len(row['laws'])} law(s) x {seeds} seed(s); target-region R², mean ± std over laws x seeds)",
        "| method | " + " | ".join(heads) + " | runs picked (dw) |",
        "|---|" + "---:|" * len(heads) + "---|",
    ]
    for m, name in (("random", "random (dw's fit)"), ("dw", "dw design (dw's fit)")):
        cells = [_cell(row["budgets"].get(str(b), {}).get(m)) for b in budgets]
        runs = "/".join(f"{row['budgets'].get(str(b), {}).get(m, {}).get('runs', 0):.0f}" for b in budgets)
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {runs if m == 'dw' else ''} |")
    for pm in PAPER_METHODS:
        cells = [_cell(PUBLISHED[task].get(b, {}).get(pm)) for b in budgets]
        lines.append(f"| paper: {pm} | " + " | ".join(cells) + " | |")
    if "all_data" in row:
        lines.append(
            f"| All Data (100%): dw's fit {_cell(row['all_data'])}, paper {_cell(PUBLISHED[task][1.0]['All Data'])} | |"
        )
    return "\n".join(lines)


def mean_table(summary: dict, budgets) -> str:
    """``task_means`` as a table: dw's rows beside the paper's methods' means."""
    means = task_means(summary, budgets)
    heads = [f"{b:.0%}" for b in budgets]
    lines = [
        f"mean of the {len(summary)} task(s) run ({', '.join(summary)}; each task's mean weighted alike)",
        "| method | " + " | ".join(heads) + " |",
        "|---|" + "---:|" * len(heads),
    ]
    names = [("random", "random (dw's fit)"), ("dw", "dw design (dw's fit)")] + [
        (p, f"paper: {p}") for p in PAPER_METHODS
    ]
    for key, name in names:
        cells = [f"{means[str(b)][key]:+.3f}" if key in means[str(b)] else "—" for b in budgets]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_rows(path: str | Path) -> list[dict]:
    """The results a ``--rows`` file holds (gzip-compressed where its name ends in .gz)."""
    p = Path(path)
    with gzip.open(p, "rt") if p.suffix == ".gz" else p.open() as fh:
        text = fh.read()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def _keep(result: dict, rows: str | None) -> dict:
    if rows:  # a .gz file grows by one gzip member a result (gzip reads the members appended)
        with gzip.open(rows, "at") if rows.endswith(".gz") else open(rows, "a") as fh:
            fh.write(json.dumps(result, default=float) + "\n")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="the ScaleBench folder (default ../shared/data/scalebench)")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--laws", default=None, help="only these laws, e.g. sl_1,sl_9 (default: every law of the task)")
    ap.add_argument("--seeds", type=int, default=5, help="seeds 0 .. N-1")
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="fractions of the pool's total cost")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--bootstrap", type=int, default=50, help="replicates of each design refit")
    ap.add_argument("--fit-starts", type=int, default=256, help="max_starts of every checkpoint fit")
    ap.add_argument("--design-starts", type=int, default=64, help="max_starts of the design's refits")
    ap.add_argument("--refit-growth", type=float, default=0.5, help="picks per refit: this fraction of the runs in")
    ap.add_argument("--cost-power", type=float, default=1.0, help="rank by value / cost^p (1: dw's design)")
    ap.add_argument(
        "--no-weigh",
        action="store_true",
        help="value every candidate at full weight (before 2026-12-05: not as the target fit will weigh it)",
    )
    ap.add_argument("--no-all-data", action="store_true", help="skip the All Data row")
    ap.add_argument("--json", default=None, help="also write every result to this file")
    ap.add_argument(
        "--rows",
        default=None,
        help="append each job's result to this JSONL file as it ends (.gz: compressed); a rerun skips those",
    )
    a = ap.parse_args()
    tasks = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        print(f"bench_scalebench: unknown task {unknown[0]!r} (allowed: {', '.join(TASKS)})")
        return 2
    data = Path(a.data)
    why = absent(data, tasks)
    if why:
        print(why)
        return 2
    budgets = sorted(float(b) for b in a.budgets.split(","))
    only = set(a.laws.split(",")) if a.laws else None
    base = {
        "data": str(data),
        "budgets": budgets,
        "bootstrap": a.bootstrap,
        "fit_starts": a.fit_starts,
        "design_starts": a.design_starts,
        "refit_growth": a.refit_growth,
        "cost_power": a.cost_power,
        "weigh": not a.no_weigh,
    }
    jobs = []
    for t in tasks:
        for f in law_files(t, only):
            if not a.no_all_data:
                jobs.append({**base, "task": t, "law": str(f), "method": "all", "seed": 0})
            for m in a.methods.split(","):
                jobs += [{**base, "task": t, "law": str(f), "method": m, "seed": s} for s in range(a.seeds)]
    weight = {"farseer": 4, "data_constrained": 2, "parallel": 1}  # longest first keeps the workers busy
    # seed by seed (every law of every task at seed 0 first): rows cut short still cover every law
    jobs.sort(key=lambda j: (j["seed"], -(weight[j["task"]] * (3 if j["method"] == "dw" else 1))))
    t0 = time.perf_counter()
    results: list[dict] = []
    if a.rows:
        rows_path = Path(a.rows)
        if rows_path.exists():
            results = read_rows(rows_path)
        have = {(r["task"], r["law"], r["method"], r["seed"]) for r in results}
        jobs = [j for j in jobs if (j["task"], Path(j["law"]).stem, j["method"], j["seed"]) not in have]
    if a.workers > 1:
        from concurrent.futures import as_completed

        with ProcessPoolExecutor(a.workers) as ex:
            for f in as_completed([ex.submit(one, j) for j in jobs]):
                results.append(_keep(f.result(), a.rows))
    else:
        results += [_keep(one(j), a.rows) for j in jobs]
    wall = time.perf_counter() - t0
    s = summarize(results, tasks, budgets)
    for t in tasks:
        print(table(t, s[t], budgets, a.seeds))
        st = s[t].get("dw_stats")
        if st:
            print(
                f"dw design: {st['refits']} ensembles ({st['refit_seconds']:.0f} s), {st['rml']} of them RML "
                f"(the fit's bootstrap not used), {st['weighted_rounds']} weighted as the target fit weighs runs, "
                f"{st['fallbacks']} round(s) fell back to the cheapest runs; "
                f"initial runs at most {st['initial_share_max']:.0%} of a checkpoint; {st['seconds']:.0f} s in all"
            )
            for why, n in sorted(st["rml_reasons"].items(), key=lambda x: -x[1]):
                print(f"  RML x{n}: {why}")
            for why, n in sorted(st["fallback_reasons"].items(), key=lambda x: -x[1]):
                print(f"  fallback x{n}: {why}")
        near = {
            m: "/".join(
                f"{s[t]['budgets'][str(b)][m]['near']:.0%}" for b in budgets if m in s[t]["budgets"].get(str(b), {})
            )
            for m in METHODS
        }
        print(
            "share of the spend on the pool's quarter nearest the target: "
            + ", ".join(f"{m} {v}" for m, v in near.items() if v)
        )
        nofit = {m: sum(v.get(m, {}).get("no_fit", 0) for v in s[t]["budgets"].values()) for m in METHODS}
        print(f"group fits refused (fewer runs than parameters, or failed): random {nofit['random']}, dw {nofit['dw']}")
        print()
    print(mean_table(s, budgets))
    ties: list[str] = []
    short = shortfalls(s, budgets, ties)
    for line in short:
        print("short: " + line)
    for line in ties:
        print("tie: " + line)
    print(
        "check (issue #36: each task ≥ V-opt and ≥ random (dw's fit), the mean ≥ MSPE, at every budget): "
        + (f"{len(short)} shortfall(s)" if short else f"met ({len(ties)} tie(s))")
    )
    print(f"{len(jobs)} jobs in {wall:.0f} s on {a.workers} worker(s)")
    doc = {
        "bench": "scalebench",
        "summary": s,
        "means": task_means(s, budgets),
        "short": short,
        "ties": ties,
        "args": vars(a),
        "seconds": round(wall, 1),
    }
    if a.json:
        Path(a.json).write_text(json.dumps({**doc, "results": results}, default=float))
    print(json.dumps(doc, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
