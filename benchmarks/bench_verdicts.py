"""Measured error rates of dw's verdicts on planted worlds (docs/verdicts.md's verdict table).

Every yes/no dw prints is a claim about the world; like an interval, it is only as good as its
measured error rate where the answer is known.  This benchmark writes run tables from known
laws with its *own* generator (not ``dw simulate``: an independent check of dw's fitting code),
runs the real ``dw fit`` (library call, default settings) on each, and counts per case how often
each verdict says yes:

- **D_crit located** (fit/verdicts.py's ladder): worlds with D_crit inside the grid (power: how
  often it is located; false yes: located with an interval that misses the truth at a located
  width), below the shallowest depth, beyond the deepest, no penalty at all, and uniform + ×
  runs at every configuration fitted with the shape-blind law (dw's default keeps the uniform
  runs; ``--pool-shapes`` pools them) — each in both D_crit forms and at two noise levels;
- **exponent identified** (chinchilla's alpha and beta): a world with both exponents (power)
  and one where loss does not depend on N (alpha = 0: false yes).

    python benchmarks/bench_verdicts.py                         # 100 tables per case, 2 workers
    python benchmarks/bench_verdicts.py --tables 20 --cases dd-inside-log-lo,dd-beyond-log-lo
    python benchmarks/bench_verdicts.py --json out.json --rows rows.jsonl
    python benchmarks/bench_verdicts.py --rows benchmarks/results/verdicts_rows.jsonl.gz

The measurement takes tens of CPU hours; its rows are kept in the repository
(``benchmarks/results/verdicts_rows.jsonl.gz``, one gzip member a table) so each sitting continues
where the last stopped instead of recomputing the same seeded tables.

Prints a table (verdict, case, yes, false yes, power, tables) and one JSON line.  Target: false
yes ≤ 5% in every case at default settings.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.verdict_kinds import VERDICTS as OTHER_VERDICTS  # noqa: E402
from benchmarks.verdict_kinds import cases as other_cases  # noqa: E402

# The grid (a reconstruction of the paper's ranges at CPU-friendly counts): 4 widths x 8 depths, 3 budgets.
WIDTHS = (256, 512, 1024, 2048)
DEPTHS = (2, 4, 8, 12, 16, 24, 32, 48)
BUDGETS = (0.25, 0.5, 1.0)
BASE = {"A": 400.0, "alpha": 0.30, "B": 2000.0, "delta": 0.35, "gamma": 1.0, "mu": 0.3}
NOISE = {"lo": 0.005, "hi": 0.02}  # per-run sigma of log loss (a seed's effect); per point: a fifth of it

# D_crit regimes: (log form kappa, power form (c, p)) and whether the grid can locate D_crit
REGIMES = {
    "inside": (2.43, (0.8, 0.44), True),  # D_crit(W) 13.5-18.5 (log), 9.2-22.8 (power)
    "below": (0.2, (0.3, 0.1), False),  # D_crit < 2 layers at every width: every run is past it
    "beyond": (12.0, (10.0, 0.44), False),  # D_crit > 48 at every width: no run is past it
    "none": (2.43, (0.8, 0.44), False),  # gamma = 0: no penalty at all
    "pooled": (12.0, (10.0, 0.44), False),  # beyond, with a x-shaped run beside every uniform one
}


def dcrit_true(form: str, regime: str, w: float) -> float:
    k, (c, p), _ = REGIMES[regime]
    return k * math.log(w) if form == "log" else c * w**p


def dd_table(form: str, regime: str, noise: str, seed: int):
    """A run table planted from the depth-delusion ansatz with the exact hinge (N = 12·D·W²)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    sig = NOISE[noise]
    gamma = 0.0 if regime == "none" else BASE["gamma"]
    shapes = ("uniform", "x") if regime == "pooled" else ("uniform",)
    rows = []
    for w in WIDTHS:
        dc = dcrit_true(form, regime, w)
        for d in DEPTHS:
            n = 12.0 * d * w * w
            t_max = max(20.0 * n, 2e9)
            for shape in shapes:
                u = rng.normal(0.0, sig)
                for f in BUDGETS:
                    t = f * t_max
                    loss = BASE["A"] / n ** BASE["alpha"] + BASE["B"] / t ** BASE["delta"]
                    loss += gamma * w ** -BASE["mu"] * max(0.0, (d - dc) / dc)
                    rows.append(
                        {
                            "run": f"{shape}-w{w}d{d}",
                            "shape": shape,
                            "params": n * (1.0 + 2 * 50257 / (12.0 * d * w)),  # the total count: what dw records
                            "tokens": t,
                            "depth": d,
                            "width": w,
                            "seed": 0,
                            "loss": loss * math.exp(u + rng.normal(0.0, sig / 5)),
                            "flops": 6.0 * n * t,
                        }
                    )
    return pd.DataFrame(rows)


