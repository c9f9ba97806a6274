"""The fit made for a target against the plain fit, on the runs ScaleBench's designs picked (#36).

docs/design.md ("Why farseer falls short at 5-10%") found that dw's least-squares fit of farseer's
misspecified law is pulled away from the target by runs far from it.  fit/target_fit.py weighs runs
by nearness to the target where the runs show a misfit shared by neighbours and are plentiful (its
docstring has the rule).  This benchmark refits the very runs ``bench_scalebench.py`` picked (its
``--rows`` file keeps each checkpoint's picks) both ways, so only the fit changes: ``plain``
(fit/engine.fit_law) and ``target`` (fit/target_fit.fit_for_target), with how many checkpoints the
target fit made local.

    python benchmarks/bench_scalebench.py --tasks farseer --methods dw,random --rows r.jsonl
    python benchmarks/bench_target_fit.py --rows r.jsonl                # mean target R² per fit

Checkpoints with fewer runs than parameters (bench_scalebench.py predicts those from the RML
ensemble) are left out of both columns alike.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

import bench_scalebench as sb  # noqa: E402

RULES = ("plain", "target")


def predictions(law, group: dict, rows, starts: int) -> dict:
    """{rule: predicted target losses} for one group's picked runs, and whether the target fit was local."""
    from depthwidth.fit.target_fit import fit_for_target

    tf = fit_for_target(rows, law, group["target"], candidates=group["pool"], max_starts=starts)
    X = law.data(group["target"])
    return {
        "plain": law.to_loss(law.evaluate(tf.plain.theta[None, :], X)[0]),
        "target": law.to_loss(law.evaluate(tf.fit.theta[None, :], X)[0]),
        "local": tf.local,
    }


def main() -> int:
    from depthwidth.fit.userlaw import load_law

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", required=True, help="a bench_scalebench.py --rows file (with each checkpoint's picks)")
    ap.add_argument("--data", default=str(sb.DATA))
    ap.add_argument("--fit-starts", type=int, default=256)
    a = ap.parse_args()
    warnings.filterwarnings("ignore")
    recs = sb.read_rows(a.rows)
    if not recs or "picks" not in recs[0]["checkpoints"][0]:
        print(f"bench_target_fit: {a.rows} holds no picks (rows of bench_scalebench.py from 2026-12-05 on keep them)")
        return 2
    why = sb.absent(Path(a.data), sorted({r["task"] for r in recs}))
    if why:
        print(why)
        return 2
    groups = {t: sb.load_task(Path(a.data), t) for t in {r["task"] for r in recs}}
    laws = {}
    scores: dict = defaultdict(list)
    local: dict = defaultdict(int)
    for r in recs:
        task = r["task"]
        key = (task, r["law"])
        if key not in laws:
            laws[key] = load_law(sb.LAWS / task / f"{r['law']}.yaml")
        law = laws[key]
        for cp in r["checkpoints"]:
            if cp["budget"] >= 1.0:
                continue
            chosen = [g["pool"].iloc[idx].reset_index(drop=True) for g, idx in zip(groups[task], cp["picks"])]
            if any(len(c) < len(law.params) for c in chosen):
                continue
            ys = np.concatenate([g["target"]["loss"].to_numpy(float) for g in groups[task]])
            per = [predictions(law, g, c, a.fit_starts) for g, c in zip(groups[task], chosen)]
            local[(task, r["method"], cp["budget"])] += int(any(p["local"] for p in per))
            for rule in RULES:
                scores[(task, r["method"], cp["budget"], rule)].append(
                    sb.r2(ys, np.concatenate([p[rule] for p in per]))
                )
    print("| task | picks | budget | fits | local | plain fit | fit for the target |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key in sorted({k[:3] for k in scores}):
        task, method, budget = key
        cells = " | ".join(f"{np.mean(scores[(*key, rule)]):+.3f}" for rule in RULES)
        print(f"| {task} | {method} | {budget:g} | {len(scores[(*key, RULES[0])])} | {local[key]} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
