"""``dw sweep NAME --dry-run`` as a library: the plan's document, its table and the lines below it.

    doc = document("demo", [], SweepOptions(dry_run=True))   # what --json prints
    t = table(doc, "demo", doc["description"])                  # one row per run (core.tables.Table)
    footer(doc, seconds)                                        # the lines printed under the table

Every run is checked as the submission checks it (``submission.plan``, ``preflight``); nothing is
submitted or written, except the probe's record with ``probe=True``.
"""

from __future__ import annotations

from depthwidth.core.tables import Col, Table
from depthwidth.sweep.options import SweepOptions


def document(name: str, overrides: list[str], o: SweepOptions) -> dict:
    """The dry run of sweep ``name``: costs, schedule, data, probe, what a submission would do now,
    the law's predictions and one row per run."""
    from depthwidth.core import store
    from depthwidth.launch.workers import visible_gpus
    from depthwidth.sweep import longruns, plan_costs
    from depthwidth.sweep import probe as probes
    from depthwidth.sweep import submission as api
    from depthwidth.sweep.expand import dry_run_rows

    data = "warn" if o.no_data_check else "refuse"
    p = api.plan(
        name,
        overrides,
        only=o.only,
        mfu=o.mfu,
        peak=o.peak,
        cpu_peak=o.cpu_peak,
        data=data,
        extend_tuning=o.extend_tuning,
    )
    again = api.plan_retry(name, overrides, o.retry_diverged or [], only=o.only, dry_run=True, data=data)
    pre = api.preflight(p, retry_failed=o.retry_failed, retry=again)
    keep = {r.index for r in p.runs}
    rows = [row for row in dry_run_rows(p.sweep, store.runs_root().absolute()) if row["index"] in keep]
    here = "cuda" if visible_gpus() else "cpu"
    measured = probes.run_probe(name, p.sweep.store, p.runs, here) if o.probe else probes.read(p.sweep.store)
    probes.apply(measured, rows)
    plan_costs.annotate(p.runs, rows)
    long = longruns.plan(p.runs, rows, max_days=o.max_days, queue_wait_h=o.queue_wait, probe=measured)
    s = plan_costs.summarize(name, p.runs, rows)
    s["long_runs"] = {k: long[k] for k in ("proposals", "unmet")}
    s["notes"] = long["lines"] + [x for x in (longruns.seed_line(rows),) if x]
    s["warnings"] = p.warnings + s["warnings"]
    predicted = dry_run_predictions(name, rows, o.prior, o.target)
    return {
        "sweep": name,
        "description": p.sweep.description,
        "mfu": o.mfu,
        "peak_flops": o.peak,
        "cpu_peak_flops": o.cpu_peak,
        "device": devices(rows, p.device),
        **s,
        "data": p.data,
        "probe": measured,
        "submit": pre.to_dict() if store.manifest_path(p.sweep.store).exists() else None,
        "waves": api.wave_plans(pre),  # SLURM: the limit on queued jobs, the waves it makes
        "prediction": predicted,
        "runs": rows,
    }


def devices(rows, default: str) -> str:
    """Where the runs train (cpu | cuda | mixed): per run, from its own launcher settings."""
    found = {r["plan"]["device"] for r in rows if r.get("plan")}
    return found.pop() if len(found) == 1 else ("mixed" if found else default)


def si(x: float, unit: str = "") -> str:
    for k, s in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= k:
            return f"{x / k:.3g}{s}{unit}"
    return f"{x:.3g}{unit}"


def _prediction_cells(p: dict | None) -> list[str]:
    if not p:
        return ["—"] * 4
    after, valued = p.get("interval_after"), p.get("value_per_hour") is not None
    return [
        f"{p['loss']:.3f} [{p['pi'][0]:.3f}, {p['pi'][1]:.3f}]",
        "" if p.get("measured") is None else f"{p['measured']:.3f}",
        ("—" if valued else "") if after is None else f"{after:.3g}",  # —: valued, but not determined
        "" if p.get("value_per_hour") is None else f"{p['value_per_hour']:.3g}",
    ]


def _hours_col(doc: dict) -> str:
    return {"GPU": "GPU-h", "CPU": "CPU-h"}.get(doc["hours_unit"], "dev-h")


