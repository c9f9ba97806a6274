"""``dw fit`` as a library: fit a loss law to a run table, with bootstrap intervals.

    from depthwidth.fit import fit
    res = fit("demo", law="depth-delusion", where=["shape=uniform"])   # a sweep under $DW_RUNS
    res = fit(runs="gemstones.jsonl", law="chinchilla", bootstrap=200)  # any run table (csv, jsonl, parquet)
    res = fit(runs=df, law="chinchilla", write=False)                   # or a pandas DataFrame
    res = fit("demo", options=FitOptions(law="width-depth", bootstrap=1000))  # the options as one value
    res = fit(runs="farseer.csv", law="farseer.yaml")   # a user-defined law (docs/user_laws.md); also a dict
    res["params"], res["ci"], res["derived"], res["provenance"]
    m = flops_to_match(df)   # FLOPs to match uniform: m.rows[i].flops_fraction, .flops_fraction_ci, m.curves

Modules, in the order a fit uses them:

- options.py: ``FitOptions``, every choice of a fit (shared by ``dw fit``, ``--match`` and the report)
- files.py: what a fit reads and writes (the run table, fit.json / match.json, provenance fingerprint)
- table.py: ``--where`` filters and cleaning a run table for a law
- laws.py: laws as data (parameters, bounds, start grids, the term kinds they are built from; ``label``)
- userlaw.py + expr.py: user-defined laws (``--law FILE.yaml``, ``load_law``): a safe expression language with
  exact derivatives, the whole formula one term of a law
- engine.py: the robust multi-start fit (``fit_law``) and its numerics (the batched LM solver, ``FitResult``)
- boot.py: bootstrap refits (seed noise or whole runs) and which intervals may be shown
- derived.py: numbers derived from a law (D_crit, compute-optimal allocation), and which N a fit means
  (``--n-convention``) with N(D, W) for the optimal shape
- analyses/gradient_persistence.py: tau(W) from the runs' gradient-norm profiles (the statistics, fit.json's
  ``gradient_persistence`` and its figure)
- verdicts.py: every verdict (is the claim identified, which law to draw, meaningful optima) and the
  plain-language warnings on a fit the data barely constrain
- holdout.py: every held-out fit (fit small, predict large; LORO and extrapolation errors)
- analyses/downstream.py: a downstream metric from loss in two steps (``--metric acc:TASK``: the loss law, then
  a sigmoid), with its section and table
- tuning.py: a tuned sweep's best value per group (measured, interpolated, edge) and the table a law is fitted on
  (fit.json's ``tuning`` and the fixed-value fit beside it: analyses/tuning.py);
  lr*'s power laws (``lr_fits``: the statistics; the analysis, ``dw fit --law lr``'s lr_fit.json: analyses/lr_law.py)
- analyses/compare.py: laws side by side (``--compare``), with its section and table
- analyses/sensitivity.py: refits under other fitting choices (``--sensitivity``), with its section and table
- isoflop.py: approach 2, isoFLOP profiles (``--approach isoflop``)
- planted.py: a fit of a simulated store against the world it was planted from
- pipeline.py: the whole ``dw fit`` (``run_fit``), one named step each
- match.py: FLOPs to match uniform (``flops_to_match``: the statistics; the analysis, ``dw fit --match``'s
  match.json: analyses/match.py)
- predict.py: an ensemble of a fit's replicates: predicted losses with intervals, targets, the greedy design
- prior.py: the papers' parameters (what ``dw simulate`` plants) and the prior ``dw suggest`` starts from
- forecast.py + run_forecast.py: a running run's final loss from its own curve, beside the law's (``dw status``)
"""

from __future__ import annotations

import importlib

_LAZY = {
    "flops_to_match": "depthwidth.fit.match",
    "FitOptions": "depthwidth.fit.options",
    "run_fit": "depthwidth.fit.pipeline",
}


def __getattr__(name: str):
    """The public names, imported on first use: ``dw --help`` reads fit/defaults.py without numpy."""
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'depthwidth.fit' has no attribute {name!r}")


__all__ = ["FitOptions", "fit", "flops_to_match", "run_fit"]


def fit(name: str | None = None, **options) -> dict:
    """``dw fit NAME --law LAW ...``: the fit.json document (written for a sweep unless ``write=False``);
    ``options``: ``run_fit``'s, a ``FitOptions``'s fields among them (the law: chinchilla unless given)."""
    from depthwidth.fit.pipeline import run_fit

    return run_fit(name, **options)
