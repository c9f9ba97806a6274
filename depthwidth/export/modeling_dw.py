"""A dw model for inference in ``transformers`` (custom code written by ``dw export``).

This file is copied, as it is, into every exported folder whose model has no exact stock
``transformers`` class (variable widths, the carry/zero/proj resize modes, depth
stabilisers, MoE, no RoPE, LayerNorm with SwiGLU, ...).  Load such a folder with

    AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)

It imports nothing from dw, so it runs where dw is not installed.  The forward is dw's
(``depthwidth/model/gpt.py``, ``model/moe.py``), re-implemented for inference, and the
parameter names are dw's own, so a dw checkpoint loads as it is:

* layer i has width w_i; the token embedding and the LM head's input have width h; for
  carry and zero the residual stream is R = max(max_i w_i, h) wide and layer i reads and
  writes its first w_i coordinates (zero: the coordinates beyond the previous layer's width
  are cleared first); for proj the stream is exactly as wide as the current layer and a
  bias-free Linear maps it whenever the width changes;
* blocks are pre-LN, or post-LN, DeepNorm, ReZero or NormFormer (``stabiliser``);
* RoPE rotates the halves of each head (x_j with x_{j+hs/2}), angles computed in float64
  as dw does; µP multiplies the embedding by ``embedding_multiplier``, every branch output
  by ``residual_multiplier``, and divides the logits by ``logits_scaling``;
* an MoE layer routes each token to its top-k SwiGLU experts, weighted by a softmax over
  those k router logits.

Generation keeps a KV cache (``transformers``' ``DynamicCache``: its layers may differ in
head count and head size).  Training is not the purpose: dw trains, this file reads.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.nn import functional as F
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_dw import DwConfig

try:  # transformers >= 5: initialisers that skip the weights a checkpoint has already filled
    from transformers import initialization as init
except ImportError:  # pragma: no cover - older transformers
    from torch.nn import init


def make_norm(kind: str, width: int, eps: float) -> nn.Module:
    return nn.LayerNorm(width, eps=eps) if kind == "layernorm" else nn.RMSNorm(width, eps=eps)


def rope_angles(positions: torch.Tensor, head_size: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (B, 1, T, hs/2) for positions (B, T): float64 angles, float32 tables (as dw)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float64, device=positions.device) / head_size))
    angles = positions.to(torch.float64)[..., None] * inv_freq
    return angles.cos().float()[:, None], angles.sin().float()[:, None]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class DwAttention(nn.Module):
    def __init__(self, config: DwConfig, i: int):
        super().__init__()
        w = self.width = config.widths[i]
        self.layer_idx, self.n_head = i, config.heads[i]
        self.head_size = w // self.n_head
        self.scale = 1.0 / self.head_size if config.attention_scale == "inv" else None  # None: 1/sqrt(hs)
        self.c_attn = nn.Linear(w, 3 * w, bias=config.bias)  # q, k, v fused, in that order
        self.c_proj = nn.Linear(w, w, bias=config.bias)

    def forward(self, x: torch.Tensor, ctx: dict) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (
            t.view(B, T, self.n_head, self.head_size).transpose(1, 2) for t in self.c_attn(x).split(self.width, 2)
        )
        if ctx["rope"] is not None:
            cos, sin = (t.to(q.dtype) for t in ctx["rope"][self.head_size])
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        cache = ctx["cache"]
        if cache is not None:
            k, v = cache.update(k, v, self.layer_idx)
        mask = ctx["mask"]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None, scale=self.scale)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, self.width))


class DwMLP(nn.Module):
    def __init__(self, config: DwConfig, i: int):
        super().__init__()
        w, m = config.widths[i], config.intermediate_sizes[i]
        self.kind = config.mlp
        self.c_fc = nn.Linear(w, m, bias=config.bias)
        if self.kind == "swiglu":
            self.c_gate = nn.Linear(w, m, bias=config.bias)
        self.c_proj = nn.Linear(m, w, bias=config.bias)
        self.mid_norm = make_norm(config.norm, m, config.norm_eps) if config.stabiliser == "normformer" else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = F.silu(self.c_gate(x)) * self.c_fc(x) if self.kind == "swiglu" else F.gelu(self.c_fc(x))
        if self.mid_norm is not None:
            a = self.mid_norm(a)
        return self.c_proj(a)


class DwMoE(nn.Module):
    """Top-k of E SwiGLU experts; a token's k weights are a softmax over its k router logits."""

    def __init__(self, config: DwConfig, i: int):
        super().__init__()
        w, m, E = config.widths[i], config.intermediate_sizes[i], config.num_experts
        self.width, self.n_experts, self.top_k = w, E, config.num_experts_per_tok
        self.router = nn.Linear(w, E, bias=False)
        self.w_fc = nn.Parameter(torch.empty(E, m, w))
        self.w_gate = nn.Parameter(torch.empty(E, m, w))
        self.w_proj = nn.Parameter(torch.empty(E, w, m))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        xt = x.reshape(-1, self.width)
        top, experts = self.router(xt).topk(self.top_k, dim=-1)
        low = top.dtype in (torch.float16, torch.bfloat16)
        weights = F.softmax(top.float() if low else top, dim=-1).to(xt.dtype)
        # the token-slots grouped by expert, each expert applied once to its tokens (as dw dispatches)
        flat = experts.reshape(-1)
        order = flat.argsort(stable=True)
        token = order // self.top_k
        counts = torch.bincount(flat, minlength=self.n_experts).tolist()
        parts = []
        for e, xe in enumerate(xt[token].split(counts)):
            parts.append((F.silu(xe @ self.w_gate[e].t()) * (xe @ self.w_fc[e].t())) @ self.w_proj[e].t())
        y = torch.cat(parts) * weights.reshape(-1)[order].unsqueeze(-1)
        acc = torch.float32 if low else y.dtype  # the k contributions summed in fp32 at least
        out = torch.zeros(xt.size(0), self.width, dtype=acc, device=y.device).index_add_(0, token, y.to(acc))
        return out.to(y.dtype).view(shape)


