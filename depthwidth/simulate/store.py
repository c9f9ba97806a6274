"""Write a planted world's runs as an ordinary run store (docs/CONTRACTS.md), marked as simulated.

Every planned run of a sweep file gets what a trained run leaves behind for the
readers (``dw status``, the run table, ``dw fit``, ``dw report``): a manifest
``submit`` event (launcher ``simulate``), ``config.yaml`` (the resolved config,
run id, accounting, provenance) and ``summary.json`` (status ``done``, one
budget per planted token budget), plus ``probes.jsonl`` with a planted gradient
profile when the law has a D_crit.  Every provenance block carries
``simulated: true`` and the world (law, parameters, noise, seed); the store's
``world.json`` adds the planted truth of every derived number.  A tuned sweep's submit events
carry each run's tuning ``group`` and ``tuned`` values, as a real submission's do (sweep/submission.py).

The store is written in a temporary folder beside its place and renamed into
it at the end, so it exists completely or not at all; replacing a store is
allowed only when every run in it is simulated (``replace=True``), never a
store with a trained run in it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from depthwidth.core import provenance
from depthwidth.core.atomic import make_temp_dir, write_json, write_jsonl, write_text
from depthwidth.core.errors import bad
from depthwidth.core.store import MANIFEST
from depthwidth.fit.analyses.planted import WORLD_FILE

WORLD_SCHEMA = "dw.world/1"


def plain(x):
    """A composed config (dict subclasses, tuples) as plain JSON data."""
    return json.loads(json.dumps(x, default=str))


def existing_state(target: Path) -> str:
    """``absent`` | ``simulated`` (every run in it is) | ``trained`` (something else is there)."""
    if not target.exists():
        return "absent"
    if not target.is_dir():
        return "trained"
    entries = [p for p in target.iterdir()]
    if not entries:
        return "absent"
    if not (target / WORLD_FILE).is_file():
        return "trained"
    for s in target.glob("*/summary.json"):
        try:
            prov = json.loads(s.read_text(encoding="utf-8")).get("provenance") or {}
        except (OSError, ValueError, AttributeError):
            return "trained"
        if not prov.get("simulated"):
            return "trained"
    return "simulated"


def write_store(target: Path, name: str, runs: list[dict], world_doc: dict) -> None:
    """Write ``runs`` ({run_id, overrides, label, ref, index, config, accounting, summary, probes}) and
    ``world_doc`` as the store ``target``: all of it, or nothing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(target.parent, f".{name}.sim-")
    try:
        events = []
        for r in runs:
            d = tmp / r["run_id"]
            d.mkdir()
            cfg = r["config"]
            write_text(d / "config.yaml", _yaml(cfg))
            write_json(d / "summary.json", r["summary"])
            if r.get("probes"):
                write_jsonl(d / "probes.jsonl", r["probes"])
            events.append(
                {
                    "event": "submit",
                    "run_id": r["run_id"],
                    "overrides": r["overrides"],
                    "run_dir": str(target / r["run_id"]),
                    "launcher": "simulate",
                    "job_id": f"simulate-{r['index']}",
                    "label": r.get("label"),
                    "ref": r.get("ref"),
                    "tokens_total": r["summary"]["tokens_total"],
                    "params": r["summary"]["params"],
                    "index": r["index"],
                    **({"group": r["group"], "tuned": r["tuned"]} if r.get("group") else {}),
                    "time": r["summary"]["provenance"]["time"],
                }
            )
        write_jsonl(tmp / MANIFEST, events)
        write_json(tmp / WORLD_FILE, world_doc)
        old = None
        if target.exists():
            old = target.with_name(f".{name}.old-{os.getpid()}")
            os.rename(target, old)
        os.rename(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _yaml(doc: dict) -> str:
    import yaml

    return yaml.safe_dump(doc, sort_keys=False)


def run_record(
    r,
    name: str,
    target: Path,
    accounting: dict,
    budgets: list[tuple[int, int]],
    loss: np.ndarray,
    world_prov: dict,
    probe: list[float] | None,
) -> dict:
    """One planned run (sweep.expand.Run) with its planted losses at ``budgets`` [(tokens, step)]."""
    prov = {**provenance.record(device="simulated", precision=r.figures.get("precision")), **world_prov}
    cfg = plain(r.cfg)
    cfg.setdefault("run", {}).update(sweep=name, dir=str(target / r.run_id))
    doc = {**cfg, "run_id": r.run_id, "accounting": plain(accounting), "provenance": prov}
    f = r.figures
    pts = [{"tokens": int(t), "step": int(s), "val_loss": float(x)} for (t, s), x in zip(budgets, loss)]
    summary = {
        "run_id": r.run_id,
        "sweep": name,
        "status": "done",
        "reason": None,
        "final_val_loss": pts[-1]["val_loss"],
        "tokens": int(f["tokens"]),
        "tokens_total": int(f["tokens"]),
        "steps": int(f["steps"]),
        "steps_total": int(f["steps"]),
        "params": accounting["params"],
        "params_non_embedding": accounting["params_non_embedding"],
        "params_active": accounting["params_active"],
        "flops_per_token": accounting["flops_per_token"],
        "kv_bytes_per_token": accounting["kv_bytes_per_token"],
        "depth": int(f["depth"]),
        "width": int(f["width"]),
        "widths": list(f["widths"]),
        "shape": f["shape"],
        "seed": int(f["seed"]),
        "budgets": pts,
        "bayes_loss": None,
        "last_loss": pts[-1]["val_loss"],
        "wall_time_s": 0.0,
        "device": "simulated",
        "precision": f.get("precision"),
        "provenance": prov,
        "plan": f.get("plan"),
    }
    probes = None
    if probe is not None:
        step = min(1000, int(f["steps"]))
        probes = [
            {"step": step, "tokens": step * int(f["tokens"]) // max(int(f["steps"]), 1), "grad_norm": {"block": probe}}
        ]
    return {
        "run_id": r.run_id,
        "overrides": r.full_overrides(name, target / r.run_id),
        "label": r.label,
        "ref": r.ref,
        "index": r.index,
        "config": doc,
        "summary": summary,
        "probes": probes,
        "group": r.group,
        "tuned": r.tuned,
    }


def check_target(target: Path, replace: bool) -> None:
    state = existing_state(target)
    if state == "trained":
        raise bad(
            "--name",
            target.name,
            f"a new store, or one dw simulate wrote ({target} holds runs that were not simulated: never written over)",
        )
    if state == "simulated" and not replace:
        raise bad("--name", target.name, f"a new store, or --replace to rewrite the simulated store {target}")
