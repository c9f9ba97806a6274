"""What a planned sweep costs besides its FLOPs, for ``dw sweep --dry-run`` (text and --json).

Per run (``validate`` and ``annotate``):
    hours       device-hours at the stated MFU of the device's peak: ``--peak`` per GPU,
                ``--cpu-peak`` per CPU process (a CPU run is counted in CPU-hours, never as
                "≈ 0 GPU-hours"); wall-hours = device-hours / processes;
    requeues    launcher=slurm: ceil(wall / launcher.time) − 1, launcher.time in the whole
                minutes submitit asks for (``launch.slurm.time_minutes``); each requeue
                resumes the run from its checkpoint;
    checkpoint  what ``train/checkpoint.save`` writes: the fp32 weights and AdamW's two fp32
                moments with one 4-byte step per tensor (``memory.static_bytes`` of one
                process: 12 bytes per parameter), × the checkpoints kept at the end: every
                save (one per ``train.ckpt_every`` steps and one at the end) when
                ``train.keep_ckpts`` is 0, else at most ``keep_ckpts``.  DCP's index and the
                loop state (kB) are not counted; a save writes the new checkpoint before it
                deletes the oldest, so the disk briefly holds one more.
Per sweep (``summarize``):
    schedule    runs grouped as the submission groups them (one job array per distinct
                launcher setting), ``pack`` runs per task one after another, tasks started in
                order on the launcher's parallel slots (``launch.config.parallel_tasks``), each
                on the slot that frees first (greedy list scheduling, as SLURM's ``%N`` and the
                local workers' claims do): calendar hours = the last end (groups run at once;
                debug: one after another); nodes and GPUs = those of the tasks that can run at
                once.  A SLURM run counts its calendar time (``run_hours``: requeue restarts and
                queue waits, checkpoint writes; longruns.py).
    warnings    wall-times over ``launcher.time``; GPU-scale runs planned on the CPU.
    advice      a sweep whose compute spans more than 10×: train the small runs first and
                check with ``dw fit NAME --holdout largest:K`` that they predict larger ones.
No torch.
"""

from __future__ import annotations

import heapq
import json
import math

from depthwidth.config.schema import complete
from depthwidth.core.devices import PLAN_CPU_FLOPS
from depthwidth.core.tables import plural as _plural
from depthwidth.launch.config import parallel_tasks
from depthwidth.launch.backend import backend
from depthwidth.train import memory

DEFAULT_CPU_PEAK = PLAN_CPU_FLOPS  # override with --cpu-peak
CPU_WARN_HOURS = 24.0  # a CPU run planned for longer than a day is warned about
SPAN = 10.0  # max/min run compute above which the small runs are advised first
MIN_RUNS = 10  # ... in a sweep of more runs than this (or one with labelled blocks)
HOLDOUT_FRACTION = 0.2  # dw fit --holdout largest's default K (fit/holdout.py DEFAULT_FRACTION)


def hours(flops: float, *, device: str, processes: int, mfu: float, peak: float, cpu_peak: float) -> dict:
    """Device-hours of a run at ``mfu`` of the device's peak, by device, and its wall-hours."""
    h = flops / (mfu * (peak if device == "cuda" else cpu_peak)) / 3600.0
    return {
        "device_hours": h,
        "gpu_hours": h if device == "cuda" else 0.0,
        "cpu_hours": 0.0 if device == "cuda" else h,
        "wall_hours": h / processes,
    }


