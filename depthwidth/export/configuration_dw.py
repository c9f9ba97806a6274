"""The configuration of a dw model exported by ``dw export`` (Hugging Face custom code).

This file is copied, as it is, into every exported folder whose model has no exact stock
``transformers`` class, beside ``modeling_dw.py``; ``config.json``'s ``auto_map`` points
``AutoConfig`` here.  It imports nothing from dw: the folder must load on a machine
without it (``trust_remote_code=True``).

Every per-layer quantity is stored resolved (``widths``, ``heads``, ``intermediate_sizes``),
so the loader never repeats dw's rounding rules.
"""

from __future__ import annotations

from transformers import PretrainedConfig


class DwConfig(PretrainedConfig):
    model_type = "dw"
    keys_to_ignore_at_inference = ["past_key_values"]

    vocab_size: int = 256
    hidden_size: int = 64  # h: the embedding and LM-head width
    widths: list | None = None  # w_i, one per layer
    heads: list | None = None  # attention heads of each layer (head size w_i / heads_i)
    intermediate_sizes: list | None = None  # MLP hidden width of each layer (each expert's, for moe)
    num_hidden_layers: int = 1
    norm: str = "layernorm"  # layernorm | rmsnorm
    norm_eps: float = 1e-5
    mlp: str = "gelu"  # gelu | swiglu | moe
    bias: bool = False  # biases in every Linear of the blocks
    rope: bool = True
    rope_theta: float = 10000.0
    resize: str = "carry"  # carry | zero | proj: how the stream meets a layer of another width
    stabiliser: str = "none"  # none (pre-LN) | post | deepnorm | rezero | normformer
    embedding_multiplier: float = 1.0  # µP m_emb (1: off)
    residual_multiplier: float | None = None  # µP m_residual on every branch output (None: off)
    logits_scaling: float = 1.0  # µP m_width: logits / logits_scaling
    attention_scale: str = "inv_sqrt"  # inv_sqrt: q.k / sqrt(head size) | inv: q.k / head size
    num_experts: int = 0  # mlp=moe: experts per layer
    num_experts_per_tok: int = 0  # mlp=moe: top-k
    max_position_embeddings: int = 2048  # the context the model was trained at (RoPE runs past it)
    initializer_range: float = 0.02
    use_cache: bool = True
    tie_word_embeddings: bool = False


__all__ = ["DwConfig"]