def chin_table(regime: str, noise: str, seed: int):
    """A Chinchilla-like cloud (N 5e7-1.6e10, T/N 2-100) planted from E + A/N^alpha + B/T^beta."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    v = {"E": 1.82, "A": 482.0, "B": 2085.0, "alpha": 0.35 if regime == "both" else 0.0, "beta": 0.37}
    sig = NOISE[noise]
    rows = []
    for i in range(40):
        n = float(np.exp(rng.uniform(np.log(5e7), np.log(1.6e10))))
        t_max = n * float(np.exp(rng.uniform(np.log(2.0), np.log(100.0))))
        u = rng.normal(0.0, sig)
        for f in BUDGETS:
            t = f * t_max
            loss = v["E"] + v["A"] / n ** v["alpha"] + v["B"] / t ** v["beta"]
            loss = loss if regime == "both" else v["E"] + 1.0 + v["B"] / t ** v["beta"]  # alpha = 0: A/N^0 = const
            rows.append(
                {"run": f"r{i}", "params": n, "tokens": t, "loss": loss * math.exp(u + rng.normal(0.0, sig / 5))}
            )
    return pd.DataFrame(rows)


def _dcrit(case: str, regime: str, form: str, noise: str, seed: int) -> dict:
    """D_crit located?  yes = the ladder's ``located``; wrong = located with an interval that misses
    the planted D_crit at a located width."""
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(runs=dd_table(form, regime, noise, seed), law="depth-delusion", dcrit=form, write=False, seed=seed)
    ident = res.get("identification") or {}
    claim = ident.get("claim") or {}
    out = {
        "yes": bool(claim.get("identified")),
        "verdict": ident.get("verdict") if ident.get("verdict") in ("no-penalty", "not-located", "located") else None,
    }
    law_p = res["params"]
    dc = (res.get("derived") or {}).get("dcrit", {}).get("widths", {})
    out["snapped"] = any(abs(v["value"] - d) < 1e-6 for v in dc.values() if v.get("value") for d in DEPTHS)
    out["on_bound"] = [k for k in ("kappa", "c", "p") if k in (res.get("on_bound") or [])]
    located = {w: r for w, r in (ident.get("widths") or {}).items() if r.get("verdict") == "located"}
    if not located and out["yes"]:  # an older fit.json (before the ladder): its intervals at every width
        located = {w: {"interval": v.get("ci")} for w, v in dc.items() if v.get("ci")}
    missed = [
        w
        for w, r in located.items()
        if r.get("interval") and not r["interval"][0] <= dcrit_true(form, regime, float(w)) <= r["interval"][1]
    ]
    out["wrong"] = bool(out["yes"] and missed)
    # what the verdict rests on, so a rule can be studied on these fits without refitting them
    support = (res.get("checks") or {}).get("penalty_support") or {}
    out["fit"] = {
        "params": law_p,
        "ci": {k: res["ci"].get(k) for k in ("kappa", "c", "p") if k in res["ci"]},
        "dcrit": {w: v.get("ci") for w, v in dc.items()},
        "support": {k: v for k, v in support.items() if k != "params_without"},
        "runs_beyond": claim.get("runs_beyond"),
    }
    return out


def _exponent(case: str, regime: str, form, noise: str, seed: int) -> dict:
    """chinchilla's alpha and beta identified?  wrong = said of a world where alpha = 0."""
    from depthwidth.fit.pipeline import run_fit

    res = run_fit(runs=chin_table(regime, noise, seed), law="chinchilla", write=False, seed=seed)
    yes = bool(((res.get("identification") or {}).get("claim") or {}).get("identified"))
    return {"yes": yes, "wrong": False, "ci": {k: res["ci"].get(k) for k in ("alpha", "beta")}}