def checkpoint_figures(spec, *, steps: int, ckpt_every: int, keep: int) -> dict:
    """Bytes of one checkpoint, how many are kept at the end, and their product (module docstring)."""
    b = memory.static_bytes(spec, "single", 1)
    one = int(b["params"] + b["optimizer"])
    saves = (steps // ckpt_every if ckpt_every > 0 else 0) + (0 if ckpt_every > 0 and steps % ckpt_every == 0 else 1)
    kept = saves if keep <= 0 else min(keep, saves)
    return {"ckpt_bytes": one, "ckpts_kept": kept, "ckpt_disk_bytes": one * kept, "keep_ckpts": keep}


def events(t, probe, steps: int, budgets: list) -> dict:
    """What a run does besides its optimizer steps, counted as the trainer's schedule does it (the
    probed plan prices each): evaluations (one per budget, the end's included, and every
    ``train.eval_every``), checkpoints (every ``train.ckpt_every`` and the end), gradient probes,
    entropy profiles, and the analysis at the end."""
    from depthwidth.train.probes import is_probe_step

    every, at = int(probe["every"]), [a for a in probe["at"] if a <= steps]
    ev = int(t["eval_every"])
    budget_steps = {b.steps for b in budgets}
    ck = int(t["ckpt_every"])
    return {
        "evals": len(budgets) + (sum(1 for s in range(ev, steps + 1, ev) if s not in budget_steps) if ev else 0),
        "ckpts": (steps // ck if ck > 0 else 0) + (0 if ck > 0 and steps % ck == 0 else 1),
        "probes": (steps // every if every > 0 else 0) + sum(1 for a in at if not is_probe_step(a, every, ())),
        "entropy": steps // int(probe["entropy_every"]) if int(probe["entropy_every"]) > 0 else 0,
        "analysis": int(bool(t["analyze_at_end"])),
    }


def eval_flops(evals: int, batches: int, tokens_per_batch: int, flops_per_token: float) -> float:
    """A run's held-out evaluations: forward passes only (a third of a training step's FLOPs per token)."""
    return evals * batches * tokens_per_batch * flops_per_token / 3.0


def time_limit_hours(lcfg: dict) -> float | None:
    """The launcher's time limit per allocation, in hours (whole minutes); None where it has none."""
    return backend(lcfg.get("name")).time_limit_hours(lcfg)


def requeues(wall_hours: float, limit_hours: float | None) -> int | None:
    if limit_hours is None:
        return None
    return max(0, math.ceil(wall_hours / limit_hours) - 1)


def makespan(durations: list, slots: int) -> float:
    """Tasks started in order, each on the slot that frees first: when the last one ends."""
    free = [0.0] * max(1, min(slots, len(durations)))
    for d in durations:
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free) if durations else 0.0


def slurm_time(h: float) -> str:
    """Whole hours as a SLURM time, e.g. 515 -> '21-11:00:00'."""
    n = max(1, math.ceil(h - 1e-9))
    return f"{n // 24}-{n % 24:02d}:00:00" if n >= 24 else f"{n:02d}:00:00"


def annotate(runs: list, rows: list) -> None:
    """Each row gets its run's time limit and requeues (``runs`` and ``rows`` in the same order)."""
    for r, row in zip(runs, rows):
        lim = time_limit_hours(r.launcher)
        row["time_limit"] = r.launcher.get("time") if lim is not None else None
        row["time_limit_hours"] = lim
        row["requeues"] = requeues(row["wall_hours"], lim)


def schedule(runs: list, rows: list) -> dict:
    """Nodes, GPUs and calendar hours of the selected runs at their launcher's parallelism."""
    groups: dict = {}
    for r, row in zip(runs, rows):
        key = json.dumps(r.launcher, sort_keys=True, default=str)
        groups.setdefault(key, (r.launcher, []))[1].append(row)
    out = []
    for cfg, rs in groups.values():
        cfg = complete("launcher", cfg)  # a launcher given in part: the schema's defaults
        pack = int(cfg["pack"])
        # measured (probe.py process_seconds): a process start and its first set-up's one-time extra
        start = max(x.get("start_s") or 0.0 for x in rs) / 3600.0
        b = backend(cfg["name"])
        each = start if b.cluster else 0.0  # per array task; local workers, debug: once each
        # run_hours: a SLURM run's calendar time, requeue restarts and waits included (longruns.py)
        tasks = [
            each + sum(x.get("run_hours", x["wall_hours"]) for x in rs[i : i + pack]) for i in range(0, len(rs), pack)
        ]
        slots = parallel_tasks(cfg)
        busy = min(slots, len(tasks))
        procs = max(x["plan"]["processes"] for x in rs)
        cuda = any(x["plan"]["device"] == "cuda" for x in rs)
        per_node, nodes, gpus = b.allocation(cfg, busy, procs, cuda)
        out.append(
            {
                "launcher": cfg["name"],
                "runs": len(rs),
                "tasks": len(tasks),
                "pack": pack,
                "slots": slots,
                "at_once": busy,
                "nodes": nodes,
                "gpus": gpus,
                "gpus_per_node": per_node,
                "gpu_memory_gib": float(cfg["gpu_memory"]),
                "calendar_hours": makespan(tasks, slots) + (start - each),
            }
        )
    cal = [g["calendar_hours"] for g in out]
    kind = out[0]["launcher"] if out else "debug"
    per = {g["gpus_per_node"] for g in out if g["gpus_per_node"]}
    node = max(per) if len(per) > 1 else 0  # tasks of fewer GPUs may share the larger tasks' kind of node
    gpus = sum(g["gpus"] for g in out)
    return {
        "launcher": kind,
        "groups": out,
        "tasks": sum(g["tasks"] for g in out),
        "at_once": sum(g["at_once"] for g in out),
        "nodes": sum(g["nodes"] for g in out) if backend(kind).cluster else 1,
        "gpus": gpus,
        "full_nodes": math.ceil(gpus / node) if node else None,
        "gpus_per_full_node": node or None,
        "calendar_hours": (sum(cal) if backend(kind).runs_here else max(cal, default=0.0)),
    }


def unit(rows: list) -> str:
    """What the hours count: GPU (every run on GPUs), CPU (every run on the CPU) or device."""
    devs = {r["plan"]["device"] for r in rows}
    return "GPU" if devs == {"cuda"} else "CPU" if devs == {"cpu"} else "device"


def short(h: float) -> str:
    """A figure (hours, GiB) as the table shows it: 1,234 · 12.3 · 0.045 (never a bare 0 for a small one)."""
    return f"{h:,.0f}" if h >= 100 else f"{h:.1f}" if h >= 1 else f"{h:.2g}"


def span(h: float) -> str:
    """A duration in words: '515 h (21.4 days)', '3.2 h', '2.7 min', '40 s'."""
    if h >= 48:
        return f"{short(h)} h ({h / 24:,.1f} days)"
    if h >= 1:
        return f"{h:.1f} h"
    return f"{h * 60:.1f} min" if h * 60 >= 1 else f"{h * 3600:.0f} s"


def _size(b: float) -> str:
    return f"{b / 2**40:,.2f} TiB" if b >= 2**40 else f"{b / 2**30:,.1f} GiB" if b >= 2**30 else f"{b / 2**20:,.1f} MiB"


def _run(row: dict) -> str:
    return f"run {row['index']} ({row['depth']}×{row['width']}, {_params(row['params'])} params)"


def _params(n: float) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M"


def branch_line(rows: list) -> str | None:
    """WSD decay branches: each forks from its run's trunk where its decay starts and trains only
    the decay (train/optim.py ``fork_step``); the steps they add are in the FLOPs and hours."""
    extra = [(x, x["steps_planned"] - x["steps"]) for x in rows if x.get("steps_planned", 0) > x["steps"]]
    if not extra:
        return None
    added = sum(n for _, n in extra)
    main = sum(x["steps"] for x, _ in extra)
    return (
        f"decay branches: {_plural(len(extra), 'run')} fork WSD decay branches from their trunk (train.budgets) "
        f"and train only their decays: +{added:,} steps, {added / main:.1%} of those runs' {main:,}, counted in "
        "the FLOPs and hours above"
    )


def data_line(d: dict) -> str:
    """One data source of the dry run (expand.data_use): its splits, size on disk, the most epochs a run reads."""
    where = f" ({d['path']})" if d.get("path") else ""
    if d["train_tokens"] is None:
        return f"data: {d['name']}{where}: generated, never runs out ({_plural(d['runs'], 'run')})"
    disk = f", {_size(d['disk_bytes'])} on disk" if d.get("disk_bytes") is not None else ""
    return (
        f"data: {d['name']}{where}: {d['train_tokens']:,} train + {d['val_tokens']:,} val tokens{disk}; "
        f"{_plural(d['runs'], 'run')} read up to {d['epochs_max']:.2f} epochs of the train split"
        + (f" ({d['runs_over']} more than one)" if d["runs_over"] else "")
    )


def time_warning(rows: list) -> str | None:
    over = [r for r in rows if r.get("requeues")]
    if not over:
        return None
    worst = max(over, key=lambda r: r["wall_hours"])
    lim = "/".join(sorted({str(r["time_limit"]) for r in over}))
    return (
        f"{len(over)} of {len(rows)} runs plan more wall-time than launcher.time={lim}: each requeues "
        f"from its checkpoint (the requeues column: {sum(r['requeues'] for r in over):,} in all, "
        f"{worst['requeues']:,} for {_run(worst)} at {worst['wall_hours']:,.1f} h); "
        f"launcher.time={slurm_time(worst['wall_hours'])} holds every run in one allocation, "
        "where the partition allows it"
    )


def cpu_warning(runs: list, rows: list) -> str | None:
    slow = [(r, x) for r, x in zip(runs, rows) if x["plan"]["device"] == "cpu" and x["wall_hours"] > CPU_WARN_HOURS]
    if not slow:
        return None
    r, worst = max(slow, key=lambda p: p[1]["wall_hours"])
    why = backend(r.launcher["name"]).cpu_reason(r.launcher)
    procs = worst["plan"]["processes"]
    return (
        f"{len(slow)} of {len(rows)} runs are planned on the CPU ({why}; {worst['precision']}, "
        f"{_plural(procs, 'process')} each) for more than {CPU_WARN_HOURS:g} h each, up to "
        f"{short(worst['wall_hours'])} h for {_run(worst)}, which needs {_size(worst['plan']['total'])} of memory "
        "(not checked on the CPU): plan them for the GPUs they will train on, e.g. launcher=slurm "
        "launcher.gpus_per_node=8 (or launcher=local on the GPU machine)"
    )


def advice(name: str, runs: list, rows: list, hu: str) -> str | None:
    """Train the small runs first and check they predict larger ones (module docstring)."""
    if len(rows) < 2:
        return None
    flops = [x["flops"] for x in rows]
    if max(flops) <= SPAN * min(flops):
        return None
    total = sum(x["device_hours"] for x in rows)
    blocks: dict = {}
    for r, x in zip(runs, rows):
        blocks.setdefault(r.label, []).append(x)
    if len(blocks) > 1 and None not in blocks:  # labelled blocks: the one with the largest run is "large"
        big = max(blocks, key=lambda b: max(x["flops"] for x in blocks[b]))
        small = [x for b, xs in blocks.items() if b != big for x in xs]
        labels = [b for b in blocks if b != big]
        how = f"the {' and '.join(labels)} block{'s' * (len(labels) > 1)} ({', '.join(f'--only {b}' for b in labels)}: "
    elif len(rows) > MIN_RUNS:
        top = max(flops)
        small = [x for x in rows if x["flops"] * SPAN <= top]
        how = "the runs under a tenth of the largest's compute ("
    else:
        return None
    sh = sum(x["device_hours"] for x in small)
    if len(small) < 2 or len(small) == len(rows) or sh * SPAN > total:  # the small part must be cheap
        return None
    k = max(1, int(round(HOLDOUT_FRACTION * len(small))))
    return (
        f"the runs span {max(flops) / min(flops):,.0f}× in compute: train {how}{_plural(len(small), 'run')}, "
        f"{short(sh)} {hu}-h, {sh / total:.1%} of the {short(total)}) first; `dw fit {name} --holdout "
        f"largest:{k}` then shows whether their smaller runs predict their largest, before the other "
        f"{_plural(len(rows) - len(small), 'run')} spend the remaining {short(total - sh)} {hu}-h"
    )


def summarize(name: str, runs: list, rows: list) -> dict:
    """The sweep-level keys of the dry run (rows annotated in place)."""
    annotate(runs, rows)
    hu = unit(rows)
    disk = [x["ckpt_disk_bytes"] for x in rows]
    big = max(rows, key=lambda x: x["ckpt_disk_bytes"]) if rows else None
    warnings = [w for w in (time_warning(rows), cpu_warning(runs, rows)) if w]
    return {
        "hours_unit": hu,
        "device_hours": {
            d: sum(x["device_hours"] for x in rows if x["plan"]["device"] == d)
            for d in sorted({x["plan"]["device"] for x in rows})
        },
        "requeues": sum(x["requeues"] or 0 for x in rows),
        "schedule": schedule(runs, rows),
        "disk": {
            "ckpt_bytes_per_param": 12,
            "total_bytes": sum(disk),
            "max_run_bytes": max(disk, default=0),
            "max_run": big["index"] if big else None,
        },
        "warnings": warnings,
        "advice": advice(name, runs, rows, hu),
        "halving": halving_savings(runs, rows),
    }


def halving_savings(runs: list, rows: list) -> dict | None:
    """tune.halving: the device-hours the worse half of each tuning group does not spend when it stops
    at its first budget (a group's runs cost alike, so whichever runs they are; the hours include the
    WSD decay branches, of which a pruned run trains only the first)."""
    groups: dict = {}
    for r, x in zip(runs, rows):
        if getattr(r, "halving", False) and r.group:
            groups.setdefault(r.group, []).append((r, x))
    if not groups:
        return None
    saved = pruned = 0.0
    for members in groups.values():
        k = len(members) // 2
        per = [x["device_hours"] * (1 - min(float(b) for b in r.cfg.train.budgets) / x["tokens"]) for r, x in members]
        saved += k * sum(per) / len(per)
        pruned += k
    total = sum(x["device_hours"] for x in rows)
    return {"groups": len(groups), "pruned": int(pruned), "device_hours_saved": saved, "fraction": saved / total}


def lines(s: dict, rows: list) -> list[str]:
    """The text lines of ``summarize``'s schedule and disk figures."""
    sc, out = s["schedule"], []
    when = f"≈ {span(sc['calendar_hours'])} from the first start to the last end"
    out.append(backend(sc["launcher"]).schedule_line(sc, when))
    if h := s.get("halving"):
        hu = s["hours_unit"]
        out.append(
            f"halving: {_plural(h['groups'], 'tuning group')}; the worse half of each ({_plural(h['pruned'], 'run')}) "
            f"stops at its first budget: ≈ {short(h['device_hours_saved'])} {hu}-h saved, "
            f"{h['fraction']:.0%} of the total"
        )
    d = s["disk"]
    if rows:
        kept = sorted({x["ckpts_kept"] for x in rows})
        keep = sorted({x["keep_ckpts"] for x in rows})
        big = next(x for x in rows if x["index"] == d["max_run"])
        n_kept = str(kept[0]) if len(kept) == 1 else f"{kept[0]}–{kept[-1]}"
        out.append(
            f"checkpoints: 12 bytes per parameter (fp32 weights + AdamW's two moments) × {n_kept} on disk "
            f"at once (the saves a run makes, at most train.keep_ckpts={'/'.join(map(str, keep))}; 0 keeps every "
            "save): up to "
            f"{_size(d['max_run_bytes'])} for {_run(big)}, {_size(d['total_bytes'])} in all "
            f"({_plural(len(rows), 'run')}); a save holds one more until it deletes the oldest"
        )
    return out
