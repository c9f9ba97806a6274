"""``dw suggest``: which runs of a sweep's space would shrink the target's interval most per GPU-hour,
from the sweep's fit (or a published prior before it has one); the dry run's value of each planned
run is sweep/dry_run.py's ``dry_run_predictions``, from the same ensemble and design.

Candidates are the sweep's own space: per block, every combination of the values its runs take
on each setting that varies among them (a grid of 16 listed (depth, width) pairs becomes the
product of its depths and widths), at the block's token rule, launcher and memory plan, at each
of the block's seeds and one more (a replicate of a configuration is a candidate: where the noise
is what limits the target, a second seed can teach more than a new shape); runs already in the
store are not candidates.  ``--candidates "model.depth=4,8,16;model.width=512"``
sets the values of settings (any config key, ``run.seed`` too) in every block.  Each candidate is
composed and checked exactly as ``dw sweep`` would (run id, GPU-hours, memory plan); those that
would be refused are left out and counted.  A tuned sweep's candidate (``tune:``, fit/tuning.py)
is a whole tuning group: its runs at every tuned value, its cost their sum, its loss the group's
best, which is what ``dw fit --tuned`` fits (a run at one learning rate measures no point of the law).
A group the store has begun (``begun_groups``: one of its runs measured) is not a candidate: the fit
has its best so far, so the rest of its runs would complete a point the fit has, not add one; such
groups are counted apart (``partial_groups``).

The choice itself is fit/predict.py's ``design`` (expected variance reduction from the ensemble; a
multi-output law's candidate is one run, of one cost, that reveals every output: each pick carries
every output's predicted loss).
The picks are written as an ordinary sweep file, ``sweeps/NAME_next.yaml``, whose ``store: NAME``
puts its runs in NAME's run store: the same run ids, ``dw status NAME``, ``dw fit NAME`` and
retries as the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Container, Iterable, Sequence

import numpy as np

from depthwidth.config.identity import config_key
from depthwidth.config.schema import Run as RunSettings
from depthwidth.core import store
from depthwidth.core.errors import BadInput, bad
from depthwidth.fit.predict import (
    Design,
    Ensemble,
    Target,
    check_cost_power,
    design,
    ensemble_of,
    parse_target,
    predict,
    predict_outputs,
)
from depthwidth.fit.prior import prior as prior_ensemble
from depthwidth.fit.verdicts import verdict_line
from depthwidth.launch.config import split_overrides
from depthwidth.sweep.expand import Run, expand
from depthwidth.sweep.file import load_file, points, store_of, sweeps_dir

META = ("run.seed", "tracker.seed_in_name")  # never an axis of the candidate grid unless asked
MAX_CANDIDATES = 5000
CLAIM = {"depth-delusion": "dcrit@{w}", "width-depth": "W_exponent", "chinchilla": "N_exponent"}


@dataclass
class Source:
    """Where the ensemble came from, and the sweep's store."""

    name: str  # the sweep file
    doc: dict  # its contents, read once
    store: str  # its run store's sweep name
    ensemble: Ensemble
    fit: dict | None  # the fit.json, when there is one
    notes: list = field(default_factory=list)


def ensemble_for(name: str, prior: str | None = None, law: str = "depth-delusion", first: bool = True) -> Source:
    """The sweep's fit.json's ensemble, else the prior ``prior`` (``published``) of ``law``, else
    (``first``: a sweep with no finished run yet) the published prior; BadInput otherwise."""
    from depthwidth.fit.files import read_fit
    from depthwidth.fit.laws import get_law

    doc = load_file(name)
    st = store_of(name, doc)
    path = store.sweep_dir(st) / "fit.json"
    fit = read_fit(path) if prior is None else None
    if fit is not None:
        return Source(name, doc, st, ensemble_of(fit), fit)
    said = []
    measured = measured_losses(st) if prior is None else {}
    if prior is None and first and not measured:  # no runs yet: a first design from the papers
        prior, said = "published", [f"sweep {st} has no finished runs yet: a first design from the published prior"]
    if prior is None and measured and len(measured) < len(get_law(law).params):
        few = _few_runs(st, get_law(law))  # dw fit refuses these: a design starts from them all the same
        if few is not None:
            return Source(name, doc, st, few, None, [few.notes[0]])
    if prior is None:
        raise BadInput(
            f"sweep {st} has no fit.json yet ({path}): fit its runs (dw fit {st} --law depth-delusion), "
            "or plan from the papers with --prior published"
        )
    ens = prior_ensemble(get_law(law), prior)
    return Source(
        name,
        doc,
        st,
        ens,
        None,
        [*said, f"from the {prior} prior ({law}; fit/prior.py says how wide and why)", *ens.notes],
    )