# A verdict kind: (label, run(case, *spec, seed) -> {yes, wrong, ...}, truth(spec) -> whether the planted
# answer is yes).  False yes: a yes where the truth is no, or a yes that is wrong (``wrong``) where it is
# yes; power: the share of yes where the truth is yes.  Further verdicts register here (VERDICTS).
VERDICTS = {
    "dcrit": ("D_crit located", _dcrit, lambda spec: REGIMES[spec[0]][2]),
    "exponent": ("alpha and beta identified", _exponent, lambda spec: spec[0] == "both"),
}
VERDICTS.update(OTHER_VERDICTS)  # every other verdict dw prints (benchmarks/verdict_kinds.py)


def cases() -> dict:
    """{case name: (verdict kind, *spec)}; spec is what the kind's run function takes after the name."""
    out = {}
    for regime in REGIMES:
        for form in ("log", "power"):
            for noise in NOISE:
                out[f"dd-{regime}-{form}-{noise}"] = ("dcrit", regime, form, noise)
    for regime in ("both", "alpha0"):
        for noise in NOISE:
            out[f"chin-{regime}-{noise}"] = ("exponent", regime, None, noise)
    out.update(other_cases())
    return out


def one(job: tuple) -> dict:
    """Plant one table, run the verdict's real code path with dw's defaults, and record it."""
    case, seed = job
    kind, *spec = cases()[case]
    t0 = time.perf_counter()
    out = VERDICTS[kind][1](case, *spec, seed)
    return {"case": case, "seed": seed, **out, "seconds": round(time.perf_counter() - t0, 2)}


def summarize(rows: list[dict]) -> list[dict]:
    out = []
    for case, (kind, *spec) in cases().items():
        rs = [r for r in rows if r["case"] == case]
        if not rs:
            continue
        label, _, truth = VERDICTS[kind]
        n = len(rs)
        yes = sum(r["yes"] for r in rs)
        if truth(spec):
            # a kind said per item (held-out points, pairs) gives shares: ``wrong`` is then the share wrong
            false_yes, power = sum(float(r.get("wrong") or 0) for r in rs if r["yes"]) / n, yes / n
        else:
            false_yes, power = yes / n, None
        row = {"verdict": label, "case": case, "tables": n, "yes": yes / n, "false_yes": false_yes, "power": power}
        if kind == "dcrit":
            rungs = ("no-penalty", "not-located", "located")
            row["ladder"] = {v: sum(r.get("verdict") == v for r in rs) for v in rungs}
            row["snapped"] = sum(r["snapped"] for r in rs) / n
            row["on_bound"] = sum(bool(r["on_bound"]) for r in rs) / n
        out.append(row)
    return out


def markdown(summary: list[dict]) -> str:
    """docs/verdicts.md's verdict table: verdict, case, false yes, power, tables (and the ladder's rungs)."""

    def rate(x):
        return "—" if x is None else f"{x:.2f}"

    out = ["| verdict | case | false yes | power | tables | rungs (no-penalty / not-located / located) |"]
    out.append("|---|---|---:|---:|---:|---|")
    for s in summary:
        rungs = " / ".join(str(v) for v in s["ladder"].values()) if "ladder" in s else ""
        out.append(
            f"| {s['verdict']} | {s['case']} | {rate(s['false_yes'])} | {rate(s['power'])} | {s['tables']} | {rungs} |"
        )
    return "\n".join(out)


