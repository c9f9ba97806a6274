"""Runs that take weeks, planned as a person would (``dw sweep NAME --dry-run [--max-days D]``).

A run's calendar time on a SLURM cluster is more than its compute:

    calendar = wall + requeues × (restart + queue wait) + checkpoint writes

    wall        device-hours / processes (the plan's, evaluations included: plan_costs.eval_flops)
    requeues    ceil(wall / launcher.time) − 1 (plan_costs.requeues)
    restart     a process start and set-up (the probe's, where one measured this device; else
                ``RESTART_S``) + reading one checkpoint at ``IO_BYTES_PER_S`` per node
    queue wait  ``--queue-wait`` hours per requeue: an assumption, stated in the dry run's line
    ckpt writes every save of ``train.ckpt_every`` at ``IO_BYTES_PER_S`` per node

With ``--max-days D`` a run whose calendar time exceeds D days gets the fewest nodes per run
(``launcher.nodes``, the GPUs of each node running it as one FSDP/DDP run) that bring it within D,
each candidate checked as the submission would check it (the memory plan over N × gpus_per_node
processes, a batch those processes divide); the dry run says which runs, how many nodes, and
their calendar time.  Compute is assumed to scale with the processes (the plan's MFU at any size).
No torch.
"""

from __future__ import annotations

from depthwidth.core.errors import BadInput
from depthwidth.launch.backend import backend
from depthwidth.launch.config import capacity
from depthwidth.sweep.plan_costs import requeues, short, span

RESTART_S = 120.0  # a process start and set-up on a cluster node, where no probe measured it (assumed)
IO_BYTES_PER_S = 2e9  # checkpoint read/write bandwidth per node (assumed)
QUEUE_WAIT_H = 1.0  # hours a requeued task waits in the queue (assumed; --queue-wait)
MAX_NODES = 64  # the most nodes per run the plan proposes


def run_calendar(row: dict, nodes_factor: float, queue_wait_h: float, restart_s: float) -> dict:
    """A run's calendar hours at ``nodes_factor`` × its planned processes (module docstring)."""
    wall = row["wall_hours"] / nodes_factor
    n = requeues(wall, row.get("time_limit_hours")) or 0
    nodes = row["nodes"] * nodes_factor
    io = IO_BYTES_PER_S * nodes
    restart_h = (restart_s + row["ckpt_bytes"] / io) / 3600.0
    writes_h = row["events"]["ckpts"] * row["ckpt_bytes"] / io / 3600.0
    return {
        "wall_hours": wall,
        "requeues": n,
        "restart_hours": n * restart_h,
        "queue_hours": n * queue_wait_h,
        "ckpt_write_hours": writes_h,
        "run_hours": wall + n * (restart_h + queue_wait_h) + writes_h,
    }


