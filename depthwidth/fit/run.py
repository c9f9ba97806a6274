"""``dw fit`` end to end: validate, load, clean, fit, bootstrap, derive, compare, write.

``run_fit(...)`` returns the JSON document (stable keys ``law, n, params{},
ci{}, r2, rmse, objective, excluded[], derived{}`` plus more) and, for a
sweep, writes it to ``ROOT/NAME/fit.json`` (atomically) for ``dw report``.
All argument checks happen before anything is read or written.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np

from depthwidth.core import provenance
from depthwidth.core.atomic import write_json
from depthwidth.core.store import check_name
from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.boot import bootstrap as boot_fn
from depthwidth.fit.boot import RESAMPLE, bound_hits, param_samples, percentile_ci
from depthwidth.fit.compare import compare_laws, label
from depthwidth.fit.count import check_convention, count_model, with_convention
from depthwidth.fit.count import warnings_for as count_warnings
from depthwidth.fit.derived import C_REF, derived_numbers, nest
from depthwidth.fit.engine import fit_law
from depthwidth.fit.holdout import holdout as holdout_fn
from depthwidth.fit.identify import identification
from depthwidth.fit.intervals import coverage_warnings, underdetermined
from depthwidth.fit.intervals import measured as measured_coverage
from depthwidth.fit.intervals import vet as vet_intervals
from depthwidth.fit.isoflop import AXES as ISOFLOP_AXES
from depthwidth.fit.isoflop import budgets as isoflop_budgets
from depthwidth.fit.isoflop import isoflop as isoflop_fn
from depthwidth.fit.holdout import parse_holdout, split_largest
from depthwidth.fit.laws import LAW_NAMES, get_law, parse_pins
from depthwidth.fit.persistence import persistence
from depthwidth.fit.sensitivity import sensitivity as sensitivity_fn
from depthwidth.fit.table import (
    apply_columns,
    apply_where,
    parse_columns,
    prepare,
    read_table,
    runs_root,
)
from depthwidth.fit.planted import compare as compare_planted
from depthwidth.fit.planted import read_world
from depthwidth.track.table import probe_profiles, refuse_mixed, run_table
from depthwidth.track.wandb_table import run_table_from_wandb

SCHEMA = "dw.fit/1"


SOURCES = ("store", "wandb")
APPROACHES = ("3", "isoflop")  # 3: the law fitted to every point; isoflop: approach 2 beside it
DROPPED = ("failed", "diverged")  # run statuses whose probe profiles tau(W) leaves out


def check_source(name, runs, source, project) -> None:
    """Exactly one input: a sweep NAME, --runs FILE, or --source wandb --project P."""
    if source not in SOURCES:
        raise bad("--source", source, " | ".join(SOURCES))
    given = [x for x, on in (("a sweep name", name is not None), ("--runs", runs is not None),
                             ("--source wandb", source == "wandb")) if on]
    if len(given) != 1:
        raise BadInput("bad value for input: " + (" and ".join(given) if given else "nothing")
                       + " (allowed: exactly one of NAME, --runs FILE or --source wandb --project ENTITY/PROJECT)")
    if source == "wandb" and not project:
        raise bad("--project", project, "ENTITY/PROJECT, required with --source wandb")


def _check(name, runs, bootstrap, delta, level, compare, dcrit, source="store", project=None) -> list[str]:
    check_source(name, runs, source, project)
    if bootstrap < 0:
        raise bad("--bootstrap", bootstrap, "an integer >= 0 (0 disables intervals)")
    if not (delta > 0 and math.isfinite(delta)):
        raise bad("--huber-delta", delta, "a number > 0")
    if not 0 < level < 1:
        raise bad("--ci", level, "a level in (0, 1), e.g. 0.95")
    if dcrit not in ("log", "power"):
        raise bad("--dcrit", dcrit, "log | power")
    names: list[str] = []
    if compare:
        for c in compare.split(","):
            c = c.strip()
            if not c:
                continue
            if c not in LAW_NAMES:
                raise bad("--compare", c, " | ".join(LAW_NAMES))
            if c not in names:
                names.append(c)
    return names


def load_table(name=None, runs=None, columns=None, root=None, source="store", project=None, group=None):
    """(DataFrame with canonical columns, sweep_dir or None)."""

    mapping = parse_columns(columns)
    if source == "wandb":

        return apply_columns(run_table_from_wandb(project, group), mapping), None
    if runs is not None:
        return apply_columns(read_table(runs), mapping), None

    sweep_dir = runs_root(root) / check_name(name)
    if not sweep_dir.is_dir():
        raise bad("sweep", name, f"a sweep directory under {runs_root(root)} (set --root or DW_RUNS)")
    df = run_table(sweep_dir)
    if len(df) == 0:
        if (going := unfinished(name, sweep_dir, root)) is not None:
            raise BadInput(f"sweep {name} has no finished run yet ({going})")
        raise bad("sweep", name, f"a sweep with at least one run summary.json in {sweep_dir}")
    refuse_mixed(df, f"sweep {name}")
    return apply_columns(df, mapping), sweep_dir


def unfinished(name: str, sweep_dir: Path, root=None) -> str | None:
    """"K started, M pending: dw status NAME" for the sweep's runs that have not ended (the
    manifest's own view: fit may not import launch), or None when every run has ended."""
    from depthwidth.core.atomic import read_jsonl
    from depthwidth.core.store import MANIFEST, manifest_runs, read_json

    submitted = manifest_runs(read_jsonl(sweep_dir / MANIFEST)) if (sweep_dir / MANIFEST).is_file() else {}
    going = [r for r in submitted.values()
             if (read_json(Path(r.get("run_dir") or sweep_dir / r["run_id"]) / "summary.json") or {}).get("status")
             in (None, "running")]
    started = sum(1 for r in going if r.get("started"))
    parts = [f"{n} {what}" for n, what in ((started, "started"), (len(going) - started, "not started")) if n]
    if not parts:
        return None
    see = f"dw status {name}" if root is None else f"DW_RUNS={runs_root(root)} dw status {name}"
    return f"{', '.join(parts)}: {see}"