def _columns(doc: dict, varied: tuple) -> list[Col]:
    rows = doc["runs"]
    requeue = any(r.get("requeues") is not None for r in rows)
    left = {"run id", "label", "shape", "prec", "layout", "ref"}
    names = ["#", "run id", "label", "L", "W", "shape", *varied, "prec", "params", "tokens", "FLOPs", "procs"]
    names += ["layout", "GiB/dev", _hours_col(doc), "wall-h", *(("requeues",) if requeue else ())]
    names += ["ckpt GiB", "ref loss", "ref"]
    if pred := doc.get("prediction"):  # the law's prediction of each run, its measured loss, what running it teaches
        lvl = f"{100 * pred['level']:.0f}%"
        names += [f"pred. loss [{lvl} PI]", "measured", f"{pred['target_label']} CI after", "value/h"]
    if any((r.get("ref") or {}).get("budget") for r in rows):  # isoFLOP: FLOPs against budget C, params against N
        names += ["C err", "N err"]
    return [Col(n, n, right=n not in left) for n in names]


def _cells(r: dict, doc: dict, varied: tuple, requeue: bool, iso: bool) -> list[str]:
    from depthwidth.sweep.plan_costs import short
    from depthwidth.launch.status import varied_cell

    ref, p, hu = r.get("ref") or {}, r["plan"], doc["hours_unit"]
    loss = ref.get("loss")
    layout = f"{p['mode']} {p['micro_batch']}×{p['accum']}" + (" AC" if p["activation_checkpointing"] else "")
    hours = short(r["device_hours"]) + ("" if hu != "device" else f" {'GPU' if p['device'] == 'cuda' else 'CPU'}")
    cells = [str(r["index"]), r["run_id"], r.get("label") or "", str(r["depth"]), str(r["width"]), r["shape"]]
    cells += [varied_cell(r, c) for c in varied]
    cells += [r.get("precision") or "", si(r["params"]), si(r["tokens"]), f"{r['flops']:.3g}", str(p["processes"])]
    cells += [layout, f"{p['total'] / 2**30:.1f}" if p["capacity"] else "—", hours, short(r["wall_hours"])]
    cells += [("" if r.get("requeues") is None else f"{r['requeues']:,}")] if requeue else []
    cells += [short(r["ckpt_disk_bytes"] / 2**30), "" if loss is None else f"{loss:.3f}", ref.get("source", "")]
    if doc.get("prediction"):
        cells += _prediction_cells(r.get("prediction"))
    if iso:
        c_err = f"{r['flops'] / ref['budget'] - 1:+.1%}" if ref.get("budget") else ""
        n_err = f"{ref['params_error']:+.1%}" if ref.get("params_error") is not None else ""
        cells += [c_err, n_err]
    return cells


def table(doc: dict, name: str, description: str | None) -> Table:
    """One row per run: shape, params, tokens, FLOPs, layout, memory, hours, checkpoints, reference
    loss, and the law's prediction where there is one (each cell as it is shown)."""
    from depthwidth.launch.status import varied_columns

    rows = doc["runs"]
    varied = varied_columns(rows)  # seed, tuned settings: what tells two runs of one configuration apart
    cols = _columns(doc, varied)
    requeue = any(r.get("requeues") is not None for r in rows)
    iso = any((r.get("ref") or {}).get("budget") for r in rows)
    body = [dict(zip((c.key for c in cols), _cells(r, doc, varied, requeue, iso))) for r in rows]
    title = f"sweep {name} · {len(rows)} runs (dry run)"
    return Table("dry_run", title, cols, body, notes=[description] if description else [])


def _hours_line(doc: dict, secs: float) -> str:
    from depthwidth.sweep.plan_costs import short

    rows, dh = doc["runs"], doc["device_hours"]
    probed = {r["plan"]["device"] for r in rows if r.get("time") == "measured"}
    at = {
        "cuda": f"{short(dh.get('cuda', 0))} GPU-hours at MFU {doc['mfu']:.0%} of {doc['peak_flops']:.3g} FLOP/s per "
        "GPU",
        "cpu": f"{short(dh.get('cpu', 0))} CPU-hours at MFU {doc['mfu']:.0%} of {doc['cpu_peak_flops']:.3g} FLOP/s "
        "per CPU process (--cpu-peak)",
    }
    for d in probed:  # measured by the probe (its line below says where and when)
        at[d] = f"{short(dh.get(d, 0))} {'GPU' if d == 'cuda' else 'CPU'}-hours as measured by the probe"
    tot_f = sum(r["flops_planned"] for r in rows)
    return (
        f"total {tot_f:.3g} FLOPs ≈ {' + '.join(at[d] for d in sorted(dh, reverse=True))} "
        f"(FLOPs = training FLOPs/token × tokens, 6N + attention; params include embeddings) · {secs:.2f} s"
    )


