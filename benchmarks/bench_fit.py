"""Speed of ``dw fit``'s engine.

1. The 4,500-start Hoffmann-grid chinchilla fit on 240 points (target: <= 3 s
   wall on 2 cores).  Data: a planted Chinchilla-like table (80 runs x 3
   budgets), or ``--csv FILE`` with columns N, C (training FLOPs), loss, e.g.
   the points Besiroglu et al. (2024) extracted from Hoffmann's Figure 4
   (their 5 highest-loss points are dropped, leaving 240, as they did).
2. For reference, a plain scipy L-BFGS-B loop (analytic gradient, default
   tolerances) over every 50th start, CPU time scaled by 50.
3. 1,000 run-bootstrap refits of the same fit.

Prints a table, then one JSON line.

    python benchmarks/bench_fit.py [--rounds 3] [--csv FILE] [--no-scipy]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from depthwidth.fit.engine import Problem, fit_law  # noqa: E402
from depthwidth.fit.boot import bootstrap  # noqa: E402
from tests.planted import PLANTED, planted_table  # noqa: E402
from depthwidth.fit.laws import get_law  # noqa: E402

TARGET_S = 3.0


def table(csv: str | None):
    import pandas as pd

    if csv is None:
        return planted_table(
            get_law("chinchilla"), PLANTED["chinchilla"], kind="chinchilla", noise=0.01, run_noise=0.005
        )
    df = pd.read_csv(csv)
    df["params"], df["tokens"] = df["N"], df["C"] / (6 * df["N"])
    cut = np.sort(df["loss"].to_numpy())[-5]
    df = df[df["loss"] < cut].reset_index(drop=True)
    df["run"] = [f"p{i}" for i in range(len(df))]
    return df


def timed(fn, rounds):
    walls, cpus, out = [], [], None
    for _ in range(rounds):
        w, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def scipy_loop(df, law, every=50):
    from scipy.optimize import minimize

    pb = Problem(law, law.data(df), np.log(df["loss"].to_numpy()))
    d = pb.delta

    def fg(t):
        pred, J = pb.eval(t[None, :], jac=True)
        r = pred[0] - pb.y
        a = np.abs(r)
        return float(np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d)).sum()), J[0] @ np.clip(r, -d, d)

    g = law.grid()[::every]
    t = time.process_time()
    for s in g:
        minimize(fg, s, jac=True, method="L-BFGS-B")
    return (time.process_time() - t) * every


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--no-scipy", action="store_true")
    ap.add_argument("--bootstrap", type=int, default=1000)
    a = ap.parse_args(argv)
    law = get_law("chinchilla")
    df = table(a.csv)
    fit_law(df, law, max_starts=50)  # warm imports and caches
    wall, cpu, fr = timed(lambda: fit_law(df, law), a.rounds)
    res = {
        "bench": "fit",
        "points": int(len(df)),
        "starts": fr.starts["total"],
        "fit_wall_s": round(wall, 3),
        "fit_cpu_s": round(cpu, 3),
        "target_s": TARGET_S,
        "pass": wall <= TARGET_S,
        "converged": fr.starts["converged"],
        "in_best_basin": fr.starts["in_best_basin"],
        "params": {k: float(f"{v:.6g}") for k, v in fr.params.items()},
        "objective": fr.objective,
    }
    if not a.no_scipy:
        res["scipy_loop_s"] = round(scipy_loop(df, law), 2)
    if a.bootstrap:
        bw, bc, b = timed(lambda: bootstrap(fr, df, a.bootstrap, seed=0), 1)
        res.update({"bootstrap": a.bootstrap, "bootstrap_wall_s": round(bw, 2), "bootstrap_ok": int(b["ok"].sum())})
    print(f"{'quantity':34s} value")
    print(f"{'points / starts':34s} {res['points']} / {res['starts']}")
    print(
        f"{'fit wall (median) / cpu':34s} {res['fit_wall_s']:.2f} s / {res['fit_cpu_s']:.2f} s   target <= "
        f"{TARGET_S} s: {'ok' if res['pass'] else 'MISSED'}"
    )
    print(f"{'starts converged / in best basin':34s} {res['converged']} / {res['in_best_basin']}")
    if "scipy_loop_s" in res:
        print(f"{'plain scipy loop (est., cpu)':34s} {res['scipy_loop_s']:.1f} s")
    if a.bootstrap:
        print(
            f"{'bootstrap':34s} {a.bootstrap} refits in {res['bootstrap_wall_s']:.1f} s ({res['bootstrap_ok']} "
            "converged)"
        )
    print(f"{'parameters':34s} {res['params']}")
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
