"""The published laws as starting points: the parameters dw plants and the prior a design starts from.

``PUBLISHED``: for each law, parameters near the papers' own results.  The depth-delusion law fitted
by dw to the 13 losses "The Depth Delusion" publishes (docs/science.md §1.6; small models at 6.4B
tokens, the 1B-7B pairs at 20 tokens per parameter up to 140B; N = 12·D·W²) with D_crit pinned at the
paper's κ = 2.43 (log form) or c = 0.981, p = 0.44 (power form); with E, E pinned at 1.0 nat and the
rest refitted.  chinchilla: Besiroglu et al.'s refit of Hoffmann et al.  width-depth: the same 13
losses, E pinned at 1.0.  ``dw simulate`` plants them (simulate/world.py).

``prior(law)``: an ensemble (fit/predict.py) of draws around ``PUBLISHED``, for ``dw suggest`` and
``dw sweep --dry-run --prior published`` before a sweep has runs.  How wide, and why (dw's choice,
stated in docs/design.md):

* exponents (alpha, delta, mu, beta, a_w, a_d, p): log-normal, σ = 0.35 on the log: a 95% range of
  ×/÷ 2 around the centre.  The paper's own alpha interval, [−0.21, 0.65], is wider still, but it
  includes negative exponents (loss rising with size) that no design needs to plan for;
* the D_crit scale (kappa, c): log-normal, σ = 0.35: D_crit ×/÷ 2 at 95% (the paper's κ = 2.43
  against the power form's W^0.44 differ by 2× at W = 4096, docs/science.md §1);
* coefficients (A, B, gamma, E, A_w, A_d): log-normal, σ = 0.5 on the log;
* the noise of a new run's log loss: the law's misfit at its configuration, the paper's own RMSE
  (0.113 nats, 0.036 on log loss at the published losses' mean: shared by every seed of one
  configuration), 0.006 seed-to-seed (0.01-0.03 nats at a loss of ~3.4, the spread a seed gives)
  and 0.002 per point.

Draws outside the law's bounds are redrawn.  Independent draws this wide predict losses anywhere
from 1 to 12 nats, so 40,000 of them are weighted by how well they explain the 13 losses the paper
publishes, at the paper's own misfit (RMSE 0.113 nats), and 1,000 are drawn by weight (an effective
sample of ~130 on depth-delusion).  The anchored prior predicts the published range and keeps what
those losses cannot pin down (κ still spans ×/÷ 2) uncertain: it is for choosing the first runs,
not for trusting their predictions.
"""

from __future__ import annotations

import math

import numpy as np

from depthwidth.core.errors import bad
from depthwidth.fit.laws import Law, label
from depthwidth.model.accounting import n_12dw2, n_12dw2_total
from depthwidth.fit.papers import DD_FIT, DD_KAPPA, DD_LOSSES, DD_POWER_C, DD_TAU_EXPONENT, DD_VOCAB

