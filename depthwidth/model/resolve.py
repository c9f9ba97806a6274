"""A ``model`` config group -> a validated ``ModelSpec``: widths from the shape
family (shapes.py), matched in parameters to the uniform model, counted by
accounting.py under the chosen convention (``match: exact | vwt``).  A group given
in part is completed with the schema's defaults (config/schema.py), never with
defaults of its own."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from depthwidth.config.check import check_setting
from depthwidth.config.schema import MAX_DEPTH, MAX_EXPERTS, MAX_VOCAB, MAX_WIDTH, Model, choices, complete
from depthwidth.core.errors import bad, number
from depthwidth.model import shapes
from depthwidth.model.accounting import total_params_for_widths
from depthwidth.model.spec import ModelSpec


# the integer settings checked first: their type and range in the schema, then these caps (schema.MAX_*)
BOUNDED = {
    "depth": MAX_DEPTH,
    "width": MAX_WIDTH,
    "quantum": MAX_WIDTH,
    "heads": MAX_WIDTH,
    "head_dim": MAX_WIDTH,
    "widths": MAX_WIDTH,
    "n_experts": MAX_EXPERTS,
    "top_k": MAX_EXPERTS,
    "expert_hidden": MAX_WIDTH,
}


def from_config(m: Any) -> ModelSpec:
    """Resolve a ``model`` config group (mapping) into a validated ModelSpec.

    ``shape`` + ``ratio``/``turn``/``symmetric``/``quantum``/``match`` give the
    widths through ``shapes.schedule``; an explicit ``widths`` list wins.
    """
    c = complete("model", m if hasattr(m, "items") else vars(m))  # a partial group: the schema's defaults
    for key, top in BOUNDED.items():  # type and range before anything loops over them
        check_setting("model", key, c[key])
        v = c[key]
        if v is not None and max(v if isinstance(v, list) else [v], default=0) > top:
            shown = list(v) if isinstance(v, list) else v
            raise bad(
                f"model.{key}",
                shown,
                f"{'a list of integers' if isinstance(v, list) else 'an integer'} in [1, {top:,}]",
            )
    depth, width = c["depth"], c["width"]
    vocab = c["vocab_size"]
    if isinstance(vocab, bool) or not isinstance(vocab, int) or not 1 <= vocab <= MAX_VOCAB:
        raise bad("model.vocab_size", vocab, f"an integer in [1, {MAX_VOCAB}] (the data's vocabulary)")
    embed = c["embed"]
    if embed not in choices(Model, "embed"):
        raise bad("model.embed", embed, "|".join(choices(Model, "embed")))
    heads, head_dim = c["heads"], c["head_dim"]
    template = ModelSpec(
        widths=tuple([width] * depth),
        vocab_size=vocab,
        embed_width=width,
        norm=c["norm"],
        mlp=c["mlp"],
        mlp_ratio=number("model.mlp_ratio", c["mlp_ratio"]),
        n_head=None if heads is None else int(heads),
        head_dim=None if head_dim is None else int(head_dim),
        rope=bool(c["rope"]),
        rope_base=number("model.rope_base", c["rope_base"]),
        tied=bool(c["tied"]),
        resize=c["resize"],
        stabiliser=c["stabiliser"],
        bias=bool(c["bias"]),
        init_std=number("model.init_std", c["init_std"]),
        width_scaled_init=bool(c["width_scaled_init"]),
        mup=bool(c["mup"]),
        m_width=number("model.m_width", c["m_width"]),
        m_emb=number("model.m_emb", c["m_emb"]),
        m_residual=number("model.m_residual", c["m_residual"]),
        attn_scale=c["attn_scale"],
        n_experts=c["n_experts"],
        top_k=c["top_k"],
        expert_hidden=c["expert_hidden"],
        aux_loss_coef=number("model.aux_loss_coef", c["aux_loss_coef"]),
        router_z=number("model.router_z", c["router_z"]),
    )
    warning = None
    explicit = c["widths"]
    if explicit:
        widths = [int(w) for w in explicit]
        if len(widths) != depth:
            raise bad("model.widths", list(widths), f"a list of model.depth={depth} widths")
    else:

        def count(ws):  # the template's embedding width is ``width`` already
            return total_params_for_widths(ws, replace(template, embed_width=ws[0]) if embed == "first" else template)

        widths = shapes.schedule(
            c["shape"],
            width,
            depth,
            ratio=number("model.ratio", c["ratio"]),
            turn=c["turn"],
            symmetric=c["symmetric"],
            quantum=int(c["quantum"]),
            match=c["match"],
            count=count,
            strict=False,
            vwt_terms=(
                shapes.moe_terms(template.n_experts, template.expert_hidden / width)
                if template.mlp == "moe"
                else shapes.DENSE_TERMS
            ),
        )
        if c["match"] == "exact" and len(set(widths)) > 1:
            off = shapes.exact_mismatch(widths, width, count)
            if off > shapes.EXACT_TOLERANCE:  # small models: a step of q is a large share of a width
                warning = (
                    f"model.match=exact: widths rounded to multiples of {c['quantum']} leave the "
                    f"parameters {100 * off:.2f}% off the uniform model (0.5% wanted); lower model.quantum"
                )
    widths, embed_width = tuple(widths), widths[0] if embed == "first" else width
    if (
        widths == template.widths
        and set(map(type, widths)) == {int}
        and embed_width == template.embed_width
        and not warning
    ):
        spec = template  # a uniform model: the template is the spec (a spec costs 20 us to build)
    else:
        spec = replace(template, widths=widths, embed_width=embed_width, extra={"warning": warning} if warning else {})
    check_heads(spec, quantum=None if explicit or len(set(widths)) == 1 else int(c["quantum"]))
    return spec.validate()


def check_heads(spec: ModelSpec, quantum: int | None = None) -> None:
    """A fixed head count must split every layer's width into whole, even (RoPE) heads: name
    the first width that fails and the head counts (or the quantum) that would fit."""
    n = spec.n_head
    if (
        n is None
        or not isinstance(n, int)
        or n < 1
        or spec.head_dim is not None
        or any(not isinstance(spec.widths[i], int) or spec.widths[i] < 1 for i, _ in spec.layer_classes())
    ):
        return  # spec.validate() words the other cases
    pair = 2 if spec.rope else 1
    for i, _ in spec.layer_classes():  # one layer of each width, in order: the first that fails
        w = spec.widths[i]
        if w % n == 0 and (w // n) % pair == 0:
            continue
        # h fits every width x when pair * h divides x: the divisors of gcd(widths) / pair (never a loop to min width)
        g = math.gcd(*spec.widths)
        fits = _divisors(g // pair) if g % pair == 0 else []
        fits = sorted(sorted(fits, key=lambda h: abs(math.log(h / n)))[:3], reverse=True)  # the nearest to n
        need = f"a multiple of the head count {n}"
        if pair > 1:
            need += f" with an even head size (RoPE), i.e. of {pair * n}"
        says = ", ".join(map(str, fits[:-1])) + (" or " if len(fits) > 1 else "") + str(fits[-1]) if fits else ""
        hint = (
            f"--heads (model.heads) {says} would fit every width"
            if fits
            else "no head count fits every width" + (" (RoPE needs an even head size)" if pair > 1 else "")
        )
        if quantum is not None:
            hint += f", or a --quantum (model.quantum) that is a multiple of {pair * n}"
        raise bad(f"width of layer {i + 1}", w, f"{need}; {hint}")


def _divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending (trial division up to sqrt(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
