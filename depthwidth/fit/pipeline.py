"""``dw fit`` end to end, one named step each: check, load, count, clean, fit, intervals, derive,
the optional sections, write.

``fit_document(...)`` returns the typed result (fit/result.py ``FitDocument``: ``law, n, params{},
ci{}, r2, rmse, objective, excluded[], derived{}`` plus more, the analyses under ``sections``) and,
for a sweep, writes it to ``ROOT/NAME/fit.json`` (atomically) for ``dw report``; ``run_fit(...)``
returns the same document as a plain dict (the library's ``fit()``).
Every option is a field of ``FitOptions`` (options.py); all argument checks
happen before anything is read or written.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from depthwidth.core import provenance
from depthwidth.core.errors import BadInput
from depthwidth.fit.analyses import Context
from depthwidth.fit.analyses import own as own_document
from depthwidth.fit.analyses import run_all as run_analyses
from depthwidth.fit.boot import bootstrap as boot_fn
from depthwidth.fit.boot import (
    bound_hits,
    noise_scales,
    param_samples,
    percentile_ci,
    replicates_record,
    underdetermined,
)
from depthwidth.fit.boot import vet as vet_intervals
from depthwidth.fit.derived import N_NAMES, count_model, derived_numbers, nest, unused_count, with_convention
from depthwidth.fit.derived import warnings_for as count_warnings
from depthwidth.fit.analyses.downstream import check_metric
from depthwidth.fit.engine import fit_law
from depthwidth.fit.files import check_out, jsonable, read_input, sweep_quantum, table_fingerprint, unfinished
from depthwidth.fit.files import beside_fit, write_document
from depthwidth.fit.holdout import split_largest
from depthwidth.fit.isoflop import budgets as isoflop_budgets
from depthwidth.fit.laws import get_law, is_user
from depthwidth.fit.options import Checked, FitOptions
from depthwidth.fit.result import FitDocument
from depthwidth.fit.table import apply_where, one_shape, prepare
from depthwidth.fit.tuning import picks as tuning_picks
from depthwidth.fit.tuning import select as tuning_select
from depthwidth.fit.userlaw import check_columns
from depthwidth.fit.userlaw import record as law_record
from depthwidth.fit.verdicts import identification
from depthwidth.track.run_source import RunSource

SCHEMA = "dw.fit/1"


def run_fit(
    name: str | RunSource | None = None,
    *,
    options: FitOptions | None = None,
    out=None,
    write: bool = True,
    force: bool = False,
    **settings,
) -> dict:
    """``dw fit``: the fit.json document of the runs named by ``name`` (a sweep, or a ``RunSource``)
    or by the source keywords (``runs=FILE``, ``root=``, ``source="wandb"``: track/run_source.py),
    as a plain dict (``fit_document(...).as_dict()``: ``written`` says where it went); an analysis that
    is a document of its own (fit/analyses/: ``--match``, ``match=True``: match.json; ``--law lr``:
    lr_fit.json) instead, neither a law fit.

    ``options`` is a ``FitOptions``; its fields may also be given as keywords (``law="depth-delusion",
    bootstrap=1000``), which override it.  ``write``: to ``out``, else ROOT/NAME/fit.json for a sweep;
    a sweep's fit of another law or filter is replaced only with ``force``.
    """
    t0 = time.perf_counter()
    src = RunSource.take(name, settings)
    opts = replace(options or FitOptions(), **settings)
    if (m := own_document(opts)) is not None:  # --match, --law lr: an analysis that is a document of its own
        return _own(m, src, opts, out, write, t0)
    return fit_document(src, options=opts, out=out, write=write, force=force).as_dict()


def fit_document(name=None, *, options=None, out=None, write=True, force=False, **settings) -> FitDocument:
    """``run_fit``'s fit (its arguments) as the typed result (fit/result.py ``FitDocument``), what
    ``dw fit`` prints and ``dw report`` walks; written (to_json: fit.json) as ``run_fit`` writes it,
    ``written`` says where.  ``--match`` and ``--law lr`` make no fit document (``run_fit`` returns
    theirs)."""
    t0 = time.perf_counter()
    src = RunSource.take(name, settings)
    opts = replace(options or FitOptions(), **settings)
    if (m := own_document(opts)) is not None:
        raise BadInput(f"{m.FLAG} writes {m.DOCUMENT}, not a fit document: {m.CALL}")
    chk = opts.checked()
    check_out(out)

    rt = read_input(src)
    df = apply_where(rt.df, opts.where)
    df, pooled, shape_note = one_shape(df, chk.law, opts)
    if shape_note and not pooled:  # the uniform runs by default: the fit is of shape=uniform, and says so
        opts = replace(opts, where=[*opts.where_list, "shape=uniform"])
    if write and out is None and rt.sweep_dir is not None and not force:
        check_replace(rt.sweep_dir / "fit.json", opts)
    if opts.metric is not None:
        check_metric(opts.metric, df.columns)  # --metric METRIC:TASK: a column dw eval wrote
    untuned = df
    df, picks = _tuned(df, opts)
    if is_user(chk.law):
        check_columns(chk.law, df.columns, chk.n_convention)  # a user law's unknown symbol, named as its file has it
    data_fp = table_fingerprint(df)  # the input table as given, before N is chosen
    df, n_conv, n_note = _count_as(df, chk, opts)
    going = unfinished(src.name, rt.sweep_dir, src.root) if rt.sweep_dir is not None else None
    clean, excluded, notes = _clean(df, chk, opts, going)
    notes[:0] = [shape_note] if shape_note else []
    notes += [w for w in [unused_count(df, n_conv) if opts.n_convention is None else None] if w]
    fr = _fit(clean, chk, opts, going)

    count = None if is_user(chk.law) else count_model(clean, n_conv)  # N(D, W) serves built-in optima only
    warnings = list(fr.warnings) + notes + count_warnings(count, chk.law)
    widths = sorted(set(np.asarray(clean["width"], dtype=float).astype(int))) if "width" in clean else []
    point = {k: float(v[0]) for k, v in derived_numbers(chk.law, fr.params, widths, opts.c_ref, count).items()}
    iv = _intervals(fr, clean, chk, opts, point, widths, count)
    warnings += iv.warnings + _contains_zero(chk, opts.level, iv)
    derived = nest(point, iv.dci, chk.law, widths, opts.c_ref, count)

    under = underdetermined(fr, clean)
    res = {
        "schema": SCHEMA,
        "law": chk.law.name,
        "n": fr.n,
        "params": fr.params,
        "ci": iv.ci,
        "r2": fr.r2,
        "rmse": fr.rmse,
        "objective": fr.objective,
        "excluded": excluded,
        "where": opts.where_list,
        "derived": derived,
        "formula": chk.law.formula,
        "options": dict(chk.law.options),
        "n_convention": {"name": n_conv, "n": n_note, "count": count.to_dict() if count else None},
        "n_runs": fr.n_runs,
        "rmse_log": fr.rmse_log,
        "huber_delta": opts.delta,
        "pinned": chk.pins,
        "on_bound": fr.on_bound,
        "starts": fr.starts,
        "checks": fr.checks,  # the depth penalty's BIC support and the law without it (fit/verdicts.py)
        "bootstrap": iv.info,
        "ci_withheld": iv.withheld,
        "ci_flagged": iv.flagged,
        "underdetermined": under,
        "warnings": under + warnings,
        "source": src.record(rt.sweep_dir),
        "provenance": provenance.record(data=data_fp),
    }
    if iv.theta is not None and len(iv.theta):  # for predictions and designs (fit/predict.py)
        res["replicates"] = replicates_record(fr, iv.theta, noise_scales(fr, clean, split=True))
    if is_user(chk.law):  # the law file as fitted, so the fit can be reproduced
        res["provenance"]["law"] = law_record(chk.law)
    res["identification"] = _identification(clean, fr, chk, opts, iv, res["derived"], rt.sweep_dir, n_conv, pooled)
    ctx = Context(clean, fr, chk, opts, iv, res, rt.sweep_dir, widths, count, n_conv, point, table=df)
    ctx.untuned, ctx.picks, ctx.refit = untuned, picks, _refit
    res.update(run_analyses(ctx))  # a tuned sweep's, --compare, --holdout, gradient persistence, ... (fit/analyses/)
    res["seconds"] = round(time.perf_counter() - t0, 3)
    doc = FitDocument.from_json(jsonable(res))  # its verdicts decided here, once (fit/result.py)
    if write:
        doc.written = write_document(doc.to_json(), out, rt.sweep_dir, "fit.json").get("written")
    return doc


def _own(m, src, opts: FitOptions, out, write: bool, t0: float) -> dict:
    """An analysis that is a document of its own (fit/analyses/, ``DOCUMENT``: ``--match``'s
    match.json, ``--law lr``'s lr_fit.json), made instead of a law fit from the runs ``--where`` keeps
    and written beside fit.json."""

    def body(df) -> dict:
        return m.section(Context(opts=opts, table=df))

    return beside_fit(src, opts, out, write, t0, m.SCHEMA, m.DOCUMENT, body)


def _refit(table, options: FitOptions) -> dict:
    """Another fit of ``table`` as ``dw fit`` makes it, not written (an analysis's ``ctx.refit``)."""
    return run_fit(runs=table, options=options, write=False)


def _tuned(df, opts: FitOptions):
    """A tuned sweep's table: each group's best run (or its interpolated loss) and the groups' picks
    (fit.json's ``tuning``: fit/analyses/tuning.py); any other table unchanged (``--tuned`` on it is
    bad input)."""
    # an untuned table (no tuning group) has nothing for fit/tuning.py to pick
    found = tuning_picks(df, level=opts.level, seed=opts.seed) if "group" in df and df["group"].notna().any() else []
    if not found:
        if opts.tuned is not None:
            raise BadInput(f"bad value for --tuned: {opts.tuned} (allowed: only on a tuned sweep, sweep file tune:)")
        return df, []
    return tuning_select(df, opts.tuned or "best", found), found


def check_replace(path: Path, opts: FitOptions) -> None:
    """A sweep's fit.json is what its report shows: a fit of another law or filter replaces it only
    with --force (bad input, before anything is fitted)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    mine, theirs = opts.identity(), FitOptions.of_document(old).identity()
    if mine != theirs:
        w = ", ".join(theirs["where"]) or "every run"
        me = ", ".join(mine["where"]) or "every run"
        raise BadInput(
            f"{path} holds a {theirs['law']} fit of {w} that the report shows; this {mine['law']} fit "
            f"of {me} (--law: chinchilla when not given; --where) would replace it: --force to "
            "replace it, --out FILE to write elsewhere, or --no-write"
        )


def _count_as(df, chk: Checked, opts: FitOptions):
    """(table with ``params`` = N in the chosen convention, the convention, its note)."""
    if is_user(chk.law) and "params" not in chk.law.columns and opts.n_convention is None:
        return df, chk.n_convention, f"N: not read by {chk.law.name}"  # its table need have no params column
    try:
        df, note = with_convention(df, chk.n_convention)
        return df, chk.n_convention, note
    except BadInput:
        cols = set(map(str, df.columns))
        if "params" in chk.law.columns or opts.n_convention is not None or not {"depth", "width"} <= cols:
            raise
    # a law that does not read N (width-depth) still needs one for C = 6·N·T: say which
    df, note = with_convention(df, "12DW2")
    return df, "12DW2", note + ": the table has no params column for the compute constraint"


def _clean(df, chk: Checked, opts: FitOptions, going: str | None):
    """(clean table, excluded runs, notes); every option that needs the table is checked here,
    before the first fit."""
    for n in chk.compare:  # every compared law must find its columns too
        for lv in [get_law(n, "log", opts.irreducible)] if n == "depth-delusion" else [get_law(n)]:
            prepare(df, lv)
    try:
        clean, excluded, notes = prepare(df, chk.law)
    except BadInput as e:  # e.g. too few points yet: say which runs are still to come
        raise BadInput(f"{e}; not yet ended: {going}") if going else e from None
    if going:
        notes.insert(0, f"fitted on the runs that have ended; not yet in this fit: {going} (refit when they end)")
    if chk.holdout_k is not None:  # bad splits and tables without compute fail before any fit
        split_largest(clean, chk.holdout_k)
    if opts.approach == "isoflop":
        isoflop_budgets(clean)
    return clean, excluded, notes


def _fit(clean, chk: Checked, opts: FitOptions, going: str | None):
    try:
        return fit_law(clean, chk.law, pins=chk.pins, delta=opts.delta, seed=opts.seed, max_starts=opts.max_starts)
    except BadInput as e:
        raise BadInput(f"{e}; not yet ended: {going}") if going else e from None


@dataclass
class Intervals:
    """The bootstrap's intervals of the parameters (``ci``) and derived numbers (``dci``), what may
    be shown of them (fit/boot.py), and what the bootstrap says about itself."""

    ci: dict
    dci: dict
    info: dict
    withheld: dict = field(default_factory=dict)
    flagged: dict = field(default_factory=dict)
    samples: dict | None = None  # parameter replicates, for the identification and tau(W)'s law band
    theta: np.ndarray | None = None  # converged replicates' parameter vectors, for approach 2
    warnings: list = field(default_factory=list)


def _intervals(fr, clean, chk: Checked, opts: FitOptions, point: dict, widths, count) -> Intervals:
    B, level, lw, pins = opts.bootstrap, opts.level, chk.law, chk.pins
    info = {"replicates": B, "unit": "run" if opts.resample == "runs" else "seed noise", "resample": opts.resample}
    if B <= 0:
        return Intervals(
            {p: None for p in fr.params},
            {k: None for k in point},
            info,
            theta=np.empty((0, len(fr.theta))),
            warnings=["--bootstrap 0: no intervals; point estimates alone can mislead"],
        )
    b = boot_fn(fr, clean, B, seed=opts.seed, kind=opts.resample)
    samples = param_samples(fr, b)
    ci = {k: ([fr.params[k]] * 2 if k in pins else percentile_ci(v, level)) for k, v in samples.items()}
    ds = derived_numbers(lw, samples, widths, opts.c_ref, count) if len(next(iter(samples.values()))) else {}
    dci = {k: percentile_ci(v, level) for k, v in ds.items()}
    ok = int(b["ok"].sum())
    info.update({"converged": ok, "runs": b["n_runs"], "level": level})
    warnings = []
    if ok < B:
        warnings.append(f"{B - ok} of {B} bootstrap refits failed to converge")
    if b["n_runs"] < 5:
        warnings.append(f"only {b['n_runs']} runs: bootstrap intervals are unreliable")
    for k, f in bound_hits(fr, b).items():
        if f >= 0.1:
            warnings.append(
                f"{k} is on a bound in {100 * f:.0f}% of bootstrap refits: its interval is cut by the bound"
            )
    # what may be shown (fit/boot.py): withheld intervals, and measured coverage outside 90-98%
    ci, w1, f1 = vet_intervals(fr.params, ci, ok, B)
    dci, w2, f2 = vet_intervals(point, dci, ok, B)
    withheld, flagged = {**w1, **w2}, {**f1, **f2}
    for what, d in (("withheld", withheld), ("flagged", flagged)):
        if d:
            warnings.append(
                f"{len(d)} interval(s) {what} ({', '.join(list(d)[:6])}"
                + (" …" if len(d) > 6 else "")
                + f"): e.g. {next(iter(d.values()))}"
            )
    return Intervals(ci, dci, info, withheld, flagged, samples, b["theta"][b["ok"]], warnings)


def _contains_zero(chk: Checked, level: float, iv: Intervals) -> list[str]:
    """An exponent whose interval contains 0 is not established by the data: say so."""
    out = []
    for p in chk.law.params:
        c = iv.ci.get(p.name)
        if p.exponent and p.name not in chk.pins and c is not None and c[0] <= 0 <= c[1]:
            out.append(
                f"{p.name}: {100 * level:.0f}% interval [{c[0]:.3g}, {c[1]:.3g}] contains 0: "
                "the data do not establish this exponent"
            )
    for k, c in iv.dci.items():
        if k.endswith("_exponent") and c is not None and c[0] <= 0 <= c[1]:
            out.append(f"{k}: {100 * level:.0f}% interval [{c[0]:.3g}, {c[1]:.3g}] contains 0")
    return out


def _identification(clean, fr, chk: Checked, opts: FitOptions, iv: Intervals, derived, sweep_dir, n_conv, pooled):
    """The identification verdict (fit/verdicts.py's ladder), which every fit has."""
    return identification(
        clean,
        chk.law,
        fr.params,
        on_bound=fr.on_bound,
        ci=iv.ci,
        dci=iv.dci,
        derived=derived,
        support=fr.checks.get("penalty_support"),
        quantum=sweep_quantum(sweep_dir, clean),
        level=opts.level,
        n_name=N_NAMES.get(n_conv, "params"),
        pooled=pooled,
        samples=iv.samples,
    )