def by_verdict(summary: list[dict]) -> str:
    """The README's compact table: one row per verdict over its cases (worst false yes and the case
    it was measured in, the power range over the cases where the planted answer is yes, tables a case)."""
    out = ["| verdict | cases | worst false yes (case) | power where the answer is yes | tables a case |"]
    out.append("|---|---:|---|---|---|")
    for label in dict.fromkeys(s["verdict"] for s in summary):
        rows = [s for s in summary if s["verdict"] == label]
        worst = max(rows, key=lambda s: s["false_yes"])
        powers = [s["power"] for s in rows if s["power"] is not None]
        power = "—" if not powers else f"{min(powers):.2f}–{max(powers):.2f}" if len(powers) > 1 else f"{powers[0]:.2f}"
        n = sorted(s["tables"] for s in rows)
        tables = f"{n[0]}" if n[0] == n[-1] else f"{n[0]}–{n[-1]}"
        out.append(f"| {label} | {len(rows)} | {worst['false_yes']:.2f} ({worst['case']}) | {power} | {tables} |")
    return "\n".join(out)


def _open_rows(path: Path, mode: str):
    """The rows file, gzip-compressed where its name ends in .gz (gzip reads the members appended)."""
    return gzip.open(path, mode) if path.suffix == ".gz" else path.open(mode)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", type=int, default=100, help="planted tables per case")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", type=Path, default=None, help="write the summary here")
    ap.add_argument(
        "--rows", type=Path, default=None, help="append one JSON line per table here (resumable; .gz: compressed)"
    )
    ap.add_argument("--markdown", action="store_true", help="print the summary as docs/verdicts.md's table rows")
    ap.add_argument("--by-verdict", action="store_true", help="print the README's table: one row per verdict")
    a = ap.parse_args(argv)
    names = a.cases.split(",") if a.cases else list(cases())
    bad_names = [c for c in names if c not in cases()]
    if bad_names:
        print(f"unknown case(s): {', '.join(bad_names)} (allowed: {', '.join(cases())})", file=sys.stderr)
        return 2
    done: list[dict] = []
    if a.rows and a.rows.exists():
        with _open_rows(a.rows, "rt") as f:
            done = [json.loads(x) for x in f.read().splitlines() if x.strip()]
    have = {(r["case"], r["seed"]) for r in done}
    jobs = [(c, s) for s in range(a.tables) for c in names if (c, s) not in have]  # every case grows evenly
    t0 = time.perf_counter()
    with ProcessPoolExecutor(a.workers) as ex:
        for r in ex.map(one, jobs, chunksize=1):
            done.append(r)
            if a.rows:
                with _open_rows(a.rows, "at") as f:  # a .gz file grows by one gzip member a table
                    f.write(json.dumps(r) + "\n")
    rows = [r for r in done if r["case"] in names]
    summary = summarize(rows)
    if a.markdown or a.by_verdict:
        print(by_verdict(summary) if a.by_verdict else markdown(summary))
        return 0
    print(f"{'verdict':<26} {'case':<24} {'yes':>6} {'false yes':>9} {'power':>6} {'tables':>6}  ladder / snapped")
    for s in summary:
        extra = ""
        if "ladder" in s:
            extra = " ".join(f"{k}:{v}" for k, v in s["ladder"].items()) + f" snapped {s['snapped']:.2f}"
        pw = "—" if s["power"] is None else f"{s['power']:.2f}"
        head = f"{s['verdict']:<26} {s['case']:<24} {s['yes']:>6.2f} {s['false_yes']:>9.2f}"
        print(f"{head} {pw:>6} {s['tables']:>6}  {extra}")
    doc = {"cases": summary, "seconds": round(time.perf_counter() - t0, 1), "tables_per_case": a.tables}
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1))
    print(json.dumps({"worst_false_yes": max((s["false_yes"] for s in summary), default=None), **doc}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
