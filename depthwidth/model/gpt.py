"""The variable-width decoder: a GPT whose layers may differ in width.

Symbols as in docs/science.md §2: layer i has width w_i, the token embedding and
the LM head's input have width h (``spec.embed_width``), the residual stream
is R = max(max_i w_i, h) wide.  How the stream changes width between layers
is ``spec.resize``:

carry  (carry-forward, the default) layer i reads the first w_i coordinates
       of the stream and writes back only those; coordinates >= w_i keep
       whatever the last wider layer (or the embedding, or zero) left there.
zero   (zero-padding) as carry, but before layer i the coordinates beyond the
       previous layer's width are zeroed, so nothing is carried forward.
proj   (learned projection) the stream is exactly as wide as the current
       layer; a bias-free Linear maps it whenever the width changes.

For carry and zero the stream is held as segments cut at the width breakpoints
(``Stream``): a layer reads and writes only its own w_i coordinates, so its cost
follows w_i, not R, and the coordinates it does not touch are never copied.
With every w_i = R there is one segment and the model is a plain transformer
(no slicing, no concatenation): pre-LN by default, or with one of the depth
stabilisers of ``Block`` (post-LN, DeepNorm, ReZero gates, NormFormer norms).
``accounting.py`` counts exactly the tensors built here.

µP (``spec.mup``, the VWT configs' lm-engine multipliers), where each acts:
  m_emb       the token embedding's output is multiplied by m_emb (12) before layer 1;
  m_residual  every attention and MLP output is multiplied by m_residual (0.22)
              before it is added to the stream: x + m_r·f(norm(x));
  attention   softmax(q·kᵀ / head_dim) instead of / sqrt(head_dim) (``attn_scale``);
  m_width     the logits are divided by m_width (8) after the LM head (so the
              logit lens, which reads through ``readout``, sees the same logits);
  init        hidden matrices (q/k/v/o, MLP in/gate/out, MoE router and experts,
              resize projections) start at std = init_std·sqrt(h/w_i)/sqrt(m_width),
              the output projections further / sqrt(2L); embedding and LM head keep
              std = init_std, as lm-engine does;
  lr          the same hidden matrices train at lr / m_width, everything else at lr
              (``hidden_matrices`` names them; train/optim.py builds the groups).
With mup on and m_width = m_emb = m_residual = 1, attn_scale = inv_sqrt, the
model is exactly the standard one (a test checks it).
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch.nn import functional as F

from depthwidth.core.errors import bad
from depthwidth.model.moe import MoE
from depthwidth.model.spec import ModelSpec


def make_norm(kind: str, width: int) -> nn.Module:
    # layernorm: weight + bias; rmsnorm: weight only.  Both over the active prefix.
    if kind == "layernorm":
        return nn.LayerNorm(width, eps=1e-5)
    return nn.RMSNorm(width, eps=1e-5)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x_j, x_{j+hs/2}) by position-dependent angles.
    x: (B, n_head, T, hs); cos, sin: (T, hs/2)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rope_tables(head_size: int, max_seq_len: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    # Angles in float64, then stored as float32: at long positions float32
    # angle arithmetic loses digits before cos/sin ever see them.
    inv_freq = 1.0 / (base ** (torch.arange(0, head_size, 2, dtype=torch.float64) / head_size))
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), inv_freq)
    return angles.cos().float(), angles.sin().float()


class CausalSelfAttention(nn.Module):
    def __init__(self, width: int, n_head: int, bias: bool, scale: str = "inv_sqrt"):
        super().__init__()
        self.width, self.n_head, self.head_size = width, n_head, width // n_head
        # None: SDPA's own 1/sqrt(head_size), so the standard model's kernel call is unchanged
        self.scale = 1.0 / self.head_size if scale == "inv" else None
        self.c_attn = nn.Linear(width, 3 * width, bias=bias)  # q, k, v fused
        self.c_proj = nn.Linear(width, width, bias=bias)  # writes into the residual stream

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = self.c_attn(x).split(self.width, dim=2)
        q = q.view(B, T, self.n_head, self.head_size).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        if rope is not None:
            cos, sin = (t.to(q.dtype) for t in rope)  # follow autocast's dtype
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        y = y.transpose(1, 2).contiguous().view(B, T, self.width)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int, kind: str, bias: bool, mid_norm: nn.Module | None = None):
        super().__init__()
        self.kind = kind
        self.c_fc = nn.Linear(width, hidden, bias=bias)
        if kind == "swiglu":
            self.c_gate = nn.Linear(width, hidden, bias=bias)
        self.c_proj = nn.Linear(hidden, width, bias=bias)  # writes into the residual stream
        self.mid_norm = mid_norm  # NormFormer: a norm on the hidden units

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "swiglu":
            a = F.silu(self.c_gate(x)) * self.c_fc(x)
        else:
            a = F.gelu(self.c_fc(x))
        if self.mid_norm is not None:
            a = self.mid_norm(a)
        return self.c_proj(a)


class Block(nn.Module):
    """One layer of width w_i; sees only a w_i-wide stream.

    ``spec.stabiliser`` picks the residual wiring (docs/science.md §3, depth stabilisers):
      none        pre-LN: x + f(norm(x))                       (both papers)
      post        post-LN: norm(x + f(x))                      (original Transformer)
      deepnorm    norm(α·x + f(x)), α = (2L)^¼, branch init × β = (8L)^-¼  (DeepNet)
      rezero      x + g·f(norm(x)), a learned scalar g per branch starting at 0
                  (ReZero's gate; the pre-norms are kept)
      normformer  pre-LN plus a norm on the attention output and one on the
                  MLP hidden units (NormFormer, without head scaling)
    """

    def __init__(self, spec: ModelSpec, i: int):
        super().__init__()
        w = self.width = spec.widths[i]
        # resize='proj': the stream arrives at the previous layer's width.
        in_w = spec.input_width(i)
        self.proj_in = nn.Linear(in_w, w, bias=False) if spec.resize == "proj" and in_w != w else None
        st = self.stabiliser = spec.stabiliser
        self.norm_1 = make_norm(spec.norm, w)
        self.attn = CausalSelfAttention(w, spec.heads(i), spec.bias, spec.attention_multiplier)
        self.norm_2 = make_norm(spec.norm, w)
        m = spec.mlp_hidden(i)
        if spec.mlp == "moe":
            self.mlp = MoE(w, m, spec.n_experts, spec.top_k, spec.router_z)
        else:
            self.mlp = MLP(w, m, spec.mlp, spec.bias, make_norm(spec.norm, m) if st == "normformer" else None)
        self.m_res = spec.m_residual if spec.mup else None  # µP: branch outputs x m_residual
        self.attn_out_norm = make_norm(spec.norm, w) if st == "normformer" else None
        self.alpha = (2 * spec.depth) ** 0.25 if st == "deepnorm" else 1.0
        if st == "rezero":
            self.gate_attn = nn.Parameter(torch.zeros(()))
            self.gate_mlp = nn.Parameter(torch.zeros(()))

    def forward(self, x: torch.Tensor, rope) -> torch.Tensor:
        if self.proj_in is not None:
            x = self.proj_in(x)
        st = self.stabiliser
        if st in ("post", "deepnorm"):
            x = self.norm_1(self.alpha * x + self.attn(x, rope))
            return self.norm_2(self.alpha * x + self.mlp(x))
        a = self.attn(self.norm_1(x), rope)
        if st == "rezero":
            x = x + self.gate_attn * a
            return x + self.gate_mlp * self.mlp(self.norm_2(x))
        if self.attn_out_norm is not None:
            a = self.attn_out_norm(a)
        if self.m_res is not None:  # µP (pre-LN only: the spec refuses mup with a stabiliser)
            x = x + self.m_res * a
            return x + self.m_res * self.mlp(self.norm_2(x))
        x = x + a
        return x + self.mlp(self.norm_2(x))


class Stream:
    """The residual stream (carry and zero) kept as segments cut at the width breakpoints.

    A layer of width w_i reads the segments of its prefix (one ``cat`` of w_i
    coordinates; none at all when one segment covers it) and writes its output
    back as views of that output, so the coordinates >= w_i are never read,
    copied or padded: forward and backward cost follows the layer's width, not R.
    Values and gradients are exactly those of one R-wide tensor (only copies
    differ).  ``None`` is a segment of zeros nobody has written yet (beyond h,
    or cleared by ``resize=zero``): made only when a layer reads it.
    """

    def __init__(self, ends: tuple[int, ...], segments: list):
        self.ends, self.segments = ends, segments  # segment j covers [ends[j-1], ends[j])

    @classmethod
    def of(cls, x: torch.Tensor, ends: tuple[int, ...]) -> "Stream":
        """A tensor holding the first x.size(-1) coordinates (views); the rest zero."""
        k = ends.index(x.size(-1)) + 1
        sizes = [e - s for s, e in zip((0,) + ends, ends)]
        head = [x] if k == 1 else list(x.split(sizes[:k], dim=-1))
        return cls(ends, head + [None] * (len(ends) - k))

    def read(self, w: int) -> torch.Tensor:
        """The first w coordinates (w a breakpoint)."""
        k = self.ends.index(w) + 1
        if k == 1 and self.segments[0] is not None:
            return self.segments[0]
        like = next(t for t in self.segments if t is not None)
        parts = [
            t if t is not None else like.new_zeros(*like.shape[:-1], e - s)
            for t, s, e in zip(self.segments[:k], (0,) + self.ends, self.ends)
        ]
        return torch.cat(parts, dim=-1)

    def write(self, y: torch.Tensor) -> None:
        """y replaces the first y.size(-1) coordinates (a breakpoint), as views of y."""
        k = self.ends.index(y.size(-1)) + 1
        self.segments[:k] = Stream.of(y, self.ends).segments[:k]

    def clear_beyond(self, w: int) -> None:
        """Coordinates >= w become zero (``resize=zero``)."""
        k = self.ends.index(w) + 1
        self.segments[k:] = [None] * (len(self.ends) - k)

    def full(self) -> torch.Tensor:
        return self.read(self.ends[-1])


class VariableWidthGPT(nn.Module):
    def __init__(self, spec: ModelSpec, max_seq_len: int):
        super().__init__()
        spec.validate()
        if isinstance(max_seq_len, bool) or not isinstance(max_seq_len, int) or max_seq_len < 1:
            raise bad("max_seq_len", max_seq_len, "an integer >= 1")
        self.spec, self.max_seq_len = spec, max_seq_len
        h, L = spec.embed_width, spec.depth
        # proj keeps the stream exactly as wide as the current layer; carry and
        # zero keep one stream as wide as the widest layer (or h).
        self.stream_width = h if spec.resize == "proj" else spec.residual_width
        # carry / zero: where the stream is cut into segments (every width a layer, the
        # embedding or the final norm reads or writes), see ``Stream``
        self.stream_ends = tuple(sorted({*spec.widths, h, spec.final_norm_width, self.stream_width}))

        self.wte = nn.Embedding(spec.vocab_size, h)
        self.blocks = nn.ModuleList(Block(spec, i) for i in range(L))
        wL = spec.widths[-1]
        self.proj_out = nn.Linear(wL, h, bias=False) if spec.resize == "proj" and wL != h else None
        self.norm_f = make_norm(spec.norm, spec.final_norm_width)
        self.lm_head = nn.Linear(h, spec.vocab_size, bias=False)
        if spec.tied:
            self.lm_head.weight = self.wte.weight

        # RoPE tables, one per distinct head size, shared by the layers that use it.
        self._rope_sizes = sorted({spec.head_size(i) for i in range(L)}) if spec.rope else []
        for hs in self._rope_sizes:
            cos, sin = rope_tables(hs, max_seq_len, spec.rope_base)
            self.register_buffer(f"rope_cos_{hs}", cos, persistent=False)
            self.register_buffer(f"rope_sin_{hs}", sin, persistent=False)

        self.moe_layers = [b.mlp for b in self.blocks if isinstance(b.mlp, MoE)]  # a plain list: no re-registration
        self._init_weights()

    # ---- init --------------------------------------------------------------
    def layer_std(self, width: float) -> float:
        """std_i = init_std · sqrt(h / w_i) with width-scaled init, else init_std."""
        s = self.spec
        return s.init_std * (math.sqrt(s.embed_width / width) if s.width_scaled_init else 1.0)

    def hidden_matrices(self) -> list[nn.Parameter]:
        """The weights µP treats as hidden (init / sqrt(m_width), lr / m_width): every matrix
        inside a block (the MoE router too, as lm-engine marks it) or resizing the stream."""
        out = []
        for b in self.blocks:
            mats = [b.attn.c_attn.weight, b.attn.c_proj.weight]
            if isinstance(b.mlp, MoE):
                mats += [b.mlp.router.weight, b.mlp.w_fc, b.mlp.w_gate, b.mlp.w_proj]
            else:
                mats += [lin.weight for lin in (b.mlp.c_fc, getattr(b.mlp, "c_gate", None), b.mlp.c_proj) if lin]
            out += mats + ([b.proj_in.weight] if b.proj_in is not None else [])
        return out + ([self.proj_out.weight] if self.proj_out is not None else [])

    def _init_weights(self) -> None:
        s = self.spec
        # Output projections add into the residual stream once per sub-layer,
        # 2L times in all: shrink them so the stream's variance does not grow with L.
        # DeepNet instead scales every branch weight by β = (8L)^-¼ (its own recipe).
        out_scale = 1.0 / math.sqrt(2 * s.depth)
        if s.stabiliser == "deepnorm":
            beta = (8 * s.depth) ** -0.25
            out_scale = beta
        mu = 1.0 / math.sqrt(s.m_width) if s.mup else 1.0  # µP: hidden matrices / sqrt(m_width)
        nn.init.normal_(self.wte.weight, mean=0.0, std=s.init_std)
        if not s.tied:
            nn.init.normal_(self.lm_head.weight, mean=0.0, std=self.layer_std(s.embed_width))
        for block in self.blocks:
            std = self.layer_std(block.width)
            if isinstance(block.mlp, MoE):
                moe = block.mlp
                nn.init.normal_(moe.router.weight, mean=0.0, std=std * mu)
                nn.init.normal_(moe.w_fc, mean=0.0, std=std * mu)
                nn.init.normal_(moe.w_gate, mean=0.0, std=std * mu)
                nn.init.normal_(moe.w_proj, mean=0.0, std=std * mu * out_scale)
                ins, outs = (block.attn.c_attn,), (block.attn.c_proj,)
            else:
                ins = (block.attn.c_attn, block.mlp.c_fc, getattr(block.mlp, "c_gate", None))
                outs = (block.attn.c_proj, block.mlp.c_proj)
            for lin in ins:
                if lin is not None:
                    nn.init.normal_(lin.weight, mean=0.0, std=std * mu)
            for lin in outs:
                nn.init.normal_(lin.weight, mean=0.0, std=std * mu * out_scale)
            if s.stabiliser == "deepnorm":  # β also on the value and MLP-input weights
                with torch.no_grad():
                    block.attn.c_attn.weight[2 * block.width :].mul_(out_scale)
                    for w in (
                        [block.mlp.w_fc, block.mlp.w_gate]
                        if isinstance(block.mlp, MoE)
                        else [lin.weight for lin in (block.mlp.c_fc, getattr(block.mlp, "c_gate", None)) if lin]
                    ):
                        w.mul_(out_scale)
            if block.proj_in is not None:  # scaled like a layer reading its input width
                nn.init.normal_(block.proj_in.weight, mean=0.0, std=self.layer_std(block.proj_in.in_features) * mu)
        if self.proj_out is not None:
            nn.init.normal_(self.proj_out.weight, mean=0.0, std=self.layer_std(self.proj_out.in_features) * mu)
        for m in self.modules():
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        # Norm weights start at 1 (and layernorm biases at 0): the torch defaults.

    # ---- forward -----------------------------------------------------------
    def _layer(self, i: int, block: Block, x: "Stream | torch.Tensor", rope) -> "Stream | torch.Tensor":
        """Apply layer i: to the stream's first w_i coordinates (carry, zero), or to the
        whole, exactly w_i-wide stream (proj)."""
        if isinstance(x, torch.Tensor):  # proj: the layer owns the whole stream
            return block(x, rope)
        if self.spec.resize == "zero":  # the stream is the previous layer's width, zero beyond
            x.clear_beyond(self.spec.input_width(i))
        x.write(block(x.read(block.width), rope))
        return x

    def readout(self, x: "Stream | torch.Tensor") -> torch.Tensor:
        """Logits from the stream after the last layer: resize back to the head's
        layout, final norm over spec.final_norm_width coordinates, truncate to h,
        LM head.  (For carry, any layer's stream can be read this way: logit lens.)"""
        s = self.spec
        wL, F_w, h = s.widths[-1], s.final_norm_width, s.embed_width
        if self.proj_out is not None:
            x = self.proj_out(x)
        elif s.resize != "proj":
            if isinstance(x, torch.Tensor):  # a whole stream (e.g. a hidden state for the logit lens)
                x = Stream.of(x, self.stream_ends)
            if s.resize == "zero":
                x.clear_beyond(wL)
            x = x.read(F_w)
        x = self.norm_f(x[..., :F_w] if x.size(-1) > F_w else x)
        if x.size(-1) > h:
            x = x[..., :h]
        logits = self.lm_head(x)
        return logits / s.m_width if s.mup else logits

    def embed(self, idx: torch.Tensor) -> torch.Tensor:
        """The stream entering layer 1: token embeddings (h wide; × m_emb under µP), zero beyond h."""
        x = self.wte(idx)  # (B, T, h)
        if self.spec.mup:
            x = x * self.spec.m_emb
        if self.stream_width > x.size(-1):  # coordinates beyond h start at zero
            x = F.pad(x, (0, self.stream_width - x.size(-1)))
        return x

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, return_hidden: bool = False):
        """idx, targets: (B, T) token ids (targets -1 = ignored).  Returns
        (logits (B, T, V), mean cross-entropy or None), plus with return_hidden
        the list of residual streams after each layer (R wide; w_i wide for proj)."""
        B, T = idx.shape
        if T > self.max_seq_len:
            raise bad("sequence length", T, f"at most max_seq_len={self.max_seq_len}")
        x = self.wte(idx)  # (B, T, h); embed() gives the same, padded to R
        if self.spec.mup:
            x = x * self.spec.m_emb
        if self.spec.resize != "proj":
            x = Stream.of(x, self.stream_ends)  # zero beyond h, without writing the zeros
        ropes = {
            hs: (getattr(self, f"rope_cos_{hs}")[:T], getattr(self, f"rope_sin_{hs}")[:T]) for hs in self._rope_sizes
        }
        hidden = []
        for i, block in enumerate(self.blocks):
            x = self._layer(i, block, x, ropes.get(block.attn.head_size))
            if return_hidden:
                hidden.append(x if isinstance(x, torch.Tensor) else x.full())
        logits = self.readout(x)
        loss = None
        if targets is not None:
            # in fp32 whatever the logits' dtype (bf16 under FSDP's mixed precision): a bf16 loss
            # near 3 nats could only take steps of 2^-6
            flat = logits.view(-1, logits.size(-1))
            flat = flat.float() if flat.dtype in (torch.float16, torch.bfloat16) else flat  # fp64 stays fp64
            loss = F.cross_entropy(flat, targets.reshape(-1), ignore_index=-1)
            if self.moe_layers and self.training and self.spec.aux_loss_coef > 0:
                # the training objective adds the experts' load balance; held-out loss stays the CE
                loss = loss + self.spec.aux_loss_coef * sum(m.aux for m in self.moe_layers)
        return (logits, loss, hidden) if return_hidden else (logits, loss)

    # ---- introspection -----------------------------------------------------
    def layer_params(self) -> list[dict[str, list[nn.Parameter]]]:
        """Per layer (index 0 = bottom): its parameters, and those of attn and mlp."""
        return [
            {"block": list(b.parameters()), "attn": list(b.attn.parameters()), "mlp": list(b.mlp.parameters())}
            for b in self.blocks
        ]

    def num_params(self) -> int:
        """Every parameter once (a tied head is not counted twice)."""
        return sum(p.numel() for p in self.parameters())