def _probe_lines(doc: dict) -> list[str]:
    rows = doc["runs"]
    measured = [r for r in rows if r.get("time") == "measured"]
    if doc.get("probe") and measured:
        from depthwidth.sweep.probe import line as probe_line

        return [probe_line(doc["probe"], measured, rows)]
    if doc.get("probe"):
        return [
            f"assumed: the probe of {doc['probe']['time']} measured {doc['probe']['device']}; these runs train on "
            "another device, so their hours rest on the stated MFU"
        ]
    return []


def footer(doc: dict, secs: float) -> list[str]:
    """The lines under the dry run's table: totals, the probe, data, schedule, waves, what a submission
    would do now, the predictions' legend, advice and the columns' legend."""
    from depthwidth.launch.limits import plan_line
    from depthwidth.sweep import plan_costs

    rows = doc["runs"]
    out = [_hours_line(doc, secs), *_probe_lines(doc)]
    out += [x for x in (plan_costs.branch_line(rows),) if x]
    out += [plan_costs.data_line(d) for d in doc.get("data") or []]
    out += plan_costs.lines(doc, rows) + doc.get("notes", [])
    out += [plan_line(w) for w in doc.get("waves") or []]
    if sub := doc.get("submit"):
        skip = ", ".join(f"{n} {k}" for k, n in sub["skipped"].items())
        out.append(
            f"submitting now: {sub['would_submit']} of {len(rows)} runs" + (f" (skipped: {skip})" if skip else "")
        )
    if pred := doc.get("prediction"):
        out.append(
            f"predictions: from the {pred['from']}; {pred['target_label']}'s {100 * pred['level']:.0f}% interval "
            f'is {pred["interval_now"]:.3g} wide now; "CI after": its expected width once that run is measured; '
            "value/h: how much narrower per device-hour (dw suggest NAME --budget H picks the best set)"
        )
        out += [f"note: {n}" for n in pred.get("notes") or []]
    if doc.get("advice"):
        out.append(f"advice: {doc['advice']}")
    requeue = any(r.get("requeues") is not None for r in rows)
    out.append(
        f"layout: parallel mode, micro-batch × accumulation steps per process, AC = activation checkpointing; "
        f"GiB/dev: the memory plan's peak per device (— on the CPU: not checked); wall-h = {_hours_col(doc)} / procs"
        + ("; requeues: ceil(wall-h / launcher.time) − 1" if requeue else "")
        + "; ckpt GiB: the checkpoints a run keeps"
    )
    return out


# -- the dry run's predictions ----------------------------------------------------------------


