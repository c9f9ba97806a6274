"""``ModelSpec``: everything that fixes a model's tensors, as plain data.

The model (``gpt.py``) is built from a ModelSpec and the accounting
(``accounting.py``) counts from the same ModelSpec, so the two can never
disagree about what a configuration means.  No torch here.

Symbols follow the papers: ``widths[i]`` is w_{i+1} (the width of layer i+1),
``embed_width`` is h (the width of the token embedding and of the LM head's
input), ``depth`` is L (``n_layer``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from itertools import groupby
from typing import Any, Sequence

from depthwidth.config.schema import Model, choices, defaults
from depthwidth.core.errors import BadInput, bad

# The choices and defaults of the config's ``model`` group (config/schema.py), the one place they live.
NORMS = choices(Model, "norm")
MLPS = choices(Model, "mlp")  # moe: a mixture of SwiGLU experts per layer (model/moe.py)
ATTN_SCALES = choices(Model, "attn_scale")  # softmax scale 1/sqrt(head_dim) | 1/head_dim; auto: inv with µP
RESIZES = choices(Model, "resize")
# Depth stabilisers (docs/science.md §3: never tried by the Depth-Delusion paper).
STABILISERS = choices(Model, "stabiliser")
_D = defaults(Model)


@dataclass(frozen=True)
class ModelSpec:
    widths: tuple[int, ...]  # per-layer width w_i
    vocab_size: int  # V
    embed_width: int  # h: token embedding and LM-head input width
    norm: str = _D["norm"]  # layernorm (weight+bias) | rmsnorm (weight), on the active prefix
    mlp: str = _D["mlp"]  # gelu: 2 matrices w->m->w ; swiglu: 3 matrices
    mlp_ratio: float = _D["mlp_ratio"]  # MLP hidden width m_i = int(mlp_ratio * w_i)
    n_head: int | None = _D["heads"]  # fixed head count per layer (VWT) ...
    head_dim: int | None = _D["head_dim"]  # ... or fixed head dimension (exactly one is set)
    rope: bool = _D["rope"]
    rope_base: float = _D["rope_base"]
    tied: bool = _D["tied"]  # LM head shares the embedding matrix
    resize: str = _D["resize"]  # carry-forward | zero-padding | learned projection
    stabiliser: str = _D["stabiliser"]  # none (pre-LN) | post (post-LN) | deepnorm | rezero | normformer
    bias: bool = _D["bias"]  # biases in Linear layers
    init_std: float = _D["init_std"]
    width_scaled_init: bool = _D["width_scaled_init"]  # layer i init std *= sqrt(h / w_i)
    # µP as the VWT configs set it (lm-engine's m_width, m_emb, m_residual; gpt.py says where each acts)
    mup: bool = _D["mup"]
    m_width: float = _D["m_width"]  # logits / m_width; hidden-matrix init std / sqrt(m_width) and lr / m_width
    m_emb: float = _D["m_emb"]  # token embedding output x m_emb
    m_residual: float = _D["m_residual"]  # every attention / MLP output x m_residual before it joins the stream
    attn_scale: str = _D["attn_scale"]  # inv_sqrt: q.k / sqrt(head_dim) | inv: q.k / head_dim | auto: inv iff mup
    # mixture of experts (mlp = "moe"): SwiGLU experts, softmax router, top-k, no shared expert
    n_experts: int = _D["n_experts"]
    top_k: int = _D["top_k"]
    expert_hidden: int = _D[
        "expert_hidden"
    ]  # an expert's hidden width at width h; layer i: round(w_i * expert_hidden / h)
    aux_loss_coef: float = _D[
        "aux_loss_coef"
    ]  # coefficient of the per-layer auxiliary loss (load balance + router_z · z-loss)
    router_z: float = _D["router_z"]  # weight of the router z-loss inside it (lm-engine's built-in 0.1)
    extra: dict = field(default_factory=dict, compare=False)  # free-form labels

    # ---- derived -----------------------------------------------------------
    @property
    def depth(self) -> int:
        return len(self.widths)

    @property
    def residual_width(self) -> int:
        """Width of the residual stream: as wide as the widest layer (or h)."""
        return max(max(self.widths), self.embed_width)

    @property
    def final_norm_width(self) -> int:
        """The final norm covers the last layer's width, and at least h so the
        head never reads un-normalised coordinates; it is then truncated to h."""
        if self.resize == "proj":
            return self.embed_width
        return max(self.widths[-1], self.embed_width)

    def heads(self, i: int) -> int:
        w = self.widths[i]
        return self.n_head if self.n_head is not None else w // self.head_dim

    def head_size(self, i: int) -> int:
        w = self.widths[i]
        return self.head_dim if self.n_head is None else w // self.n_head

    def mlp_hidden(self, i: int) -> int:
        """MLP hidden width m_i; for moe the hidden width of each expert of layer i."""
        if self.mlp == "moe":
            return max(1, round(self.widths[i] * self.expert_hidden / self.embed_width))
        return int(self.mlp_ratio * self.widths[i])

    @property
    def attention_multiplier(self) -> str:
        """The softmax scale rule actually used: inv (1/head_dim) or inv_sqrt (1/sqrt(head_dim))."""
        if self.attn_scale == "auto":
            return "inv" if self.mup else "inv_sqrt"
        return self.attn_scale

    def __hash__(self) -> int:
        """The dataclass's own hash (of every compared field), once per spec: ``widths`` holds up to
        10,000 layers, and the accounting's and memory plan's caches hash a spec a dozen times a run
        of a dry run.  Left out of a pickle or copy (a string's hash differs between processes)."""
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in _COMPARED))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    def layer_classes(self) -> tuple[tuple[int, int], ...]:
        """``layer_classes(widths)``, once per spec (a dry run reads every per-layer figure through it)."""
        c = self.__dict__.get("_classes")
        if c is None:
            c = layer_classes(self.widths)
            object.__setattr__(self, "_classes", c)
        return c

    def input_width(self, i: int) -> int:
        """Width of the stream entering layer i (for resize='proj')."""
        return self.embed_width if i == 0 else self.widths[i - 1]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["widths"] = list(self.widths)
        d.pop("extra", None)
        return d

    # ---- validation --------------------------------------------------------
    def validate(self) -> "ModelSpec":
        """Self, once every field is valid (BadInput else); a spec is immutable, so a valid one is
        checked once (the accounting asks again at every figure: seven times a run in a dry run)."""
        if self.__dict__.get("_valid"):
            return self
        self._check()
        object.__setattr__(self, "_valid", True)
        return self

    def _check(self) -> None:
        if len(self.widths) < 1:
            raise bad("model.depth", len(self.widths), "an integer >= 1")
        classes = self.layer_classes()  # a layer's checks read its width only: one layer of each class
        for i, _ in classes:
            w = self.widths[i]
            if not isinstance(w, int) or w < 1:
                raise bad(f"width of layer {i + 1}", w, "a positive integer (did rounding make it 0?)")
        if self.vocab_size < 1:
            raise bad("model.vocab_size", self.vocab_size, "an integer >= 1")
        if self.embed_width < 1:
            raise bad("model.embed_width", self.embed_width, "an integer >= 1")
        if self.norm not in NORMS:
            raise bad("model.norm", self.norm, "|".join(NORMS))
        if self.mlp not in MLPS:
            raise bad("model.mlp", self.mlp, "|".join(MLPS))
        if self.resize not in RESIZES:
            raise bad("model.resize", self.resize, "|".join(RESIZES))
        if self.stabiliser not in STABILISERS:
            raise bad("model.stabiliser", self.stabiliser, "|".join(STABILISERS))
        if not self.mlp_ratio > 0:
            raise bad("model.mlp_ratio", self.mlp_ratio, "a number > 0")
        if self.attn_scale not in ATTN_SCALES:
            raise bad("model.attn_scale", self.attn_scale, "|".join(ATTN_SCALES))
        if self.mup:
            for k in ("m_width", "m_emb", "m_residual"):
                if not (isinstance(getattr(self, k), (int, float)) and getattr(self, k) > 0):
                    raise bad(f"model.{k}", getattr(self, k), "a number > 0 (a µP multiplier)")
            if self.stabiliser != "none":
                raise bad("model.stabiliser", self.stabiliser, "none with model.mup=true (µP is defined for pre-LN)")
        if self.mlp == "moe":
            if isinstance(self.n_experts, bool) or not isinstance(self.n_experts, int) or self.n_experts < 1:
                raise bad("model.n_experts", self.n_experts, "an integer >= 1")
            if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or not 1 <= self.top_k <= self.n_experts:
                raise bad("model.top_k", self.top_k, f"an integer from 1 to model.n_experts={self.n_experts}")
            if (
                isinstance(self.expert_hidden, bool)
                or not isinstance(self.expert_hidden, int)
                or self.expert_hidden < 1
            ):
                raise bad("model.expert_hidden", self.expert_hidden, "an integer >= 1")
            for k in ("aux_loss_coef", "router_z"):
                if isinstance(getattr(self, k), bool) or not (
                    isinstance(getattr(self, k), (int, float)) and getattr(self, k) >= 0
                ):
                    raise bad(f"model.{k}", getattr(self, k), "a number >= 0")
            if self.stabiliser == "normformer":
                raise bad("model.stabiliser", self.stabiliser, "none|post|deepnorm|rezero with model.mlp=moe")
        if (self.n_head is None) == (self.head_dim is None):
            raise BadInput("set exactly one of model.heads (fixed head count) and model.head_dim (fixed head size)")
        for i, _ in classes:
            w = self.widths[i]
            if self.n_head is not None:
                if self.n_head < 1 or w % self.n_head:
                    raise bad(f"width of layer {i + 1}", w, f"a multiple of the head count {self.n_head}")
            else:
                if self.head_dim < 1 or w % self.head_dim:
                    raise bad(f"width of layer {i + 1}", w, f"a multiple of the head dimension {self.head_dim}")
            if self.rope and self.head_size(i) % 2:
                raise bad(f"head size of layer {i + 1}", self.head_size(i), "an even number (RoPE rotates pairs)")


_COMPARED = tuple(f for f in fields(ModelSpec) if f.compare)  # what the dataclass's __eq__ and hash read


def layer_classes(widths: Sequence) -> tuple[tuple[int, int], ...]:
    """((i, n), ...) in layer order: layer i stands for itself and the n - 1 layers after it, every one
    of the same width (and type) entered from a layer of that width.  What a layer holds, computes and
    saves depends only on its width and the width entering it, so a per-layer figure is Σ n · figure(i)
    over the classes: a run of equal widths is two classes (its first layer, entered from the width
    before it, and the rest), and a uniform model of any depth is two (a 400-layer model is read as 2)."""
    one_type = len(set(map(type, widths))) <= 1  # else 512 and 512.0 are told apart
    out: list = []
    i = 0
    for _, g in groupby(widths if one_type else zip(widths, map(type, widths))):
        n = len(list(g))
        out.append((i, 1))
        if n > 1:
            out.append((i + 1, n - 1))
        i += n
    return tuple(out)