class DwBlock(nn.Module):
    def __init__(self, config: DwConfig, i: int):
        super().__init__()
        w = config.widths[i]
        in_w = config.hidden_size if i == 0 else config.widths[i - 1]
        eps, st = config.norm_eps, config.stabiliser
        self.stabiliser = st
        self.proj_in = nn.Linear(in_w, w, bias=False) if config.resize == "proj" and in_w != w else None
        self.norm_1 = make_norm(config.norm, w, eps)
        self.attn = DwAttention(config, i)
        self.norm_2 = make_norm(config.norm, w, eps)
        self.mlp = DwMoE(config, i) if config.mlp == "moe" else DwMLP(config, i)
        self.m_res = config.residual_multiplier
        self.attn_out_norm = make_norm(config.norm, w, eps) if st == "normformer" else None
        self.alpha = (2 * config.num_hidden_layers) ** 0.25 if st == "deepnorm" else 1.0
        if st == "rezero":
            self.gate_attn = nn.Parameter(torch.zeros(()))
            self.gate_mlp = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, ctx: dict) -> torch.Tensor:
        if self.proj_in is not None:
            x = self.proj_in(x)
        st = self.stabiliser
        if st in ("post", "deepnorm"):
            x = self.norm_1(self.alpha * x + self.attn(x, ctx))
            return self.norm_2(self.alpha * x + self.mlp(x))
        a = self.attn(self.norm_1(x), ctx)
        if st == "rezero":
            x = x + self.gate_attn * a
            return x + self.gate_mlp * self.mlp(self.norm_2(x))
        if self.attn_out_norm is not None:
            a = self.attn_out_norm(a)
        if self.m_res is not None:
            x = x + self.m_res * a
            return x + self.m_res * self.mlp(self.norm_2(x))
        x = x + a
        return x + self.mlp(self.norm_2(x))


class DwPreTrainedModel(PreTrainedModel):
    config_class = DwConfig
    base_model_prefix = "dw"
    _no_split_modules = ["DwBlock"]
    _skip_keys_device_placement = ["past_key_values"]

    def _init_weights(self, module):
        # Only what a checkpoint did not fill (dw's checkpoints fill every tensor).
        super()._init_weights(module)
        if isinstance(module, DwMoE):
            for p in (module.w_fc, module.w_gate, module.w_proj):
                init.normal_(p, mean=0.0, std=self.config.initializer_range)
        if isinstance(module, DwBlock) and module.stabiliser == "rezero":
            init.zeros_(module.gate_attn)
            init.zeros_(module.gate_mlp)


