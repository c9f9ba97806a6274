"""Figures of the report's "inside the models" section (analysis.json, probes.jsonl).

Each returns ``(fig, file, title, caption)`` for ``figs.make_all`` to save
(or a string: why it was not drawn).  One line per width shape of the
best-covered (h, L) group (``inside.by_shape``), coloured as in the other
shape figures.
"""

from __future__ import annotations

import numpy as np

from depthwidth.report.inside import by_shape, mlp_rule
from depthwidth.report.document import SHAPE_LABEL, SHAPES

WIDTH_IN = 6.4


FRACTIONS = ("mlp_dead", "mlp_density")


def layer_ticks(ax, L: int) -> None:
    """Integer layer ticks (at most ~12 of them): a layer 2.5 does not exist."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(12, max(int(L), 1))))


def _color(shape):
    return f"C{SHAPES.index(shape) if shape in SHAPES else len(SHAPES)}"


def _from_probes(data):
    """Without analysis.json: each shape's last probes.jsonl entropy profile, of the (h, L)
    group with the most shapes (the probe's small batch, not the analysis's eval set)."""
    groups: dict = {}
    for pr in data.probes:
        if pr.get("status") in ("failed", "diverged"):
            continue
        recs = [p for p in pr.get("probes") or [] if isinstance(p, dict) and p.get("entropy")]
        if recs:
            g = groups.setdefault((pr.get("width"), pr.get("depth")), {})
            g.setdefault(pr.get("shape") or "uniform", {"entropy_prefix": recs[-1]["entropy"]})
    if not groups:
        return None, {}
    key = max(groups, key=lambda k: (len(groups[k]), k[1] or 0, k[0] or 0))
    return key, dict(sorted(groups[key].items(), key=lambda kv: SHAPES.index(kv[0]) if kv[0] in SHAPES else 99))


def _per_layer(plt, data, panels, file, title, caption):
    key, profs = by_shape(data.analyses)
    if not profs and panels[0][0] == "entropy_prefix":
        key, profs = _from_probes(data)
        caption = (
            "H over each layer's w_i coordinates, last probes.jsonl profile (probe.entropy_every; no analysis.json)"
        )
    if not profs:
        return "no analysis.json in the sweep's finished runs (dw analyze NAME)"
    fig, axes = plt.subplots(1, len(panels), figsize=(WIDTH_IN, 3.8), squeeze=False)
    for ax, (k, label, log) in zip(axes[0], panels):
        for shape, p in profs.items():
            v = np.array([np.nan if x is None else x for x in p[k]], float)
            ax.plot(
                np.arange(1, len(v) + 1),
                v,
                "--" if shape == "uniform" else "o-",
                ms=3,
                color=_color(shape),
                label=SHAPE_LABEL.get(shape, shape),
            )
        if log:
            ax.set_yscale("symlog", linthresh=1e-3)
        elif k in FRACTIONS:  # a fraction of units or tokens: nothing below 0 (or above 1) to show
            ax.set_ylim(0.0, max(0.05, min(1.0, ax.get_ylim()[1])))
        ax.set_xlabel("layer l (1 = bottom)")
        layer_ticks(ax, key[1])
        ax.set_ylabel(label)
    axes[0][0].legend(loc="best", fontsize=7)
    full = f"{title} (h = {key[0]}, L = {key[1]})"
    fig.suptitle(full, fontsize=10.5)
    return fig, file, full, caption


def entropy(plt, data, rep, out):
    return _per_layer(
        plt,
        data,
        [("entropy_prefix", "normalised matrix entropy H (0–1)", False)],
        "entropy.png",
        "Residual-stream matrix entropy per layer",
        "H over each layer's own w_i coordinates on the fixed held-out set (dw analyze); a compression "
        "valley is H near 0 in the middle layers (Wu et al.)",
    )


def mlp_dead(plt, data, rep, out):
    return _per_layer(
        plt,
        data,
        [("mlp_dead", "dead MLP units (fraction)", False), ("mlp_density", "mean activation density", False)],
        "mlp_dead.png",
        "MLP units per layer: dead fraction and density",
        f"dead: active on < 0.1% of the held-out tokens ({mlp_rule(data.analyses)})",
    )


def logit_lens(plt, data, rep, out):
    return _per_layer(
        plt,
        data,
        [("lens_ce", "logit-lens CE (nats/token)", False), ("lens_kl_final", "KL(final ‖ layer) (nats)", True)],
        "logit_lens.png",
        "Logit lens per layer",
        "each layer's stream read through the model's own final norm and LM head (carry: as readout "
        "reads it); the last layer is the model's output",
    )


def entropy_training(plt, data, rep, out):
    key, profs = by_shape(data.analyses)
    want = [s for s in ("uniform", "x") if s in profs] or list(profs)[:2]
    runs = {}
    for pr in data.probes:
        if (pr.get("width"), pr.get("depth")) == key and (pr.get("shape") or "uniform") in want:
            recs = [p for p in pr.get("probes") or [] if isinstance(p, dict) and p.get("entropy")]
            if recs:
                runs.setdefault(pr.get("shape") or "uniform", recs)
    if not runs:
        return "no entropy profiles in probes.jsonl (probe.entropy_every) for the analysed shapes"
    shapes = [s for s in want if s in runs]
    fig, axes = plt.subplots(1, len(shapes), figsize=(WIDTH_IN, 3.6), squeeze=False, sharey=True)
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    for ax, s in zip(axes[0], shapes):
        recs = runs[s]
        for j, r in enumerate(recs):
            e = r["entropy"]
            ax.plot(
                np.arange(1, len(e) + 1),
                e,
                "-",
                lw=1.1,
                color=cmap(0.1 + 0.8 * j / max(1, len(recs) - 1)),
                label=f"step {r['step']}",
            )  # every line named: the colour runs early (dark) to late
        ax.set_title(SHAPE_LABEL.get(s, s))
        ax.set_xlabel("layer l (1 = bottom)")
        layer_ticks(ax, key[1])
        ax.legend(loc="best", fontsize=6, ncol=2 if len(recs) > 6 else 1)
    axes[0][0].set_ylabel("normalised matrix entropy H (0–1)")
    title = "Entropy profile over training"
    fig.suptitle(f"{title} (h = {key[0]}, L = {key[1]})", fontsize=10.5)
    return (
        fig,
        "entropy_training.png",
        title,
        (
            "probe.entropy_every: H over each layer's w_i coordinates on a fixed "
            "512-token held-out batch; dark = early, light = late"
        ),
    )


FIGURES = (entropy, mlp_dead, logit_lens, entropy_training)