def _few_runs(st: str, law) -> Ensemble | None:
    """The RML ensemble (fit/design_rounds.py) of a store with fewer finished runs than ``law`` has
    parameters, where dw fit refuses a fit; None where the runs cannot be read as a table."""
    from depthwidth.fit.design_rounds import DesignFailed, rml_ensemble
    from depthwidth.track.run_source import RunSource

    try:
        df = RunSource(st).load().df
        last = df.sort_values("tokens").groupby("run").tail(1).reset_index(drop=True)
        ens = rml_ensemble(law, last)
    except (BadInput, DesignFailed, KeyError):
        return None
    ens.notes.append(
        f"sweep {st} has {len(last)} finished runs, fewer than the {len(law.params)} parameters of {law.name} "
        "(dw fit refuses a fit): the design starts from an RML ensemble of them (fit/design_rounds.py: each "
        "replicate the law's start grid fitted to the runs)"
    )
    return ens


def default_target(src: Source) -> Target:
    """The law's claim: D_crit at the sweep's median width (depth-delusion), else the W or N exponent."""
    law = src.ensemble.law
    spec = CLAIM.get(law.name, law.names[0])
    if "{w}" in spec:
        widths = sorted(_widths(src))
        spec = spec.format(w=widths[len(widths) // 2] if widths else 512)
    return parse_target(spec, law)


def _unidentified(fit: dict | None, tgt: Target) -> str | None:
    """A note where the fit it starts from stored its target as not identified (fit.json's
    ``identification``: a D_crit below one layer, an optimum from an unidentified claim)."""
    if not (fit or {}).get("identification"):
        return None
    from depthwidth.fit.result import FitDocument

    v = FitDocument.from_json(fit).verdicts  # as stored by dw fit (an older fit.json's decided when read)
    flag = v.dcrit_range.get(tgt.key)
    co = (fit.get("derived") or {}).get("compute_optimal") or {}
    if flag is None and co.get("c_ref") == tgt.c_ref:  # an optimum's flag holds at the fit's own compute only
        flag = v.optimum.get(tgt.key.split(".")[-1])  # compute_optimal.W_opt -> W_opt
    if not flag or flag.get("identified") is not False:
        return None
    return (
        f"the fit does not identify {tgt.label} ({flag.get('because')}): the interval after is how much these "
        "runs would narrow its interval, not a promise to identify it"
    )


def _widths(src: Source) -> set[int]:
    ws = ((src.fit or {}).get("derived") or {}).get("dcrit", {}).get("widths") or {}
    if ws:
        return {int(w) for w in ws}
    return {int(p["keys"]["model.width"]) for p in points(src.name, src.doc) if "model.width" in p["keys"]}


# -- candidates ------------------------------------------------------------------------------


def parse_candidates(spec: str | None) -> dict[str, list]:
    """``"model.depth=4,8,16;model.width=512"`` -> {key: [values]}; BadInput on a malformed part."""
    import yaml

    if not spec:
        return {}
    out = {}
    for part in [p for p in str(spec).split(";") if p.strip()]:
        key, eq, vals = part.partition("=")
        key = key.strip()
        if not eq or "." not in key or not vals.strip():
            raise bad("--candidates", part.strip(), "KEY=V1,V2,... parts separated by ';' (e.g. model.depth=4,8,16)")
        out[key] = [yaml.safe_load(v.strip()) for v in vals.split(",") if v.strip()]
    return out


def candidate_doc(name: str, doc: dict, extra: dict[str, list]) -> dict:
    """The sweep file's space as a sweep document: per block, the product of the values each
    varying setting takes there (``extra`` sets or adds settings' values in every block)."""
    blocks = doc.get("blocks") or [{k: v for k, v in doc.items() if k in ("runs", "axes", "zip", "seeds")}]
    top = {k: v for k, v in doc.items() if k not in ("runs", "axes", "zip", "seeds", "blocks", "isoflop", "store")}
    out = []
    for blk in blocks:
        pts = points(name, {**top, "blocks": [blk]})
        values: dict[str, list] = {}
        for p in pts:
            for k, v in p["keys"].items():  # a tuned key is the group's own: ``tune:`` expands it again
                if k not in META and k not in (p.get("tuned") or ()) and v not in values.setdefault(k, []):
                    values[k].append(v)
        axes = {k: sorted(v, key=str) for k, v in values.items() if len(v) > 1}
        if "model.depth" in axes and "model.depth" not in extra:
            axes["model.depth"] = between_depths(axes["model.depth"])
        if "model.width" in axes and "model.width" not in extra:
            axes["model.width"] = between_widths(axes["model.width"])
        axes.update(extra)
        nb = {k: v for k, v in blk.items() if k not in ("runs", "axes", "zip", "seeds")}
        fixed = {k: v[0] for k, v in values.items() if len(v) == 1 and k not in extra}
        nb["fixed"] = {k: v for k, v in {**(nb.get("fixed") or {}), **fixed}.items() if k not in META}
        if "run.seed" not in extra:  # the block's seeds and one more: a replicate is a candidate too
            seeds = sorted({int(p["keys"]["run.seed"]) for p in pts if "run.seed" in p["keys"]}) or [RunSettings.seed]
            nb["seeds"] = [*seeds, seeds[-1] + 1]
        if axes:
            nb["axes"] = axes
        else:
            nb["runs"] = [{}]
        out.append(nb)
    return {**top, "blocks": out}


BEYOND = 1.5  # the deepest candidate, times the grid's deepest depth


def between_depths(depths: list) -> list:
    """The grid's depths, the geometric midpoint of each pair of neighbours, and BEYOND times the
    deepest: where D_crit lies between two grid depths (or past the deepest), only runs there can
    locate it, and a grid of doublings has none (the design had proposed only depths it already had)."""
    ds = sorted({int(d) for d in depths})
    mids = {round(math.sqrt(a * b)) for a, b in zip(ds, ds[1:])}
    return sorted({*ds, *(m for m in mids if m not in ds), round(BEYOND * ds[-1])})


WIDTH_STEP = 64  # a candidate width between the grid's is a multiple of this (or of the grid's own step)


def between_widths(widths: list) -> list:
    """The grid's widths and the geometric midpoint of each pair of neighbours, rounded to a multiple
    of the grid's own step (the largest power of two dividing every width, at most ``WIDTH_STEP``), so
    heads divide it as they divide the grid's; none past the widest (the memory plan's limit is the
    grid's).  A width the model or the memory plan refuses is refused with the other candidates."""
    ws = sorted({int(w) for w in widths})
    step = WIDTH_STEP
    while step > 1 and any(w % step for w in ws):
        step //= 2
    mids = {step * round(math.sqrt(a * b) / step) for a, b in zip(ws, ws[1:])}
    return sorted({*ws, *(m for m in mids if ws[0] < m < ws[-1])})


def candidates(
    name: str, extra: dict[str, list] | None = None, overrides: Sequence[str] = (), doc: dict | None = None, **plan
) -> tuple[list[Run], dict]:
    """(valid candidate runs not already in the store, counts {refused, in_store}) of sweep ``name``
    (its file, or ``doc`` already read), with ``overrides`` as ``dw sweep NAME OVERRIDES`` takes them
    (``launcher=slurm`` for GPU-hours)."""
    doc = load_file(name) if doc is None else doc
    st = store_of(name, doc)
    cdoc = candidate_doc(name, doc, extra or {})
    n = 1
    for b in cdoc["blocks"]:
        n = max(n, math.prod(len(v) for v in (b.get("axes") or {}).values()) if b.get("axes") else 1)
    if n * len(cdoc["blocks"]) > MAX_CANDIDATES:
        raise bad("--candidates", f"{n * len(cdoc['blocks'])} runs", f"at most {MAX_CANDIDATES} candidates")
    run_ovr, launch_ovr = split_overrides(overrides)
    sw = expand(
        f"{name} (candidates)",
        run_ovr,
        doc={**cdoc, "store": st},
        launcher_overrides=launch_ovr,
        check_gpus=False,
        **plan,
    )
    have, held = _in_store(st)  # held: {config_key: (precision, run id)}
    ok = [r for r in sw.runs if not r.error]
    same = [r for r in ok if r.run_id in have]
    # the same configuration at another precision (the store simulated or trained with another
    # launcher): recognised by its key, not proposed again, and said once (cli/suggest.py)
    key = {id(r): config_key(r.cfg) for r in ok if r.run_id not in have} if held else {}
    other = [r for r in ok if key.get(id(r)) in held]
    good = [r for r in ok if r.run_id not in have and key.get(id(r)) not in held]
    counts = {"refused": len(sw.bad), "in_store": len(same) + len(other)}
    if sw.bad and not ok:  # every candidate refused: say why (an override dw sweep would refuse, too)
        counts["why"] = sw.bad[0].error
    # a tuning group the store has begun: the rest of its runs complete a point the fit has and add
    # none: not a candidate, counted apart.  Another precision's run is the store's under its own id.
    stored = [(r.group, r.run_id) for r in same] + [(r.group, held[key[id(r)]][1]) for r in other]
    tuned = [(g, rid) for g, rid in stored if g]  # an untuned sweep reads no run table for this
    begun = begun_groups(tuned, measured_losses(st)) if tuned else set()
    rest = [r for r in good if r.group in begun]
    if rest:
        good = [r for r in good if r.group not in begun]
        hours = sum(r.figures["device_hours"] for r in rest)
        counts["partial_groups"] = {"groups": len({r.group for r in rest}), "runs": len(rest), "hours": hours}
    if other:
        theirs = sorted({held[key[id(r)]][0] for r in other})
        counts["other_precision"] = {
            "runs": len(other),
            "store": theirs,
            "here": sorted({str(r.cfg.train.precision) for r in other}),
        }
    return good, counts


def _within_fit(runs: list[Run], fit: dict | None) -> tuple[list[Run], int]:
    """(the candidates the fit's ``--where`` keeps, how many it leaves out): a fit of the uniform runs
    of a store of shapes (a shape-blind law) predicts only uniform runs, so only those are proposed.
    A filter on a column the candidates do not carry leaves them all."""
    where = (fit or {}).get("where") or []
    if not where or not runs:
        return runs, 0
    import pandas as pd

    from depthwidth.fit.table import apply_where

    df = pd.DataFrame(rows_of(runs))
    if not all(w.split("=", 1)[0] in df.columns for w in where):
        return runs, 0
    try:
        keep = list(apply_where(df, where).index)
    except BadInput:  # no candidate matches
        keep = []
    return [runs[i] for i in keep], len(runs) - len(keep)


def begun_groups(runs: Iterable[tuple[str | None, str]], measured: Container[str]) -> set[str]:
    """The tuning groups of ``runs`` ((group, run id) pairs) the store has begun: those with a run
    ``measured`` (``measured_losses``), the one rule of ``candidates`` and the dry run's ``dry_units``.
    dw fit --tuned fits each group's best measured run, so such a group is a point the fit has and
    its other runs would complete it; a run in the store not measured (submitted, running, failed)
    gives the fit no point (a failed one never will), so its group is still a new point to value."""
    return {g for g, rid in runs if g and rid in measured}


def _in_store(st: str) -> tuple[set[str], dict[str, tuple[str, str]]]:
    """(run ids the store already has, in any state; {config_key: (precision, run id)} of those whose
    config it holds): a candidate never repeats one, whatever precision the command's launcher gives it."""
    if not store.manifest_path(st).exists():
        return set(), {}
    from depthwidth.config.node import nodes
    from depthwidth.launch.status import status

    ids = {r["run_id"] for r in status(st)["runs"]}
    keys = {}
    for rid in ids:
        folder = store.run_folder(store.sweep_dir(st), rid)
        cfg = _config_of(folder) if folder is not None else None
        if cfg is not None:
            keys[config_key(nodes(cfg))] = (str((cfg.get("train") or {}).get("precision")), rid)
    return ids, keys


def _config_of(folder) -> dict | None:
    """A run folder's resolved config.yaml, or None (no folder yet, unreadable)."""
    import yaml

    try:
        cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return cfg if isinstance(cfg, dict) else None


def rows_of(runs: list[Run]) -> list[dict]:
    """The law's input columns of each run (its final token budget)."""
    return [
        {
            "depth": r.figures["depth"],
            "width": r.figures["width"],
            "params": r.figures["params"],
            "params_non_embedding": r.figures["params_non_embedding"],
            "tokens": r.figures["tokens"],
            "flops": r.figures["flops"],
            "shape": r.figures["shape"],
        }
        for r in runs
    ]


def tuning_units(runs: list[Run]) -> list[list[Run]]:
    """The candidates as units of what one measurement takes: on a tuned sweep each tuning group's
    runs (those not in the store), else each run alone, in the runs' order."""
    units: dict = {}
    for r in runs:
        units.setdefault(r.group or id(r), []).append(r)
    return list(units.values())


def _unit_pick(unit: list[Run]) -> Run:
    """A picked unit as one entry: a run alone, or its tuning group (its id, its overrides without the
    tuned keys, which the next file's ``tune:`` expands again)."""
    r = unit[0]
    if not r.group:
        return r
    from dataclasses import replace

    tuned = set(r.tuned)
    keys = {k: v for k, v in r.keys.items() if k not in tuned}
    overrides = [o for o in r.overrides if o.split("=", 1)[0] not in tuned]
    return replace(r, keys=keys, overrides=overrides, run_id=r.group)


def _tuned_note(units: list[list[Run]]) -> str | None:
    """One line saying that a candidate is a tuning group, or None on a sweep that does not tune."""
    g = next((u for u in units if u[0].group), None)
    if g is None:
        return None
    keys = ", ".join(sorted(g[0].tuned))
    return (
        f"a tuned sweep: each candidate is a tuning group (up to {max(len(u) for u in units)} runs, one a value "
        f"of {keys}), its device-hours their sum (halving would stop some early) and its loss the group's best, "
        "as dw fit --tuned fits it; run id is the group's"
    )


def partial_note(part: dict) -> str:
    """The one line on the tuning groups the store has begun (``candidates``' ``partial_groups``)."""
    return (
        f"{part['groups']} tuning groups the store has begun are not candidates (their other {part['runs']} runs, "
        f"{part['hours']:.3g} device-hours, would complete them): dw fit --tuned fits each group's best so far, so "
        "they would complete a point the fit has, not add one, and the design values new points; dw sweep of the "
        "file that listed them runs the rest"
    )


# -- dw suggest ------------------------------------------------------------------------------


@dataclass
class Suggestion:
    source: Source
    target: Target
    design: Design
    runs: list[Run]  # the picks, in order
    predicted: dict  # loss, pi for the picks (a multi-output law: None, and outputs: {output: {loss, pi}})
    counts: dict
    budget: float
    written: str | None = None

    def to_dict(self) -> dict:
        d, t = self.design, self.target
        return {
            "sweep": self.source.name,
            "store": self.source.store,
            "from": self.source.ensemble.source,
            "target": t.spec,
            "target_label": t.label,
            "interval_now": d.width_now,
            "interval_after": _finite(d.width_after[-1] if d.width_after else d.width_now),
            "unit": "tuning groups" if any(r.group for r in self.runs) else "runs",
            "budget_hours": self.budget,
            "spent_hours": d.spent,
            "candidates": len(d.cost),
            **{f"candidates_{k}": v for k, v in self.counts.items()},
            "notes": self.source.notes,
            "fit_verdict": verdict_line((self.source.fit or {}).get("identification")),
            "runs": [
                {
                    "run_id": r.run_id,
                    "overrides": r.overrides,
                    "depth": r.figures["depth"],
                    "width": r.figures["width"],
                    "shape": r.figures["shape"],
                    "seed": r.figures["seed"],
                    "label": r.label,
                    "hours": float(d.cost[j]),
                    **predicted_fields(self.predicted, i),
                    "interval_after": _finite(d.width_after[i]),
                }
                for i, (j, r) in enumerate(zip(d.picks, self.runs))
            ],
            "written": self.written,
        }


def _predictions(ens: Ensemble, rows: list[dict]) -> dict:
    """The picks' predicted losses: {loss, pi}; a multi-output law's, every output's of each pick
    ({loss: None, pi: None, outputs: {output: {loss, pi}}}: one run reveals them all)."""
    if not rows:
        return {"loss": [], "pi": [[], []]}
    per = predict_outputs(ens, rows)
    return {"loss": None, "pi": None, "outputs": per} if per else predict(ens, rows)


def predicted_fields(pred: dict, i: int) -> dict:
    """Pick ``i``'s predicted_loss and pi (and a multi-output law's per output)."""
    if pred.get("outputs"):
        outs = {
            o: {"loss": float(p["loss"][i]), "pi": [float(p["pi"][0][i]), float(p["pi"][1][i])]}
            for o, p in pred["outputs"].items()
        }
        return {"predicted_loss": None, "pi": None, "outputs": outs}
    return {
        "predicted_loss": float(pred["loss"][i]),
        "pi": [float(pred["pi"][0][i]), float(pred["pi"][1][i])],
    }


def _finite(x: float) -> float | None:
    """A width, or None where the runs cannot determine the target (JSON has no infinity)."""
    return float(x) if math.isfinite(x) else None


PROMISE_NOTE = (
    "the interval after is the one dw fit will report from the runs alone: a fit knows nothing of the "
    "prior, so it can be wider than the prior's now (none: the runs cannot determine the target)"
)


def suggest(
    name: str,
    budget: float,
    target: str | None = None,
    *,
    candidates_spec: str | None = None,
    overrides: Sequence[str] = (),
    prior: str | None = None,
    law: str = "depth-delusion",
    out: Path | None = None,
    write: bool = True,
    rounds: int = 1,
    cost_power: float = 1.0,
    **plan,
) -> Suggestion:
    """The runs of sweep ``name``'s space to train next within ``budget`` device-hours; with
    ``rounds`` R > 1, the first of R rounds (budget / R): the rest is chosen after refitting on what
    this round measures, which a design fixed now cannot use."""
    if not (isinstance(budget, (int, float)) and math.isfinite(budget) and budget > 0):
        raise bad("--budget", budget, "GPU-hours > 0")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise bad("--rounds", rounds, "an integer >= 1")
    check_cost_power(cost_power, "--cost-power")
    total, budget = budget, budget / rounds
    extra = parse_candidates(candidates_spec)
    src = ensemble_for(name, prior, law)
    tgt = parse_target(target, src.ensemble.law) if target else default_target(src)
    if note := _unidentified(src.fit, tgt):
        src.notes.append(note)
    runs, counts = candidates(name, extra, overrides, src.doc, **plan)
    if not runs:
        begun = (counts.get("partial_groups") or {}).get("runs", 0)
        more = f", {begun} completing tuning groups it has begun" if begun else ""
        raise BadInput(
            f"sweep {name}: no candidate runs left ({counts['in_store']} already in the store, "
            f"{counts['refused']} refused by the plan{more}): "
            + (f"every one refused, e.g. {counts['why']}" if counts.get("why") else "widen them with --candidates")
        )
    if counts.get("other_precision"):
        o = counts["other_precision"]
        src.notes.append(
            f"{o['runs']} candidates are in the store at another precision ({', '.join(o['store'])} there, "
            f"{', '.join(o['here'])} with this launcher): the same configurations, not proposed again"
        )
    if part := counts.get("partial_groups"):
        src.notes.append(partial_note(part))
    runs, outside = _within_fit(runs, src.fit)
    if outside:
        counts["outside_fit"] = outside
        where = " ".join((src.fit or {}).get("where") or [])
        src.notes.append(
            f"{outside} candidates left out: outside the fit's --where {where} (its law was fitted on those "
            "runs alone; its predictions elsewhere would be extrapolations it never saw)"
        )
        if not runs:
            raise BadInput(
                f"sweep {name}: no candidate runs inside the fit's --where {where}: widen them with --candidates"
            )
    units = tuning_units(runs)
    if note := _tuned_note(units):
        src.notes.append(note)
    cost = np.array([sum(r.figures["device_hours"] for r in u) for u in units])
    cheapest = int(np.argmin(cost))
    if budget < cost[cheapest]:
        r = _unit_pick(units[cheapest])
        hint = ""  # no launcher=X: the hours are this machine's launcher's, on its device
        if not any(o.split("=", 1)[0].lstrip("+") == "launcher" for o in overrides):
            dev = "GPU" if (r.figures.get("plan") or {}).get("device") == "cuda" else "CPU"
            hint = f"; no launcher named, so these are {dev}-hours here (launcher={r.launcher.get('name')}): "
            hint += "launcher=slurm for GPU-hours"
        raise bad(
            "--budget",
            budget,
            f"at least the cheapest candidate's {cost[cheapest]:.3g} device-hours "
            f"({r.figures['depth']}L×{r.figures['width']}, {' '.join(r.overrides)}){hint}",
        )
    rows = rows_of([u[0] for u in units])  # a group's runs share the law's inputs
    d = design(src.ensemble, tgt, rows, cost, budget=budget, cost_power=cost_power)
    picked = [_unit_pick(units[j]) for j in d.picks]
    if not src.ensemble.from_fit:
        src.notes.append(PROMISE_NOTE)
    pred = _predictions(src.ensemble, [rows[j] for j in d.picks])
    if rounds > 1:
        src.notes.append(
            f"round 1 of {rounds} ({budget:.3g} of {total:.3g} device-hours): when these runs end, dw fit "
            f"{src.store} and dw suggest {name} --budget {total - d.spent:.3g} "
            f"--rounds {rounds - 1} choose the next from what they measured"
        )
    s = Suggestion(src, tgt, d, picked, pred, counts, float(budget))
    if write and picked:
        s.written = str(write_next(name, s, out))
    return s


def write_next(name: str, s: Suggestion, out: Path | None = None) -> Path:
    """``sweeps/NAME_next.yaml``: the picks as explicit runs in NAME's store (atomic)."""
    import yaml

    from depthwidth.core.atomic import write_text

    doc = s.source.doc
    base = {k: doc[k] for k in ("groups", "launcher") if doc.get(k)}
    by_label: dict = {}
    for i, r in enumerate(s.runs):
        keys = {k: v for k, v in r.keys.items() if not k.startswith("tracker.")}
        groups = {g: v for g, v in r.groups.items() if (doc.get("groups") or {}).get(g) != v}
        p = predicted_fields(s.predicted, i)
        ref = {"source": "suggested"}
        if p.get("outputs"):  # a multi-output law: what the run is predicted to reveal, each output
            ref["predicted"] = {
                o: {"loss": round(v["loss"], 5), "pi": [round(x, 5) for x in v["pi"]]} for o, v in p["outputs"].items()
            }
        else:
            ref.update(predicted_loss=round(p["predicted_loss"], 5), pi=[round(x, 5) for x in p["pi"]])
        ref["target"] = s.target.spec
        entry = {**groups, **keys, "ref": ref}
        blk = by_label.setdefault((r.label, bool(r.group)), {"runs": []})  # a tuned block's groups apart
        if r.label:
            blk["label"] = r.label
        same = [b for b in doc.get("blocks") or () if b.get("label") == r.label]  # unlabelled blocks share None
        lab = next((b for b in same if bool(b.get("tune", doc.get("tune"))) == bool(r.group)), same[0] if same else {})
        if r.launcher and lab.get("launcher"):  # the block's launcher settings (GPUs per node ...)
            blk["launcher"] = lab["launcher"]
        if r.group and lab.get("tune", doc.get("tune")):  # a tuning group: its values expanded again
            blk["tune"] = lab.get("tune", doc.get("tune"))
        blk["runs"].append(entry)
    next_doc = {
        "description": (
            f"dw suggest {name}: {len(s.runs)} {'tuning groups' if any(r.group for r in s.runs) else 'runs'} "
            f"for {s.target.spec} within {s.budget:g} device-hours "
            f"(from the {s.source.ensemble.source}); they join the store of {s.source.store}"
        ),
        "store": s.source.store,
        **base,
        "blocks": [{k: b[k] for k in ("label", "launcher", "tune", "runs") if k in b} for b in by_label.values()],
    }
    path = Path(out) if out else sweeps_dir() / f"{name.removesuffix('_next')}_next.yaml"
    write_text(path, yaml.safe_dump(next_doc, sort_keys=False, width=120))
    return path


def measured_losses(st: str) -> dict[str, float]:
    """Final measured loss per finished run id of the store."""
    if not store.manifest_path(st).exists():
        return {}
    from depthwidth.track.run_source import RunSource

    try:
        df = RunSource(st).load().df
    except BadInput:
        return {}
    if df.empty or "run" not in df or "loss" not in df:
        return {}
    last = df.sort_values("tokens").groupby("run").tail(1)
    return {str(r): float(v) for r, v in zip(last["run"], last["loss"])}
