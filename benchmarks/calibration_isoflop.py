"""Coverage of ``dw fit --approach isoflop``'s intervals on planted isoFLOP sweeps.

Each case plants ``n_sweeps`` sweeps (tests/planted.py ``isoflop_table``: 4 budgets,
1e18-1e21 FLOPs, log-normal noise of σ in ln loss) with known truth, runs
``fit/isoflop.py`` on each, and counts how often each reported interval holds the
truth: every budget's optimum x* (the law's exact minimiser along that budget's
curve: ``chinchilla_optimum``, ``width_depth_depth_optimum``) and the exponents of
the optima in C (``isoflop_exponents``: β/(α+β) for chinchilla; the slopes of
ln D*(N(C)) and ln W* for width-depth).  An open interval ("> lo") reaches to
±∞ on its open side.  A number reported without an interval is counted apart
(``no_interval``), not as covered.  The x* rows also give the bias, the mean of
ln(x*/truth) over the sweeps (of the estimate minus the truth for an exponent);
an exponent row's ``partial`` counts the sweeps whose interval rested on part
of the replicates (more than (1 - level)/2 of them had an optimum off a range).

Cases (7 runs per budget unless named):
  params σ=0.003, params σ=0.01   chinchilla, N over ±1.5 in ln N, grid 0.3 off the optimum
  depth σ=0.003                   width-depth, D over ±1.2 in ln D (isoflop_depth.yaml's 4-48), 0.2 off
  depth grid σ=0.003              width-depth, the same 7 depths (6-48) at every budget
  params 5 runs                   chinchilla σ=0.003, 5 runs per budget
  depth 4 runs                    width-depth σ=0.003 at ±1.2, 4 runs: a plain parabola (no skew term)
  params 3 runs                   chinchilla σ=0.003, 3 runs per budget: must give no interval
  params σ=0.02, params edge σ=0.005 (the optimum 0.2 in ln N below each grid's top),
  depth grid σ=0.006               harder designs, where many replicate optima leave their range

    python benchmarks/calibration_isoflop.py [--sweeps 200] [--before OLD.py] [--resample runs] [--no-skew]

``--before`` measures another version of the module too (e.g. the one before
this calibration: ``git show REV:depthwidth/fit/isoflop.py > /tmp/old_isoflop.py``).
Prints a table (number, nominal, measured, sweeps) per version, then one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from depthwidth.fit.laws import get_law  # noqa: E402
from tests.planted import PLANTED, isoflop_exponents, isoflop_table  # noqa: E402

BUDGETS = (1e18, 1e19, 1e20, 1e21)
DEPTHS = tuple(6.0 * 2 ** (k / 2) for k in range(7))  # 6 ... 48
CASES = {
    "params σ=0.003": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": 0.3, "noise": 0.003},
    "params σ=0.01": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": 0.3, "noise": 0.01},
    "depth σ=0.003": {"law": "width-depth", "axis": "depth", "span": 1.2, "offset": 0.2, "noise": 0.003},
    "depth grid σ=0.003": {"law": "width-depth", "axis": "depth", "grid": DEPTHS, "noise": 0.003},
    "params 5 runs": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": 0.3, "noise": 0.003, "n": 5},
    "depth 4 runs": {"law": "width-depth", "axis": "depth", "span": 1.2, "offset": 0.2, "noise": 0.003, "n": 4},
    "params 3 runs": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": 0.3, "noise": 0.003, "n": 3},
    # harder: more noise, an optimum 0.2 in ln N below the top of every grid
    "params σ=0.02": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": 0.3, "noise": 0.02},
    "params edge σ=0.005": {"law": "chinchilla", "axis": "params", "span": 1.5, "offset": -1.3, "noise": 0.005},
    "depth grid σ=0.006": {"law": "width-depth", "axis": "depth", "grid": DEPTHS, "noise": 0.006},
}


def load(path: str):
    """The isoflop module at ``path`` (another version of fit/isoflop.py)."""
    spec = importlib.util.spec_from_file_location(f"isoflop_{abs(hash(path))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inside(ci, t: float) -> bool:
    lo = -math.inf if ci[0] is None else ci[0]
    hi = math.inf if ci[1] is None else ci[1]
    return lo <= t <= hi


def _tally(d: dict, key: str, ci, truth: float, est=None, partial: bool = False):
    e = d.setdefault(key, {"covered": 0, "total": 0, "no_interval": 0, "open": 0, "_bias": []})
    if est is not None and est > 0:
        e["_bias"].append(math.log(est / truth) if key.endswith(")") else est - truth)
    if not ci:
        e["no_interval"] += 1
        return
    e["total"] += 1
    e["open"] += None in ci
    e["covered"] += _inside(ci, truth)
    if partial:  # an exponent interval resting on part of the replicates (the rest left a range)
        p = e.setdefault("partial", {"covered": 0, "total": 0})
        p["total"] += 1
        p["covered"] += _inside(ci, truth)


def measure(case: dict, n_sweeps: int, seed: int, B: int, level: float, fn, **kw) -> dict:
    """{number: {covered, total, coverage, no_interval, open, bias}} for one case."""
    law, vals, axis = get_law(case["law"]), PLANTED[case["law"]], case["axis"]
    exps = isoflop_exponents(vals, axis, BUDGETS)
    sym = "N" if axis == "params" else "D"
    opts = {k: case[k] for k in ("span", "offset", "noise", "n", "grid") if k in case}
    out: dict = {}
    for s in range(n_sweeps):
        df, truth = isoflop_table(law, vals, budgets=BUDGETS, axis=axis, seed=seed + s, **opts)
        r = fn(df, axis=axis, B=B, level=level, seed=seed + s, **kw)
        for b in r["budgets"]:
            c = min(truth, key=lambda k: abs(math.log(k / b["C"])))
            _tally(out, f"{sym}*({c:.0e})", b.get("x_opt_ci"), truth[c], b.get("x_opt"))
        for k, a in exps.items():
            p = r["power_laws"].get(k) or {}
            part = p.get("bounded_replicates", B) < (1 - (1 - level) / 2) * p.get("replicates", B)
            _tally(out, f"a_{k}", p.get("ci"), a, p.get("exponent"), part)
    for e in out.values():
        e["coverage"] = e["covered"] / e["total"] if e["total"] else None
        bias = e.pop("_bias")
        e["bias"] = float(np.mean(bias)) if bias else None
    return out


def coverage(
    n_sweeps: int = 200, seed: int = 0, cases=None, B: int = 200, level: float = 0.95, module=None, **isoflop_kw
) -> dict:
    """{case: {number: {covered, total, coverage, no_interval, open, bias}}} over ``n_sweeps`` planted sweeps.

    ``cases``: names from CASES (default: all) or {name: case}; ``module``: another
    version of fit/isoflop.py (a module or a path), default this tree's;
    ``isoflop_kw``: passed to ``isoflop`` (e.g. resample="runs", skew=False)."""
    if module is None:
        from depthwidth.fit import isoflop as module
    elif isinstance(module, (str, Path)):
        module = load(str(module))
    chosen = CASES if cases is None else ({k: CASES[k] for k in cases} if not isinstance(cases, dict) else cases)
    return {name: measure(c, n_sweeps, seed, B, level, module.isoflop, **isoflop_kw) for name, c in chosen.items()}


def table(res: dict, level: float, title: str) -> str:
    lines = [
        title,
        f"{'case':<20} {'number':<11} {'nominal':>7} {'measured':>8} {'sweeps':>6} {'open':>5} "
        f"{'no CI':>5} {'bias':>8}  partial",
    ]
    for case, nums in res.items():
        for k, e in nums.items():
            cov = "—" if e["coverage"] is None else f"{100 * e['coverage']:.1f}%"
            bias = "—" if e["bias"] is None else f"{e['bias']:+.4f}"
            p = e.get("partial")
            part = f"{p['covered']}/{p['total']}" if p else ""
            lines.append(
                f"{case:<20} {k:<11} {100 * level:>6.0f}% {cov:>8} {e['total']:>6} {e['open']:>5} "
                f"{e['no_interval']:>5} {bias:>8}  {part}"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweeps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replicates", type=int, default=200, help="bootstrap replicates (dw fit's default --bootstrap)")
    ap.add_argument("--before", help="another fit/isoflop.py to measure too (e.g. from git show)")
    ap.add_argument("--resample", choices=["noise", "runs"], default="noise")
    ap.add_argument("--no-skew", action="store_true", help="plain parabolas (no cubic term)")
    ap.add_argument("--cases", nargs="*", choices=list(CASES))
    a = ap.parse_args(argv)
    kw = {"resample": a.resample} if a.resample != "noise" else {}
    kw.update({"skew": False} if a.no_skew else {})
    out = {}
    if a.before:
        out["before"] = coverage(a.sweeps, a.seed, a.cases, a.replicates, module=a.before)
        print(table(out["before"], 0.95, f"before ({a.before}): {a.sweeps} sweeps, {a.replicates} replicates"))
        print()
    out["after"] = coverage(a.sweeps, a.seed, a.cases, a.replicates, **kw)
    label = ", ".join(f"{k}={v}" for k, v in kw.items()) or "defaults"
    print(table(out["after"], 0.95, f"this tree ({label}): {a.sweeps} sweeps, {a.replicates} replicates"))
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