def plan(runs: list, rows: list, *, max_days: float | None, queue_wait_h: float, probe: dict | None) -> dict:
    """Each SLURM row's calendar (``run_hours`` and its parts, in place); with ``max_days`` the nodes per
    run that bring every run within it.  {proposals, unmet, lines}."""
    from depthwidth.sweep.expand import validate

    start = _restart_s(probe)
    proposals, unmet = [], []
    for r, x in zip(runs, rows):
        if not backend(r.launcher.get("name")).cluster:  # no allocation to cut, no queue to wait in
            continue
        x["nodes"] = int(r.launcher["nodes"])
        restart = start.get(x["plan"]["device"], RESTART_S)
        x.update(run_calendar(x, 1, queue_wait_h, restart))
        if max_days is None or x["run_hours"] <= 24 * max_days:
            continue
        g = max(1, int(r.launcher["gpus_per_node"]))
        for k in range(2, MAX_NODES // x["nodes"] + 1):
            n = x["nodes"] * k
            c = run_calendar(x, k, queue_wait_h, restart)
            if c["run_hours"] > 24 * max_days:
                continue
            try:  # as the submission would check the run on n nodes
                f = validate(
                    r.cfg,
                    device=x["plan"]["device"],
                    processes=n * g,
                    capacity=capacity({**r.launcher, "nodes": n}, x["plan"]["device"]),
                )
            except BadInput:
                continue
            proposals.append({"index": x["index"], "nodes": n, "layout": f["plan"]["mode"], **c})
            x["nodes_proposed"] = n
            break
        else:
            unmet.append(x)
    lines = _lines(rows, proposals, unmet, max_days, queue_wait_h, start)
    if proposals:  # the sweep's calendar with the proposed nodes (their runs as arrays of their own)
        lines.append(_with_nodes(runs, rows, {p["index"]: p for p in proposals}))
    return {"proposals": proposals, "unmet": [x["index"] for x in unmet], "lines": lines}


def _with_nodes(runs: list, rows: list, chosen: dict) -> str:
    from types import SimpleNamespace

    from depthwidth.sweep.plan_costs import schedule

    runs2, rows2 = [], []
    for r, x in zip(runs, rows):
        p = chosen.get(x["index"])
        runs2.append(SimpleNamespace(launcher={**r.launcher, "nodes": p["nodes"]} if p else r.launcher))
        rows2.append({**x, **({"run_hours": p["run_hours"], "wall_hours": p["wall_hours"]} if p else {})})
    sc = schedule(runs2, rows2)
    return (
        f"with those nodes: ≈ {span(sc['calendar_hours'])} from the first start to the last end, at most "
        f"{sc['nodes']:,} nodes ({sc['gpus']:,} GPUs) at once"
    )


def _restart_s(probe: dict | None) -> dict:
    """The probe's measured restart (start + set-up of its largest point) per device, where there is one."""
    if not probe:
        return {}
    big = max(probe["points"], key=lambda p: p["flops_per_step"])
    return {probe["device"]: float(big.get("start_s") or 0) + float(big.get("setup_s") or 0)}


def _lines(rows, proposals, unmet, max_days, queue_wait_h, start) -> list[str]:
    slurm = [x for x in rows if "run_hours" in x]
    if not slurm:
        return []
    over = sum(x["requeues"] for x in slurm)
    worst = max(slurm, key=lambda x: x["run_hours"])
    how = "measured by the probe" if start else f"{RESTART_S / 60:.0f} min assumed"
    out = [
        f"calendar per run: wall + requeues × (restart: start and set-up {how}, a checkpoint read at "
        f"{IO_BYTES_PER_S / 1e9:g} GB/s per node; queue wait {queue_wait_h:g} h per requeue, assumed: --queue-wait) "
        f"+ checkpoint writes at {IO_BYTES_PER_S / 1e9:g} GB/s per node: {over:,} requeues in all; the longest, "
        f"run {worst['index']} ({worst['depth']}×{worst['width']}), {span(worst['run_hours'])} "
        f"({short(worst['wall_hours'])} h training, {short(worst['restart_hours'] + worst['queue_hours'])} h "
        f"restarting and queueing, {short(worst['ckpt_write_hours'])} h writing checkpoints)"
    ]
    if max_days is None:
        return out
    if proposals:
        each = ", ".join(
            f"run {p['index']} {p['nodes']} nodes ({p['layout']}, {span(p['run_hours'])})" for p in proposals[:8]
        )
        more = f" and {len(proposals) - 8} more" if len(proposals) > 8 else ""
        out.append(
            f"--max-days {max_days:g}: {len(proposals)} run(s) need more nodes to finish in time: {each}{more}; "
            "set launcher.nodes for them (a block of their own in the sweep file, or --only with launcher.nodes=N)"
        )
    if unmet:
        out.append(
            f"--max-days {max_days:g}: {len(unmet)} run(s) cannot finish in time on up to {MAX_NODES} nodes per run "
            f"(run {', '.join(map(str, unmet[:6]))}): a longer launcher.time cuts the requeues' restarts and waits"
        )
    if not proposals and not unmet:
        out.append(f"--max-days {max_days:g}: every run finishes within {max_days:g} days on its planned nodes")
    return out


def seed_line(rows: list) -> str | None:
    """One line when a sweep of several configurations trains one seed of each."""
    if len(rows) < 2 or len({x.get("seed") for x in rows}) > 1:
        return None
    return (
        f"one seed per configuration ({len(rows)} runs, seed {rows[0].get('seed')}): seed noise is not estimated; "
        "`seeds: [1, 2]` on a few configurations measures it (dw fit then bootstraps over seeds)"
    )