def _runs_label(runs):
    if runs is None:
        return None
    return "DataFrame" if hasattr(runs, "columns") else str(runs)


def table_fingerprint(df) -> str:
    """A hash of the fitted input table (rows in file order, every column), for provenance."""
    return provenance.fingerprint(df.to_csv(index=False))


def jsonable(x):
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if math.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    return x


def sweep_quantum(sweep_dir, table=None) -> int | None:
    """The smallest width quantum (model.quantum) of the runs: a ``quantum`` column, or each run's config.yaml."""
    if table is not None and "quantum" in table:
        q = np.asarray(table["quantum"], dtype=float)
        q = q[np.isfinite(q) & (q >= 1)]
        return int(q.min()) if len(q) else None
    if sweep_dir is None:
        return None
    import yaml

    qs = []
    for f in Path(sweep_dir).glob("*/config.yaml"):
        try:
            q = ((yaml.safe_load(f.read_text(encoding="utf-8")) or {}).get("model") or {}).get("quantum")
            qs.append(int(q))
        except (OSError, ValueError, TypeError, AttributeError, yaml.YAMLError):
            continue
    return min(qs) if qs else None


def fit_identity(law_label: str, where) -> dict:
    return {"law": law_label, "where": sorted(str(w) for w in (where or []))}


