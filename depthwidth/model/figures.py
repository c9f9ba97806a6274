"""The figures ``dw shapes`` prints: a shaped model against its uniform baseline.

Kept apart from the CLI so ``dw sweep --dry-run`` and ``dw report`` can reuse it.
"""

from __future__ import annotations

from depthwidth.config.compose import load_group
from depthwidth.config.schema import MAX_DEPTH, MAX_VOCAB, MAX_WIDTH
from depthwidth.core.errors import bad
from depthwidth.model import accounting, shapes
from depthwidth.model.resolve import from_config
from depthwidth.model.spec import ModelSpec


def figures(spec: ModelSpec, seq_len: int) -> dict:
    """Accounting figures of one spec, flat, for tables and JSON."""
    a = accounting.account(spec, seq_len)
    keys = (
        "params",
        "params_non_embedding",
        "params_active",
        "flops_per_token",
        "flops_attention_per_token",
        "kv_bytes_per_token",
        "mean_width",
    )
    out = {k: a[k] for k in keys}
    terms = (
        shapes.moe_terms(spec.n_experts, spec.expert_hidden / spec.embed_width)
        if spec.mlp == "moe"
        else shapes.DENSE_TERMS
    )
    out["params_vwt"] = shapes.vwt_params(
        spec.widths, spec.embed_width, spec.vocab_size, terms, classes=spec.layer_classes()
    )
    if spec.mlp == "moe":  # the paper's active count (model/accounting.py)
        r = spec.expert_hidden / spec.embed_width
        out["params_vwt_active"] = accounting.vwt_active_params(
            out["params_vwt"], spec.widths, spec.n_experts, r, spec.top_k
        )
    return out


def shape_report(
    family,
    *,
    width,
    depth,
    ratio=0.3,
    turn=None,
    match=None,
    vocab=100263,
    preset="vwt",
    symmetric=None,
    quantum=None,
    seq_len=4096,
    heads=None,
    head_dim=None,
) -> dict:
    """``dw shapes``: FAMILY's widths against the uniform DEPTH x WIDTH model of ``preset``.

    ``match`` None: the preset's (exact for vwt and depth_delusion, vwt for the paper
    presets); ``heads`` / ``head_dim`` replace the preset's head rule.  ``warning``: a
    shape more than ``shapes.MATCH_TOLERANCE`` off the uniform model's true count.
    """
    fam = shapes.canonical_family(family)
    for opt, v, top in (("--width", width, MAX_WIDTH), ("--depth", depth, MAX_DEPTH), ("--vocab", vocab, MAX_VOCAB)):
        if v is not None and not 1 <= v <= top:  # before any search over widths or heads
            raise bad(opt, v, f"an integer in [1, {top:,}]")
    if seq_len < 1:
        raise bad("--seq-len", seq_len, "an integer >= 1")
    if heads is not None and head_dim is not None:
        raise bad("--heads", heads, "either --heads (fixed head count) or --head-dim (fixed head size), not both")
    for name, v in (("--heads", heads), ("--head-dim", head_dim)):
        if v is not None and v < 1:
            raise bad(name, v, "an integer >= 1")
    m = load_group("model", preset)
    width = int(m.width) if width is None else width
    depth = int(m.depth) if depth is None else depth
    match = str(m.match) if match is None else match
    m.vocab_size = vocab
    m.depth, m.width, m.shape, m.ratio, m.turn, m.match = depth, width, fam, ratio, turn, match
    m.symmetric = symmetric
    if quantum is not None:
        m.quantum = quantum
    if heads is not None:
        m.heads, m.head_dim = heads, None
    if head_dim is not None:
        m.heads, m.head_dim = None, head_dim
    m.widths = None
    # Validate the baseline first: a width the heads cannot divide is the user's error.
    uniform = from_config({**_plain(m), "shape": "uniform"})
    shaped = from_config(_plain(m))
    k = turn if turn is not None else shapes.default_turn(fam, depth)
    fu, fs = figures(uniform, seq_len), figures(shaped, seq_len)
    r = fs["params"] / fu["params"]
    warning = shaped.extra.get("warning")
    if abs(r - 1) > shapes.MATCH_TOLERANCE:
        warning = (
            f"params ×uniform {r:.3f}: {fam} is {100 * abs(r - 1):.1f}% off the uniform {width} × {depth} "
            f"model's true parameter count (more than {100 * shapes.MATCH_TOLERANCE:g}%), not matched; "
            + ("--match exact matches the true count" if match == "vwt" else "lower --quantum")
        )
    return {
        "family": fam,
        "width": width,
        "depth": depth,
        "ratio": ratio,
        "turn": k if fam in ("x", "diamond") else None,
        "symmetric": (fam in ("x", "diamond")) if symmetric is None else bool(symmetric and fam in ("x", "diamond")),
        "match": match,
        "quantum": int(m.quantum),
        "heads": shaped.n_head,
        "head_dim": shaped.head_dim,
        "vocab": vocab,
        "preset": preset,
        "seq_len": seq_len,
        "moe": shaped.mlp == "moe",
        "widths": list(shaped.widths),
        "params_ratio": r,
        "warning": warning,
        "uniform": fu,
        "shaped": fs,
    }


def _plain(node) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(node, resolve=True)