_DD = {"A": 11.04, "alpha": 0.0837, "B": 32.21, "delta": 0.1552, "gamma": 0.7298, "mu": 0.3197}
_DD_E = {"E": 1.0, "A": 23.77, "alpha": 0.1662, "B": 48.97, "delta": 0.1648, "gamma": 2.71, "mu": 0.4867}
PUBLISHED = {
    "depth-delusion[log]": {**_DD, "kappa": DD_KAPPA},
    "depth-delusion[power]": {
        "A": 10.94,
        "alpha": 0.0820,
        "B": 21.88,
        "delta": 0.1405,
        "gamma": 0.7298,
        "mu": 0.3197,
        "c": DD_POWER_C,
        "p": DD_TAU_EXPONENT,
    },
    "depth-delusion[log+E]": {**_DD_E, "kappa": DD_KAPPA},
    "depth-delusion[power+E]": {**_DD_E, "c": DD_POWER_C, "p": DD_TAU_EXPONENT},
    "chinchilla": {"E": 1.82, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
    "width-depth": {"E": 1.0, "A_w": 14.22, "a_w": 0.3757, "A_d": 1.354, "a_d": 1.577, "B": 43.03, "beta": 0.1613},
}
PRIORS = ("published",)
EXPONENT_SIGMA = 0.35  # log-normal: ×/÷ 2 at 95%
DCRIT_SIGMA = 0.35
COEF_SIGMA = 0.5
DRAWS = 1000


# The 13 losses "The Depth Delusion" publishes (docs/science.md §1): (depth, width, training loss);
# small models at 6.4B tokens, the 1B-7B pairs at 20 tokens per parameter up to 140B.
PUBLISHED_LOSSES = tuple((d, w, loss) for (d, w), (loss, _) in DD_LOSSES.items())  # fit/papers.py
PAPER_RMSE = DD_FIT["rmse"]  # nats: the paper's own misfit of its law, the anchor's noise
SEED = 0.006  # log loss: a new run's seed-to-seed spread
MISFIT = PAPER_RMSE / float(np.mean([loss for _, _, loss in PUBLISHED_LOSSES]))  # in log loss, ~0.036
NOISE = {  # a new run = the law + the misfit at its configuration + seed + point noise; df large: as stated
    "run": math.hypot(MISFIT, SEED),
    "seed": SEED,
    "point": 0.002,
    "df_run": 1000,
    "df_point": 1000,
}


def published_table():
    """The published losses as a run table (N = 12·D·W², the law's own count; tokens as trained)."""
    rows = []
    for d, w, loss in PUBLISHED_LOSSES:
        total = n_12dw2_total(d, w, DD_VOCAB)  # the paper's N_total: which budget it was trained at
        tokens = 6.4e9 if total < 1e9 else min(20 * total, 1.4e11)
        rows.append({"depth": d, "width": w, "params": n_12dw2(d, w), "tokens": tokens, "loss": loss})
    return rows


def prior(law: Law, name: str = "published", draws: int = DRAWS, seed: int = 0):
    """An Ensemble of ``draws`` parameter vectors around ``PUBLISHED[label(law)]``, weighted by how
    well each explains the 13 published losses at the paper's own misfit (``PAPER_RMSE``): the wide
    independent draws alone predict losses from 1 to 12 nats; anchored, they predict the published
    range and keep what the losses cannot pin down (where D_crit lies) uncertain."""
    from depthwidth.fit.derived import default_convention
    from depthwidth.fit.predict import Ensemble

    if name not in PRIORS:
        raise bad("--prior", name, "|".join(PRIORS))
    centre = PUBLISHED.get(label(law))
    if centre is None:
        raise bad("--prior", name, f"a law with published parameters: {', '.join(PUBLISHED)}")
    rng = np.random.default_rng(seed)
    point = law.internal(centre)
    theta = _draws(law, centre, POOL, rng)
    w = _anchor_weights(law, theta)
    pick = rng.choice(len(theta), size=draws, replace=True, p=w)
    ess = 1.0 / float((w**2).sum())
    conv = default_convention(law.name)
    note = f"{POOL:,} draws weighted by the 13 published losses (effective sample size {ess:.0f})"
    return Ensemble(law, point, theta[pick], dict(NOISE), None, conv, 0.95, f"prior {name}", [note])


POOL = 40000  # independent draws the anchor weighs


def _anchor_weights(law: Law, theta: np.ndarray) -> np.ndarray:
    import pandas as pd

    t = pd.DataFrame(published_table())
    y = np.log(t["loss"].to_numpy())
    pred = law.evaluate(theta, law.data(t))
    sigma = PAPER_RMSE / float(np.mean(t["loss"]))  # nats -> log loss at the published losses' level
    ll = -0.5 * (((pred - y[None, :]) / sigma) ** 2).sum(axis=1)
    ll[~np.isfinite(ll)] = -np.inf
    w = np.exp(ll - ll.max())
    return w / w.sum()


def _draws(law: Law, centre: dict, draws: int, rng) -> np.ndarray:
    theta = np.empty((draws, len(law.params)))
    for i, p in enumerate(law.params):
        v = centre[p.name]
        sigma = DCRIT_SIGMA if p.name in ("kappa", "c") else EXPONENT_SIGMA if p.exponent else COEF_SIGMA
        col = np.full(draws, np.nan)
        todo = np.ones(draws, dtype=bool)
        for _ in range(100):  # redraw what falls outside the law's bounds
            x = v * np.exp(rng.normal(0.0, sigma, int(todo.sum())))
            u = np.log(x) if p.log else x
            col[todo] = u
            todo = (col < p.lo) | (col > p.hi)
            if not todo.any():
                break
        theta[:, i] = np.clip(col, p.lo, p.hi)
    return theta
