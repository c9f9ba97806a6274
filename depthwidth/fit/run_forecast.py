"""Early warning for ``dw status``: each run's forecast final loss, from its run directory.

A run's curve is its ``metrics.jsonl`` (docs/CONTRACTS.md) and its lr schedule what its
``config.yaml`` sets, recomputed by the trainer's own ``optim.lr_at``.  The curve forecast
(fit/forecast.py) is of the held-out loss when the run logs one (``train.eval_every`` > 0)
and has enough of it, else of the training loss:

- held-out first: ``final_val_loss`` (what the run table and every law are measured on)
  is a held-out loss, and the periodic evaluations use the same fixed
  held-out batches as it, so the curve and the number it forecasts are the same quantity;
- the training loss otherwise: one batch's loss per line, noisier, and on a small corpus
  it can sit apart from the held-out loss (on the CPU demo's text the final training loss
  is −0.09 to +0.15 nats from ``final_val_loss``), which a reader comparing it with a
  law's prediction has to allow for.

``attach`` fills in the status rows' ``forecast`` (or ``forecast_note``: why there is none),
``law_pred`` and ``flag``.  ``law_pred`` is the sweep's fitted law's prediction for the run
(fit/predict.py, from fit.json's replicates); ``flag`` is set when the forecast's interval and
the law's do not overlap (a likely bug, bad learning rate or bad node).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from depthwidth.config.node import run_config
from depthwidth.core.atomic import read_jsonl
from depthwidth.fit.forecast import MIN_FRACTION, MIN_POINTS, Schedule, enough, flag, forecast
from depthwidth.train import optim

# a run in one of these states has its whole curve: forecast only when asked (a backtest)
FINISHED = ("done",)
SCHEDULE_POINTS = 20_000


def run_schedule(cfg) -> tuple[float, dict]:
    """(total tokens, {"tokens", "lr"}) of a run's resolved config: the lr as the trainer sets it
    (``optim.lr_at``) at every step, or at ``SCHEDULE_POINTS`` steps spread over a longer run
    (each standing for the steps since the one before: ample for a curve's lr-weighted area)."""
    steps, per_step = optim.plan_steps(cfg.train)
    idx = np.arange(steps)
    if steps > SCHEDULE_POINTS:
        idx = np.unique(np.linspace(0, steps - 1, SCHEDULE_POINTS).round().astype(int))
    lr = np.array([optim.lr_at(int(s), steps, cfg.optim, per_step) for s in idx])
    return float(steps * per_step), {"tokens": per_step * (idx + 1.0), "lr": lr}


def read_config(run_dir: Path):
    """The run's config.yaml as a ``RunConfig``, or None when it is missing or unreadable."""
    import yaml

    try:
        doc = yaml.load((Path(run_dir) / "config.yaml").read_text(encoding="utf-8"), Loader=_loader())
    except (OSError, ValueError, yaml.YAMLError):
        return None
    return run_config(doc) if isinstance(doc, dict) else None


def run_curve(rows: list[dict], schedule: dict, total: float, upto: float | None = None):
    """("val" | "train", tokens, loss) from metrics.jsonl's rows up to ``upto`` tokens: the
    held-out curve when it is long enough to forecast from (past warm-up), else the training one."""
    rows = [r for r in rows if _num(r.get("tokens")) and (upto is None or r["tokens"] <= upto)]

    def points(key):
        pts = [(r["tokens"], r[key]) for r in rows if _num(r.get(key))]
        return np.array([p[0] for p in pts], dtype=float), np.array([p[1] for p in pts], dtype=float)

    t, y = points("val_loss")
    if enough(t[t >= Schedule(schedule, total).fit_from], total):
        return "val", t, y
    return ("train", *points("loss"))


def forecast_run(run_dir, upto_fraction: float | None = None, level: float = 0.95) -> tuple[dict | None, str | None]:
    """(forecast dict with its ``curve``, None) for the run in ``run_dir``, or (None, why not).
    ``upto_fraction``: forecast from the first part of the curve only (a finished run's backtest)."""
    cfg = read_config(run_dir)
    if cfg is None:
        return None, "no readable config.yaml"
    try:
        total, schedule = run_schedule(cfg)
    except Exception as e:  # a config this version cannot plan: say so in the row, never fail status
        return None, f"schedule unknown ({type(e).__name__})"
    upto = None if upto_fraction is None else upto_fraction * total
    curve, t, y = run_curve(read_jsonl(Path(run_dir) / "metrics.jsonl"), schedule, total, upto)
    try:
        f = forecast(t, y, total, schedule, level)
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as e:  # a curve it cannot fit: say so
        return None, f"no fit ({type(e).__name__}: {e})"
    if f is None:
        past = int(np.sum(t >= Schedule(schedule, total).fit_from))
        return None, (
            f"{past} {curve}-loss point(s) past warm-up, up to {100 * (t.max() if len(t) else 0) / total:.0f}% "
            f"of the tokens (needs {MIN_POINTS} and {100 * MIN_FRACTION:.0f}%)"
        )
    return {**f.to_dict(), "curve": curve}, None


def law_prediction(sweep: str, row: dict) -> dict | None:
    """The sweep's fitted law's predicted final loss for this run and its prediction interval,
    ``{"mean", "lo", "hi", "level"}`` (fit/predict.py), or None when the sweep has no fit with
    replicates or the row lacks the law's inputs."""
    ens = _ensemble(str(Path(row.get("run_dir") or ".").parent / "fit.json"))
    if ens is None or not all(_num(row.get(k)) for k in ("depth", "width", "tokens_total")):
        return None
    from depthwidth.core.errors import BadInput
    from depthwidth.fit.predict import predict

    x = {"depth": row["depth"], "width": row["width"], "tokens": row["tokens_total"]}
    if _num(row.get("params")):
        x["params"] = row["params"]
    try:
        p = predict(ens, [x])
    except (KeyError, BadInput):  # a law whose inputs this row cannot give (e.g. a user law's own columns)
        return None
    return {"mean": float(p["loss"][0]), "lo": float(p["pi"][0][0]), "hi": float(p["pi"][1][0]), "level": ens.level}


_ENSEMBLES: dict = {}


def _ensemble(path: str):
    """The fit.json's ensemble, once per file and modification time (a status poll reads it once)."""
    import os

    try:
        key = (path, os.path.getmtime(path))
    except OSError:
        return None
    if key not in _ENSEMBLES:
        from depthwidth.core.errors import BadInput
        from depthwidth.fit.files import read_fit
        from depthwidth.fit.predict import ensemble_of

        fit = read_fit(path)
        try:
            _ENSEMBLES[key] = None if fit is None else ensemble_of(fit)
        except BadInput:  # no replicates (a fit made before they were kept): no law prediction, not an error
            _ENSEMBLES[key] = None
    return _ENSEMBLES[key]


def attach(st: dict, backtest: float | None = None, level: float = 0.95) -> dict:
    """Fill in ``forecast`` (or ``forecast_note``: why there is none), ``law_pred`` and ``flag``
    on the rows of a ``launch.status.status`` document: for each running run, and with
    ``backtest`` (a fraction of the tokens) for each finished run too, forecast from that first
    part of its curve, to set beside its measured final loss.  Other rows keep None."""
    for row in st["runs"]:
        if row["state"] == "running":
            upto = None
        elif row["state"] in FINISHED and backtest is not None:
            upto = backtest
        else:
            continue
        if not row.get("run_dir"):  # a status row without its directory (never written yet): nothing to read
            continue
        row["forecast"], row["forecast_note"] = forecast_run(row["run_dir"], upto, level)
        row["law_pred"] = law = law_prediction(st["sweep"], row)
        if law is not None:
            row["flag"] = flag(row["forecast"], law.get("lo"), law.get("hi"))
    return st


def _num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _loader():
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)
