"""A ``model`` config group -> a validated ``ModelSpec``: widths from the shape
family (shapes.py), matched in parameters to the uniform model, counted by
accounting.py under the chosen convention (``match: vwt | exact``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from depthwidth.core.errors import bad, number
from depthwidth.model import shapes
from depthwidth.model.accounting import total_params_for_widths
from depthwidth.model.spec import ModelSpec


def from_config(m: Any) -> ModelSpec:
    """Resolve a ``model`` config group (mapping) into a validated ModelSpec.

    ``shape`` + ``ratio``/``turn``/``symmetric``/``quantum``/``match`` give the
    widths through ``shapes.schedule``; an explicit ``widths`` list wins.
    """
    g = (lambda k, d=None: m.get(k, d)) if hasattr(m, "get") else (lambda k, d=None: getattr(m, k, d))
    depth, width = g("depth"), g("width")
    if not isinstance(depth, int) or depth < 1:
        raise bad("model.depth", depth, "an integer >= 1")
    if not isinstance(width, int) or width < 1:
        raise bad("model.width", width, "an integer >= 1")
    embed = g("embed", "h")
    if embed not in ("h", "first"):
        raise bad("model.embed", embed, "h|first")
    heads, head_dim = g("heads"), g("head_dim")
    template = ModelSpec(
        widths=tuple([width] * depth),
        vocab_size=int(g("vocab_size")),
        embed_width=width,
        norm=g("norm", "layernorm"),
        mlp=g("mlp", "gelu"),
        mlp_ratio=number("model.mlp_ratio", g("mlp_ratio", 4)),
        n_head=None if heads is None else int(heads),
        head_dim=None if head_dim is None else int(head_dim),
        rope=bool(g("rope", True)),
        rope_base=number("model.rope_base", g("rope_base", 10000.0)),
        tied=bool(g("tied", False)),
        resize=g("resize", "carry"),
        stabiliser=g("stabiliser", "none"),
        bias=bool(g("bias", False)),
        init_std=number("model.init_std", g("init_std", 0.02)),
        width_scaled_init=bool(g("width_scaled_init", False)),
        mup=bool(g("mup", False)),
        m_width=number("model.m_width", g("m_width", 8.0)),
        m_emb=number("model.m_emb", g("m_emb", 12.0)),
        m_residual=number("model.m_residual", g("m_residual", 0.22)),
        attn_scale=g("attn_scale", "auto"),
        n_experts=g("n_experts", 22),
        top_k=g("top_k", 3),
        expert_hidden=g("expert_hidden", 512),
        aux_loss_coef=number("model.aux_loss_coef", g("aux_loss_coef", 0.01)),
        router_z=number("model.router_z", g("router_z", 0.1)),
    )
    warning = None
    explicit = g("widths")
    if explicit:
        widths = [int(w) for w in explicit]
        if len(widths) != depth:
            raise bad("model.widths", list(widths), f"a list of model.depth={depth} widths")
    else:
        def count(ws):
            e = ws[0] if embed == "first" else width
            return total_params_for_widths(ws, replace(template, embed_width=e))

        widths = shapes.schedule(
            g("shape", "uniform"), width, depth,
            ratio=number("model.ratio", g("ratio", 0.3)), turn=g("turn"), symmetric=g("symmetric"),
            quantum=int(g("quantum", 32)), match=g("match", "vwt"), count=count, strict=False,
            vwt_terms=(shapes.moe_terms(template.n_experts, template.expert_hidden / width)
                       if template.mlp == "moe" else shapes.DENSE_TERMS),
        )
        if g("match", "vwt") == "exact" and len(set(widths)) > 1:
            off = shapes.exact_mismatch(widths, width, count)
            if off > shapes.EXACT_TOLERANCE:  # small models: a step of q is a large share of a width
                warning = (f"model.match=exact: widths rounded to multiples of {g('quantum', 32)} leave the "
                           f"parameters {100 * off:.2f}% off the uniform model (0.5% wanted); lower model.quantum")
    spec = replace(template, widths=tuple(widths), embed_width=widths[0] if embed == "first" else width,
                   extra={"warning": warning} if warning else {})
    return spec.validate()