class DwForCausalLM(DwPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "wte.weight"}

    def __init__(self, config: DwConfig):
        super().__init__(config)
        c = config
        h, R = c.hidden_size, max(max(c.widths), c.hidden_size)
        self.stream_width = h if c.resize == "proj" else R
        wL = c.widths[-1]
        self.final_norm_width = h if c.resize == "proj" else max(wL, h)
        self.wte = nn.Embedding(c.vocab_size, h)
        self.blocks = nn.ModuleList(DwBlock(c, i) for i in range(c.num_hidden_layers))
        self.proj_out = nn.Linear(wL, h, bias=False) if c.resize == "proj" and wL != h else None
        self.norm_f = make_norm(c.norm, self.final_norm_width, c.norm_eps)
        self.lm_head = nn.Linear(h, c.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.wte

    def set_input_embeddings(self, value):
        self.wte = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def _context(self, input_ids, attention_mask, position_ids, cache) -> dict:
        """What every layer shares: RoPE tables per head size, the cache, the attention mask."""
        B, T = input_ids.shape
        past = cache.get_seq_length() if cache is not None else 0
        pad = attention_mask is not None and attention_mask.dim() == 2 and not bool(attention_mask.all())
        if position_ids is None:
            if pad:  # left padding: positions count the real tokens only
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]
            else:
                position_ids = torch.arange(past, past + T, device=input_ids.device).expand(B, T)
        rope = None
        if self.config.rope:
            sizes = {w // n for w, n in zip(self.config.widths, self.config.heads)}
            rope = {hs: rope_angles(position_ids, hs, self.config.rope_theta) for hs in sizes}
        mask = None
        if pad or past:  # SDPA's is_causal aligns queries to the first keys: spell the mask out
            S = past + T
            q_pos = torch.arange(past, S, device=input_ids.device)[:, None]
            mask = (torch.arange(S, device=input_ids.device)[None, :] <= q_pos)[None, None]  # (1, 1, T, S)
            if pad:
                keep = attention_mask[:, None, None, -S:].bool()
                # a padded query would see no key at all (NaN): let it see itself
                mask = (mask & keep) | (torch.arange(S, device=input_ids.device)[None, :] == q_pos)
        return {"rope": rope, "cache": cache, "mask": mask}

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        return_dict: bool | None = None,
        **kwargs,
    ):
        c = self.config
        if inputs_embeds is not None:
            raise ValueError("this dw model takes input_ids, not inputs_embeds")
        use_cache = c.use_cache if use_cache is None else use_cache
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        cache = past_key_values if use_cache else None
        ctx = self._context(input_ids, attention_mask, position_ids, cache)

        x = self.wte(input_ids)
        if c.embedding_multiplier != 1.0:
            x = x * c.embedding_multiplier
        if x.size(-1) < self.stream_width:  # carry, zero: coordinates beyond h start at zero
            x = F.pad(x, (0, self.stream_width - x.size(-1)))
        for i, block in enumerate(self.blocks):
            if c.resize == "proj":  # the layer owns the whole stream
                x = block(x, ctx)
                continue
            w = c.widths[i]
            if c.resize == "zero":  # nothing beyond the previous layer's width is carried forward
                x = _zero_beyond(x, c.hidden_size if i == 0 else c.widths[i - 1])
            y = block(x[..., :w], ctx)
            x = torch.cat((y, x[..., w:]), dim=-1) if w < x.size(-1) else y

        slice_ = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        x = x[:, slice_]
        if self.proj_out is not None:
            x = self.proj_out(x)
        elif c.resize == "zero":
            x = _zero_beyond(x, c.widths[-1])
        x = self.norm_f(x[..., : self.final_norm_width])[..., : c.hidden_size]
        logits = self.lm_head(x)
        if c.logits_scaling != 1.0:
            logits = logits / c.logits_scaling

        loss = None
        if labels is not None:  # the usual causal-LM loss: position t predicts labels[t + 1]
            flat = logits[:, :-1].float().reshape(-1, logits.size(-1))
            loss = F.cross_entropy(flat, labels[:, 1:].reshape(-1).to(flat.device), ignore_index=-100)
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=cache)


def _zero_beyond(x: torch.Tensor, w: int) -> torch.Tensor:
    return F.pad(x[..., :w], (0, x.size(-1) - w)) if w < x.size(-1) else x


__all__ = ["DwForCausalLM", "DwPreTrainedModel"]