def dry_run_predictions(name: str, rows: list[dict], prior: str | None, target: str | None) -> dict | None:
    """Per planned row: predicted final loss and its prediction interval, the measured loss of a
    finished run, and the value of running it (expected shrink of the target's interval per
    device-hour); None when the sweep has no fit and no ``prior`` was asked for.  On a tuned sweep the
    value is each tuning group's, shown on each of its runs not yet measured (``dry_units``)."""
    import numpy as np

    from depthwidth.core.errors import BadInput
    from depthwidth.fit.predict import design, parse_target, predict, predict_outputs
    from depthwidth.sweep.suggest import default_target, ensemble_for, measured_losses, predicted_fields

    try:
        src = ensemble_for(name, prior, first=False)
    except BadInput:
        if prior is not None:
            raise
        return None
    tgt = parse_target(target, src.ensemble.law) if target else default_target(src)
    ok = [i for i, r in enumerate(rows) if not r.get("error") and r.get("params")]
    table = [{k: rows[i][k] for k in ("depth", "width", "params", "params_non_embedding", "tokens")} for i in ok]
    per = predict_outputs(src.ensemble, table)  # a multi-output law: every output of each run
    pred = next(iter(per.values())) if per else predict(src.ensemble, table)
    measured = measured_losses(src.store)
    units, begun = dry_units(rows, ok, measured)  # a tuning group is one unit: the law's point is its best
    cost = np.array([sum(rows[ok[n]]["device_hours"] for n in (todo or members)) for members, todo in units])
    d = design(src.ensemble, tgt, [table[members[0]] for members, _ in units], cost, k=0)
    value: dict[int, tuple] = {}
    for u, (members, todo) in enumerate(units):
        if todo and members[0] not in begun:
            after = float(d.width_alone[u]) if np.isfinite(d.width_alone[u]) else None  # None: not determined
            value.update({n: (float(d.value[u]), after, rows[ok[n]].get("group")) for n in todo})
    for n, i in enumerate(ok):
        r = rows[i]
        done = measured.get(r["run_id"])
        v, after, group = value.get(n, (None, None, None))
        r["prediction"] = {
            "loss": float(pred["loss"][n]),
            "pi": [float(pred["pi"][0][n]), float(pred["pi"][1][n])],
            "measured": done,
            "value_per_hour": v,
            "interval_after": after,
            **({"value_of": group} if group else {}),  # the figures are its tuning group's
        }
        if per:
            r["prediction"]["outputs"] = predicted_fields({"outputs": per}, n)["outputs"]
    notes = list(src.notes)
    if not src.ensemble.from_fit:  # the promise dw suggest makes of a run, not the prior's Kalman update
        notes.append(DRY_PROMISE_NOTE)
    if any(rows[i].get("group") for i in ok):
        notes.append(dry_tuned_note(units, begun))
    if per:
        notes.append(
            f"the {src.ensemble.law.name} law has {len(per)} outputs ({', '.join(per)}): the predicted loss shown "
            f"is {next(iter(per))}'s, --json has every output's; a run's value counts all of them at its one cost"
        )
    return {
        "from": src.ensemble.source,
        "target": tgt.spec,
        "target_label": tgt.label,
        "interval_now": d.width_now,
        "level": src.ensemble.level,
        "notes": notes,
    }


DRY_PROMISE_NOTE = (
    "CI after is the interval dw fit will report from that run and the store's runs alone, as dw suggest "
    "promises it: a fit knows nothing of the prior, so it can be wider than the prior's now (—: they cannot "
    "determine the target, as one run of a law of several parameters cannot; value/h still ranks what each run "
    "teaches, as dw suggest ranks)"
)


def dry_units(rows: list[dict], ok: list[int], measured: dict) -> tuple[list[tuple[list, list]], set]:
    """The dry run's planned rows ``ok`` (indices into ``rows``) as units of one measurement: per unit
    (its positions in ``ok``, those not measured yet), a tuning group's rows together, else each row
    alone; and the first position of each group begun and not yet complete (``begun_groups``, the rule
    dw suggest keeps too: the fit has its best so far, the rest would complete that point, not add one)."""
    from depthwidth.sweep.suggest import begun_groups

    units: dict = {}
    for n, i in enumerate(ok):
        units.setdefault(rows[i].get("group") or ("run", n), []).append(n)
    groups = begun_groups(((rows[i].get("group"), rows[i]["run_id"]) for i in ok), measured)
    out, begun = [], set()
    for key, members in units.items():
        todo = [n for n in members if rows[ok[n]]["run_id"] not in measured]
        if todo and key in groups:
            begun.add(members[0])
        out.append((members, todo))
    return out, begun


def dry_tuned_note(units: list, begun: set) -> str:
    """The dry run's one line on a tuned sweep's values: each group's, and the groups begun."""
    line = (
        "a tuned sweep: CI after and value/h are each tuning group's (its runs not yet measured together, their "
        "device-hours summed, its loss the group's best, as dw fit --tuned fits it), shown on each of those runs"
    )
    if begun:
        left = sum(len(todo) for members, todo in units if members[0] in begun)
        line += (
            f"; {len(begun)} groups begun (some runs measured) are not valued: the fit has each one's best so far, "
            f"and their other {left} runs would complete it, not add a point"
        )
    return line