def check_replace(path: Path, law_label: str, where) -> None:
    """A sweep's fit.json is what its report shows: a fit of another law or filter replaces it only
    with --force (bad input, before anything is fitted)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    o = old.get("options") or {}
    mine = fit_identity(law_label, where)
    theirs = fit_identity(label(get_law(old.get("law", "chinchilla"), dcrit=o.get("dcrit", "log"),
                                        irreducible=bool(o.get("irreducible")))), old.get("where"))
    if mine != theirs:
        w = ", ".join(theirs["where"]) or "every run"
        me = ", ".join(mine["where"]) or "every run"
        raise BadInput(f"{path} holds a {theirs['law']} fit of {w} that the report shows; this {law_label} fit "
                       f"of {me} (--law: chinchilla when not given; --where) would replace it: --force to "
                       "replace it, --out FILE to write elsewhere, or --no-write")


def run_fit(name: str | None = None, *, runs=None, columns: str | None = None, law: str = "chinchilla",
            dcrit: str = "log", irreducible: bool = False, bootstrap: int = 200, seed: int = 0,
            pins=None, compare: str | None = None, delta: float = 1e-3, level: float = 0.95,
            root: str | None = None, probe_step: int = 1000, out=None, write: bool = True,
            max_starts: int = 4500, source: str = "store", project: str | None = None,
            group: str | None = None, where=None, holdout: str | None = None,
            sensitivity: bool = False, approach: str = "3", isoflop_axis: str = "auto",
            n_convention: str | None = None, c_ref: float = C_REF, resample: str = "noise",
            force: bool = False) -> dict:
    t0 = time.perf_counter()
    names = _check(name, runs, bootstrap, delta, level, compare, dcrit, source, project)
    if approach not in APPROACHES:
        raise bad("--approach", approach, " | ".join(APPROACHES))
    if isoflop_axis not in ISOFLOP_AXES:
        raise bad("--isoflop-axis", isoflop_axis, " | ".join(ISOFLOP_AXES))
    holdout_k = parse_holdout(holdout)
    lw = get_law(law, dcrit=dcrit, irreducible=irreducible)
    n_conv = check_convention(n_convention, lw.name)
    if resample not in RESAMPLE:
        raise bad("--resample", resample, " | ".join(RESAMPLE))
    if not (isinstance(c_ref, (int, float)) and math.isfinite(c_ref) and c_ref > 0):
        raise bad("--c-ref", c_ref, "a compute in FLOPs > 0, e.g. 1e21")
    pin_vals = parse_pins(pins, lw)
    if max_starts < 1:
        raise bad("--max-starts", max_starts, "an integer >= 1")
    if out is not None and Path(out).is_dir():
        raise bad("--out", str(out), "a file path (not a directory)")

    df, sweep_dir = load_table(name, runs, columns, root, source, project, group)
    if write and out is None and sweep_dir is not None and not force:
        check_replace(sweep_dir / "fit.json", label(lw), where)
    df = apply_where(df, where)
    data_fp = table_fingerprint(df)  # the input table as given, before N is chosen
    try:
        df, n_note = with_convention(df, n_conv)
    except BadInput:
        if "params" in lw.columns or n_convention is not None or not {"depth", "width"} <= set(map(str, df.columns)):
            raise
        # a law that does not read N (width-depth) still needs one for C = 6·N·T: say which
        n_conv = "12DW2"
        df, n_note = with_convention(df, n_conv)
        n_note += ": the table has no params column for the compute constraint"
    if names:  # every compared law must find its columns too
        for n in names:
            for lv in ([get_law(n, "log", irreducible)] if n == "depth-delusion" else [get_law(n)]):
                prepare(df, lv)
    going = unfinished(name, sweep_dir, root) if sweep_dir is not None else None
    try:
        clean, excluded, notes = prepare(df, lw)
    except BadInput as e:  # e.g. too few points yet: say which runs are still to come
        raise BadInput(f"{e}; not yet ended: {going}") if going else e from None
    if going:
        notes.insert(0, f"fitted on the runs that have ended; not yet in this fit: {going} (refit when they end)")
    if "shape" in clean:
        sh = clean.groupby("run")["shape"].first().astype(str)
        shaped = int((~sh.isin(["uniform", "None", "nan"])).sum())
        if shaped:
            notes.append(f"{shaped} of {len(sh)} runs have a non-uniform width shape and {lw.name} has no shape "
                         "term: its parameters pool the shapes (fit --where shape=uniform for the uniform runs)")
    if holdout_k is not None:  # bad splits and tables without compute fail before any fit
        split_largest(clean, holdout_k)
    if approach == "isoflop":
        isoflop_budgets(clean)
    try:
        fr = fit_law(clean, lw, pins=pin_vals, delta=delta, seed=seed, max_starts=max_starts)
    except BadInput as e:
        raise BadInput(f"{e}; not yet ended: {going}") if going else e from None
    count = count_model(clean, n_conv)
    warnings = list(fr.warnings) + notes + count_warnings(count, lw)
    widths = sorted(set(np.asarray(clean["width"], dtype=float).astype(int))) if "width" in clean else []
    point = {k: float(v[0]) for k, v in derived_numbers(lw, fr.params, widths, c_ref, count).items()}

    ci: dict = {p: None for p in fr.params}
    dci: dict = {k: None for k in point}
    seed_ci = None
    ci_withheld: dict = {}
    ci_flagged: dict = {}
    boot_info = {"replicates": bootstrap, "unit": "run" if resample == "runs" else "seed noise", "resample": resample}
    samples = None
    boot_theta = np.empty((0, len(fr.theta)))
    if bootstrap > 0:
        b = boot_fn(fr, clean, bootstrap, seed=seed, kind=resample)
        boot_theta = b["theta"][b["ok"]]
        samples = param_samples(fr, b)
        ci = {k: ([fr.params[k]] * 2 if k in pin_vals else percentile_ci(v, level)) for k, v in samples.items()}
        ds = derived_numbers(lw, samples, widths, c_ref, count) if len(next(iter(samples.values()))) else {}
        dci = {k: percentile_ci(v, level) for k, v in ds.items()}
        ok = int(b["ok"].sum())
        boot_info.update({"converged": ok, "runs": b["n_runs"], "level": level})
        if ok < bootstrap:
            warnings.append(f"{bootstrap - ok} of {bootstrap} bootstrap refits failed to converge")
        if b["n_runs"] < 5:
            warnings.append(f"only {b['n_runs']} runs: bootstrap intervals are unreliable")
        for k, f in bound_hits(fr, b).items():
            if f >= 0.1:
                warnings.append(f"{k} is on a bound in {100 * f:.0f}% of bootstrap refits: its interval is cut by the bound")
        sb = boot_fn(fr, clean, bootstrap, seed=seed + 1, kind="seeds")
        if sb is not None:
            ss = param_samples(fr, sb)
            seed_ci = {k: ([fr.params[k]] * 2 if k in pin_vals else percentile_ci(v, level)) for k, v in ss.items()}
            boot_info["seed_replicates"] = int(sb["ok"].sum())
        # what may be shown (fit/intervals.py): withheld intervals, and measured coverage outside 90-98%
        ci, w1, f1 = vet_intervals(fr.params, ci, ok, bootstrap)
        dci, w2, f2 = vet_intervals(point, dci, ok, bootstrap)
        ci_withheld, ci_flagged = {**w1, **w2}, {**f1, **f2}
        for what, d in (("withheld", ci_withheld), ("flagged", ci_flagged)):
            if d:
                warnings.append(f"{len(d)} interval(s) {what} ({', '.join(list(d)[:6])}"
                                + (" …" if len(d) > 6 else "") + f"): e.g. {next(iter(d.values()))}")
        warnings += coverage_warnings(label(lw), [*ci, *dci], measured_coverage(label(lw), resample, level),
                                      holdout=holdout_k is not None)
    else:
        warnings.append("--bootstrap 0: no intervals; point estimates alone can mislead")
    under = underdetermined(fr, clean)
    for p in lw.params:
        c = ci.get(p.name)
        if p.exponent and p.name not in pin_vals and c is not None and c[0] <= 0 <= c[1]:
            warnings.append(f"{p.name}: {100 * level:.0f}% interval [{c[0]:.3g}, {c[1]:.3g}] contains 0: the data do not establish this exponent")
    for k, c in dci.items():
        if k.endswith("_exponent") and c is not None and c[0] <= 0 <= c[1]:
            warnings.append(f"{k}: {100 * level:.0f}% interval [{c[0]:.3g}, {c[1]:.3g}] contains 0")

    derived = nest(point, dci, lw, widths, c_ref, count)
    world = read_world(sweep_dir) if "simulated" in clean and clean["simulated"].astype(bool).all() else None
    if sweep_dir is not None:

        # tau(W) from the runs this fit is about: those --where kept, less failed and diverged
        # runs (their last profiles are not training's) -- the runs the report's figure draws.
        kept = set(np.asarray(df["run"]).astype(str)) if "run" in df else set()
        profs = [p for p in probe_profiles(sweep_dir) if p["run"] in kept and p.get("status") not in DROPPED]
        if profs:
            gp = persistence(profs, step=probe_step, B=bootstrap, level=level, seed=seed, law=lw,
                             law_values=fr.params, law_samples=samples)
            warnings += gp.pop("warnings", [])
            derived["gradient_persistence"] = gp

    res = {
        "schema": SCHEMA,
        "law": lw.name,
        "n": fr.n,
        "params": fr.params,
        "ci": ci,
        "r2": fr.r2,
        "rmse": fr.rmse,
        "objective": fr.objective,
        "excluded": excluded,
        "where": [str(w) for w in (where or [])],
        "derived": derived,
        "formula": lw.formula,
        "options": dict(lw.options),
        "n_convention": {"name": n_conv, "n": n_note, "count": count.to_dict() if count else None},
        "n_runs": fr.n_runs,
        "rmse_log": fr.rmse_log,
        "huber_delta": delta,
        "pinned": pin_vals,
        "on_bound": fr.on_bound,
        "starts": fr.starts,
        "bootstrap": boot_info,
        "seed_ci": seed_ci,
        "ci_withheld": ci_withheld,
        "ci_flagged": ci_flagged,
        "underdetermined": under,
        "warnings": under + warnings,
        "source": {"sweep": name, "dir": str(sweep_dir) if sweep_dir else None,
                   "runs": _runs_label(runs), "columns": columns},
        "provenance": provenance.record(data=data_fp),
    }
    if world is not None:
        res["planted"] = compare_planted(world, lw, fr.params, ci, point, dci, widths, c_ref, count, n_conv,
                                         ci_withheld)
    if names:

        if lw.name not in names:  # the fitted law always takes part in its own comparison
            names = [lw.name] + names
        cmp = compare_laws(clean, names, irreducible=irreducible, pins=pin_vals, delta=delta, seed=seed,
                           fits={label(lw): fr}, max_starts=max_starts, holdout_k=holdout_k)
        cmp.pop("_fits", None)
        res["compare"] = cmp
    res["identification"] = identification(clean, lw, fr.params, on_bound=fr.on_bound, ci=ci, derived=derived,
                                           support=fr.checks.get("penalty_support"),
                                           quantum=sweep_quantum(sweep_dir, clean))
    if approach == "isoflop":
        res["isoflop"] = isoflop_fn(clean, axis=isoflop_axis, B=bootstrap, level=level, seed=seed, law=lw,
                                    theta=np.vstack([fr.theta[None, :], boot_theta]), resample=resample)
    if sensitivity:
        res["sensitivity"] = jsonable(sensitivity_fn(clean, lw, delta=delta, max_starts=max_starts, pins=pin_vals,
                                                     seed=seed, widths=widths, ci={**ci, **dci} if bootstrap else {},
                                                     base=fr, boot=(bootstrap, level), convention=n_conv,
                                                     count=count, c_ref=c_ref, resample=resample))
    if holdout_k is not None:
        res["holdout"] = holdout_fn(clean, lw, k=holdout_k, bootstrap_n=bootstrap, level=level, pins=pin_vals,
                                    delta=delta, seed=seed, max_starts=max_starts, resample=resample)
    res["seconds"] = round(time.perf_counter() - t0, 3)
    res = jsonable(res)
    if write:

        target = Path(out) if out is not None else (sweep_dir / "fit.json" if sweep_dir is not None else None)
        if target is not None:
            write_json(target, res)
            res["written"] = str(target)
    return res
