"""Gather one sweep (``ROOT/NAME``: run summaries, manifest, status, fit.json)
or a ``--runs`` / W&B table into a report ``Data`` (document.py).

Conventions: losses are held-out nats per token at each run's final token
budget; ``params`` count embeddings; FLOPs/token are training FLOPs (6N +
attention).  No torch here.
"""

from __future__ import annotations

import math
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import read_jsonl
from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.result import FitDocument
from depthwidth.launch.halving import groups as halving_groups
from depthwidth.launch.status import status
from depthwidth.report.downstream import read_evals
from depthwidth.report.inside import read_analyses
from depthwidth.report.document import Data, num
from depthwidth.track.run_source import RunSource
from depthwidth.track.run_source import probe_profiles


def _parse_overrides(ovr) -> dict:
    out = {}
    for o in ovr or []:
        k, _, v = str(o).partition("=")
        k = k.lstrip("+")
        if k in ("model.depth", "model.width", "run.seed"):
            try:
                out[k.split(".")[1]] = int(float(v))
            except ValueError:
                pass
        elif k == "model.shape":
            out["shape"] = v
    return out


def _shape(s):
    return None if s is None or (isinstance(s, float) and math.isnan(s)) else str(s)


def load(name=None, *, fit_path=None, **source) -> Data:
    """Everything a report reads, from a sweep directory, a run table or the W&B API: ``name`` (a
    sweep, or a ``RunSource``) or the source keywords (``runs=``, ``root=``, ``source="wandb"`` ...:
    track/run_source.py, the loader ``dw fit`` reads through too)."""
    import json

    src = RunSource.take(name, source)
    if source:
        raise TypeError(f"load() got unexpected keywords {sorted(source)}")
    if fit_path is not None and not Path(fit_path).is_file():
        raise bad("--fit", str(fit_path), "an existing fit.json written by dw fit")
    fit = None
    rt = src.load()
    if rt.sweep_dir is None:
        d = _table_data(rt.df, rt.label)
    else:
        d = _load_sweep(src.name, rt.df, rt.sweep_dir)
        fp = rt.sweep_dir / "fit.json"
        if fit_path is None and fp.is_file():
            fit_path = fp
    if fit_path is not None:
        try:
            fit = json.loads(Path(fit_path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise bad("--fit", str(fit_path), f"a readable fit.json ({type(e).__name__})") from None
        if not isinstance(fit, dict) or "params" not in fit or "law" not in fit:
            raise bad("--fit", str(fit_path), "a fit.json written by dw fit (keys law, params)")
        fit = FitDocument.from_json(fit)  # read once, typed; an older one's verdicts decided here (fit/result.py)
        d.source["fit"] = str(fit_path)
    d.fit = fit
    d.tuned = tuned_picks(rt.df)
    return d


def tuned_picks(df) -> dict | None:
    """A tuned sweep's picks, as ``dw fit --tuned best`` makes them (fit/tuning.py): the report's
    grid shows each group's best run, not an arbitrary value of the tuned setting."""
    from depthwidth.fit.tuning import picks

    try:
        found = picks(df)
    except BadInput:
        return None
    if not found:
        return None
    best = {p.group: p.best_run for p in found}
    grouped = set(df.loc[df["group"].notna(), "run"].astype(str))
    return {"key": found[0].key, "best": best, "others": sorted(grouped - set(best.values()))}


def _load_sweep(name: str, df, sweep_dir: Path) -> Data:

    simulated = bool(len(df)) and bool(df["simulated"].all())
    events = read_jsonl(sweep_dir / store.MANIFEST)
    manifest, gone = store.manifest_runs(events), store.forgotten(events)
    summ = {}
    for rid, d in store.store_runs(sweep_dir)[0].items():  # the manifest's runs only, one per run id
        s = store.read_json(d / "summary.json")
        if s is not None and str(s.get("run_id") or rid) == rid and rid not in gone:
            summ[rid] = s
    states = {}
    notes = []
    halving = None
    if manifest:
        try:
            st = status(name, root=sweep_dir.parent)
            states = {r["run_id"]: r for r in st["runs"]}
            if st.get("halving"):
                halving = {"summary": st["halving"], "groups": halving_groups(name, sweep_dir.parent)}
        except BadInput:
            pass
    else:
        notes.append("no manifest: run states come from each summary.json alone")
    if simulated:
        notes.insert(0, "simulated store: every loss here was planted by dw simulate (world.json), none was trained")
    ids = list(manifest) or list(summ)
    if not ids:
        raise bad("sweep", name, f"a sweep with a manifest or at least one run summary.json in {sweep_dir}")
    recs = []
    for rid in ids:
        s, m, stt = summ.get(rid, {}), manifest.get(rid, {}), states.get(rid, {})
        ov = _parse_overrides(m.get("overrides"))
        state = stt.get("state") or s.get("status") or "lost"  # no manifest: the summary's word
        recs.append(
            {
                "run": rid,
                "label": m.get("label"),
                "ref": m.get("ref"),
                "state": state,
                "reason": stt.get("reason") or s.get("reason"),
                "depth": s.get("depth", ov.get("depth")),
                "width": s.get("width", ov.get("width")),
                "shape": s.get("shape", ov.get("shape")),
                "seed": s.get("seed", ov.get("seed")),
                "params": num(s.get("params") or m.get("params")),
                "params_non_embedding": num(s.get("params_non_embedding")),
                "flops_per_token": num(s.get("flops_per_token")),
                "kv_bytes_per_token": num(s.get("kv_bytes_per_token")),
                "widths": s.get("widths"),
                "overrides": m.get("overrides"),
                "provenance": s.get("provenance"),
            }
        )
    unread = df.attrs.get("unreadable", [])
    if unread:
        notes.append(f"unreadable summary.json: {', '.join(unread)}")
    if df.attrs.get("warning"):  # folders of the store that the manifest does not list (a copied run)
        notes.append(df.attrs["warning"])
    points = _points(df)
    _attach_final(recs, points)

    return Data(
        {"sweep": name, "dir": str(sweep_dir), "runs": None},
        recs,
        points,
        None,
        probe_profiles(sweep_dir),
        notes,
        read_analyses(sweep_dir, recs),
        read_evals(sweep_dir, recs),
        halving,
    )


def _table_data(df, path: str) -> Data:
    """A report's data from a run table (one row per (run, token budget) point)."""
    if "loss" not in df.columns:
        raise BadInput(
            f"missing column loss in {path} (table has: {', '.join(map(str, df.columns))[:300]}; map with --columns "
            "loss=COLUMN)"
        )
    if "run" not in df.columns:
        df = df.assign(run=[f"row{i}" for i in range(len(df))])
    points = _points(df)
    recs = []
    for rid, g in df.groupby("run", sort=False):
        r0 = g.iloc[-1]
        get = lambda k: r0[k] if k in g.columns else None  # noqa: E731
        st = get("status")
        recs.append(
            {
                "run": str(rid),
                "label": get("label"),
                "ref": None,
                "state": str(st) if isinstance(st, str) else "done",
                "reason": get("reason"),
                "depth": num(get("depth")),
                "width": num(get("width")),
                "shape": _shape(get("shape")),
                "seed": get("seed"),
                "params": num(get("params")),
                "params_non_embedding": None,
                "flops_per_token": num(get("flops_per_token")),
                "kv_bytes_per_token": num(get("kv_bytes_per_token")),
                "mean_width": num(get("mean_width")),
                "widths": None,
                "overrides": None,
            }
        )
    _attach_final(recs, points)
    return Data({"sweep": None, "dir": None, "runs": str(path)}, recs, points, None, [], [])


def _points(df) -> list[dict]:
    out = []
    for r in df.to_dict("records"):
        loss = num(r.get("loss"))
        if loss is None:
            continue
        out.append(
            {
                "run": str(r.get("run")),
                "loss": loss,
                "tokens": num(r.get("tokens")),
                "flops": num(r.get("flops")),
                "params": num(r.get("params")),
                "params_non_embedding": num(r.get("params_non_embedding")),
                "depth": num(r.get("depth")),
                "width": num(r.get("width")),
                "shape": _shape(r.get("shape")),
                "status": r.get("status"),
            }
        )
    return out


def _attach_final(recs, points) -> None:
    """Each run's loss at its final (largest) token budget."""
    by = {}
    for p in points:
        if p["run"] not in by or (p["tokens"] or 0) >= (by[p["run"]]["tokens"] or 0):
            by[p["run"]] = p
    for r in recs:
        p = by.get(r["run"])
        r["loss"] = p["loss"] if p else None
        r["tokens"] = p["tokens"] if p else None
        r["flops"] = p["flops"] if p else None
        for k in ("depth", "width"):
            r[k] = num(r[k]) if r[k] is not None else (p[k] if p else None)
        if r["params"] is None and p:
            r["params"] = p["params"]
        if r["shape"] in (None, "") and p:
            r["shape"] = p["shape"]
        if r["depth"] is not None:
            r["depth"] = int(r["depth"])
        if r["width"] is not None:
            r["width"] = int(r["width"])
