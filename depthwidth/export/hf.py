"""``dw export``'s library: a run's checkpoint -> a Hugging Face folder.

    doc = export_run("runs/demo/3f2a...", "hf/demo", checkpoint="final", dtype="fp32")

The folder holds ``config.json``, ``model.safetensors``, ``generation_config.json``, the
tokenizer files (export/tokenizer.py) and a model card ``README.md`` (export/card.py).
A model that one stock ``transformers`` class computes exactly is written for that class,
so it loads without custom code (``target``):

    RMSNorm + SwiGLU, no µP multipliers, 1/sqrt(head_dim)     LlamaForCausalLM
    RMSNorm + SwiGLU with µP (or a 1/head_dim softmax scale)  GraniteForCausalLM
    LayerNorm + GELU, no µP, 1/sqrt(head_dim)                 GPTNeoXForCausalLM (sequential residual)

each only for a uniform model (every w_i = h; the resize mode then never acts), pre-LN,
dense, with RoPE.  Every other model (variable widths, depth stabilisers, MoE, no RoPE,
the other norm/MLP pairs, µP under LayerNorm) is written with dw's own inference code,
``modeling_dw.py`` + ``configuration_dw.py`` copied into the folder and named by
``auto_map``: it loads with ``trust_remote_code=True``.  Nothing is refused.

Why these match exactly: dw rotates the two halves of each head (``x.chunk(2)``), as
transformers' ``rotate_half`` does; its norms use eps 1e-5 (set in the configs); its fused
q/k/v matrix is split (Llama, Granite) or regrouped per head (GPT-NeoX's layout); a bias
dw leaves out of GPT-NeoX's MLP (which always has one) is written as zeros.

The model is loaded as ``dw analyze`` loads it (``train.analysis.load_model``, fp32 on
the CPU), the folder written into a hidden temporary folder beside OUT and renamed into
place at the end: a failure leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from depthwidth import __version__
from depthwidth.core import provenance
from depthwidth.core.atomic import check_creatable, make_temp_dir, write_json, write_text
from depthwidth.core.errors import BadInput, bad
from depthwidth.export import card
from depthwidth.export import tokenizer as hf_tokenizer
from depthwidth.model.spec import ModelSpec

DTYPES = ("fp32", "bf16")
REMOTE_FILES = ("configuration_dw.py", "modeling_dw.py")  # shipped beside this module, copied as they are
NORM_EPS = 1e-5  # model/gpt.py's make_norm


@dataclass(frozen=True)
class Target:
    arch: str  # the transformers class: LlamaForCausalLM | GraniteForCausalLM | GPTNeoXForCausalLM | DwForCausalLM
    why: str  # why this class; for DwForCausalLM, what no stock class computes

    @property
    def stock(self) -> bool:
        return self.arch != "DwForCausalLM"


def _multipliers(spec: ModelSpec) -> dict:
    """The µP multipliers as they act (1 where µP is off) and the softmax scale's rule."""
    on = spec.mup
    return {
        "embedding": float(spec.m_emb) if on else 1.0,
        "residual": float(spec.m_residual) if on else 1.0,
        "logits": float(spec.m_width) if on else 1.0,
        "attention": spec.attention_multiplier,  # inv | inv_sqrt
    }


def target(spec: ModelSpec) -> Target:
    """The class that computes this model exactly: a stock one where it exists, else dw's own."""
    missing = []
    if set(spec.widths) != {spec.embed_width}:
        missing.append(f"widths {_span(spec.widths)} differ from h={spec.embed_width} (resize={spec.resize})")
    if spec.stabiliser != "none":
        missing.append(f"stabiliser={spec.stabiliser}")
    if spec.mlp == "moe":
        missing.append("mlp=moe")
    if not spec.rope:
        missing.append("rope=false (no position encoding)")
    m = _multipliers(spec)
    plain = m["embedding"] == m["residual"] == m["logits"] == 1.0
    if not missing and spec.norm == "rmsnorm" and spec.mlp == "swiglu":
        if plain and m["attention"] == "inv_sqrt":
            return Target("LlamaForCausalLM", "uniform pre-LN, RMSNorm + SwiGLU, RoPE, no µP")
        return Target(
            "GraniteForCausalLM",
            "uniform pre-LN, RMSNorm + SwiGLU, RoPE; Granite's embedding_multiplier, residual_multiplier, "
            "logits_scaling and attention_multiplier carry µP",
        )
    if not missing and spec.norm == "layernorm" and spec.mlp == "gelu":
        if plain and m["attention"] == "inv_sqrt":
            return Target("GPTNeoXForCausalLM", "uniform pre-LN, LayerNorm + GELU, RoPE, sequential residual")
        missing.append("µP multipliers or a 1/head_dim softmax scale with LayerNorm + GELU (GPT-NeoX has neither)")
    elif not missing:
        missing.append(f"norm={spec.norm} with mlp={spec.mlp} (no stock class pairs them)")
    return Target("DwForCausalLM", "; ".join(missing))


def _span(widths) -> str:
    return f"{min(widths)}..{max(widths)}" if len(set(widths)) > 1 else str(widths[0])


# ---------------------------------------------------------------------------- config.json


def hf_config(spec: ModelSpec, t: Target, seq_len: int, tok: hf_tokenizer.HFTokenizer, dtype: str) -> dict:
    """config.json's body (without the ``dw`` block) for the target class."""
    eos = tok.eos_id
    common = {
        "vocab_size": spec.vocab_size,
        "num_hidden_layers": spec.depth,
        "max_position_embeddings": seq_len,
        "tie_word_embeddings": spec.tied,
        "initializer_range": spec.init_std,
        "bos_token_id": None,
        "eos_token_id": eos,
        "pad_token_id": None,
    }
    if not t.stock:
        d = {
            "architectures": [t.arch],
            "model_type": "dw",
            "auto_map": {
                "AutoConfig": "configuration_dw.DwConfig",
                "AutoModelForCausalLM": "modeling_dw.DwForCausalLM",
            },
            **_dw_fields(spec),
            **common,
        }
        import transformers

        return {**d, "dtype": _torch_name(dtype), "transformers_version": transformers.__version__}
    w, heads = spec.embed_width, spec.heads(0)
    hs = spec.head_size(0)
    rope = {"rope_type": "default", "rope_theta": float(spec.rope_base)}
    kw = dict(
        common,
        hidden_size=w,
        num_attention_heads=heads,
        intermediate_size=spec.mlp_hidden(0),
        rope_parameters=rope,
    )
    if t.arch == "GPTNeoXForCausalLM":
        from transformers import GPTNeoXConfig

        kw["rope_parameters"] = {**rope, "partial_rotary_factor": 1.0}  # every head coordinate rotates (default 1/4)
        cfg = GPTNeoXConfig(
            **kw,
            hidden_act="gelu",  # exact (erf) GELU, as torch's F.gelu
            layer_norm_eps=NORM_EPS,
            use_parallel_residual=False,  # x + attn(ln(x)), then + mlp(ln(·)): dw's sequential pre-LN
            attention_bias=spec.bias,
            hidden_dropout=0.0,
            attention_dropout=0.0,
        )
    else:
        from transformers import GraniteConfig, LlamaConfig

        kw.update(
            num_key_value_heads=heads,
            hidden_act="silu",
            rms_norm_eps=NORM_EPS,
            attention_bias=spec.bias,
            mlp_bias=spec.bias,
        )
        if t.arch == "LlamaForCausalLM":
            cfg = LlamaConfig(**kw, head_dim=hs)
        else:
            m = _multipliers(spec)
            cfg = GraniteConfig(
                **kw,
                embedding_multiplier=m["embedding"],
                residual_multiplier=m["residual"],
                logits_scaling=m["logits"],
                attention_multiplier=1.0 / hs if m["attention"] == "inv" else hs**-0.5,
            )
    cfg.architectures = [t.arch]
    d = cfg.to_dict()
    d["dtype"] = _torch_name(dtype)
    return d


def _dw_fields(spec: ModelSpec) -> dict:
    """DwConfig's fields (export/configuration_dw.py): every per-layer quantity resolved."""
    m = _multipliers(spec)
    L = spec.depth
    return {
        "hidden_size": spec.embed_width,
        "widths": list(spec.widths),
        "heads": [spec.heads(i) for i in range(L)],
        "intermediate_sizes": [spec.mlp_hidden(i) for i in range(L)],
        "norm": spec.norm,
        "norm_eps": NORM_EPS,
        "mlp": spec.mlp,
        "bias": spec.bias,
        "rope": spec.rope,
        "rope_theta": float(spec.rope_base),
        "resize": spec.resize,
        "stabiliser": spec.stabiliser,
        "embedding_multiplier": m["embedding"],
        "residual_multiplier": m["residual"] if spec.mup else None,
        "logits_scaling": m["logits"],
        "attention_scale": m["attention"],
        "num_experts": spec.n_experts if spec.mlp == "moe" else 0,
        "num_experts_per_tok": spec.top_k if spec.mlp == "moe" else 0,
        "use_cache": True,
    }


def _torch_name(dtype: str) -> str:
    return {"fp32": "float32", "bf16": "bfloat16"}[dtype]


# ---------------------------------------------------------------------------- weights


def hf_state_dict(model, t: Target) -> dict:
    """The model's tensors under the target class's names (dw's own names for DwForCausalLM).
    A tied LM head is left out: transformers ties it to the embedding on load."""
    sd = model.state_dict()
    spec = model.spec
    if not t.stock:
        out = dict(sd)
    elif t.arch == "GPTNeoXForCausalLM":
        out = _neox(sd, spec)
    else:
        out = _llama(sd, spec)
    if spec.tied:
        out.pop("lm_head.weight", None)
    return out


def _llama(sd: dict, spec: ModelSpec) -> dict:
    """Llama and Granite share their names: model.layers.i.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj}."""
    w = spec.embed_width
    out = {"model.embed_tokens.weight": sd["wte.weight"], "model.norm.weight": sd["norm_f.weight"]}
    out["lm_head.weight"] = sd["lm_head.weight"]
    for i in range(spec.depth):
        b, p = f"blocks.{i}.", f"model.layers.{i}."
        out[p + "input_layernorm.weight"] = sd[b + "norm_1.weight"]
        out[p + "post_attention_layernorm.weight"] = sd[b + "norm_2.weight"]
        names = {"c_fc": "up_proj", "c_gate": "gate_proj", "c_proj": "down_proj"}
        for kind in ("weight", "bias") if spec.bias else ("weight",):
            # dw fuses q, k, v in that order; own copies, as safetensors stores no views of one tensor
            q, k, v = (t.clone() for t in sd[b + f"attn.c_attn.{kind}"].split(w, dim=0))
            out[p + f"self_attn.q_proj.{kind}"], out[p + f"self_attn.k_proj.{kind}"] = q, k
            out[p + f"self_attn.v_proj.{kind}"] = v
            out[p + f"self_attn.o_proj.{kind}"] = sd[b + f"attn.c_proj.{kind}"]
            for ours, theirs in names.items():
                out[p + f"mlp.{theirs}.{kind}"] = sd[b + f"mlp.{ours}.{kind}"]
    return out


def _neox(sd: dict, spec: ModelSpec) -> dict:
    """GPT-NeoX: query_key_value groups each head's q, k, v together (dw: all q, then all k, all v)."""
    import torch

    w, nh, hs = spec.embed_width, spec.heads(0), spec.head_size(0)
    out = {"gpt_neox.embed_in.weight": sd["wte.weight"], "lm_head.weight": sd["lm_head.weight"]}
    out["gpt_neox.final_layer_norm.weight"] = sd["norm_f.weight"]
    out["gpt_neox.final_layer_norm.bias"] = sd["norm_f.bias"]
    for i in range(spec.depth):
        b, p = f"blocks.{i}.", f"gpt_neox.layers.{i}."
        for ours, theirs in (("norm_1", "input_layernorm"), ("norm_2", "post_attention_layernorm")):
            for kind in ("weight", "bias"):
                out[p + f"{theirs}.{kind}"] = sd[b + f"{ours}.{kind}"]
        qkv = sd[b + "attn.c_attn.weight"]
        out[p + "attention.query_key_value.weight"] = qkv.view(3, nh, hs, w).transpose(0, 1).reshape(3 * w, w)
        out[p + "attention.dense.weight"] = sd[b + "attn.c_proj.weight"]
        out[p + "mlp.dense_h_to_4h.weight"] = sd[b + "mlp.c_fc.weight"]
        out[p + "mlp.dense_4h_to_h.weight"] = sd[b + "mlp.c_proj.weight"]
        if spec.bias:
            qkv_bias = sd[b + "attn.c_attn.bias"]
            out[p + "attention.query_key_value.bias"] = qkv_bias.view(3, nh, hs).transpose(0, 1).reshape(3 * w)
            out[p + "attention.dense.bias"] = sd[b + "attn.c_proj.bias"]
        # GPT-NeoX's MLP always has biases: without dw's, zeros compute the same
        for ours, theirs, n in (("c_fc", "dense_h_to_4h", spec.mlp_hidden(0)), ("c_proj", "dense_4h_to_h", w)):
            out[p + f"mlp.{theirs}.bias"] = sd[b + f"mlp.{ours}.bias"] if spec.bias else torch.zeros(n)
    return out


def save_weights(sd: dict, path: Path, dtype: str, metadata: dict) -> None:
    import torch
    from safetensors.torch import save_file

    want = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    tensors = {k: v.detach().to(dtype=want).contiguous() for k, v in sd.items()}  # a copy only to change dtype
    save_file(tensors, str(path), metadata={"format": "pt", **metadata})


# ---------------------------------------------------------------------------- the folder


def check_out(out: Path, run_dir: Path, force: bool) -> None:
    """OUT must be new or empty (or --force), never the run directory or a folder holding it."""
    if out.exists() and not out.is_dir():
        raise bad("OUT", str(out), "a folder to create (this is a file)")
    r, o = run_dir.resolve(), out.resolve()
    if o == r or o in r.parents:
        raise bad("OUT", str(out), "a folder outside the run directory (it would be replaced)")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise bad("OUT", str(out), "a new or empty folder, or --force to replace it")
    check_creatable("OUT", out)  # /proc/nope: refused before the checkpoint is read


def export_run(run_dir, out, checkpoint: str | int = "final", dtype: str = "fp32", *, force: bool = False) -> dict:
    """Write the run's checkpoint ``checkpoint`` (final: the newest valid one) into the folder
    ``out`` in ``dtype``; returns what was written (the ``dw`` block of config.json, plus
    ``out``, ``files`` and ``warnings``)."""
    from depthwidth.train.analysis import load_model

    if dtype not in DTYPES:
        raise bad("--dtype", dtype, "|".join(DTYPES))
    run_dir, out = Path(run_dir), Path(out)
    if not (run_dir / "config.yaml").is_file():
        raise bad("RUN_DIR", str(run_dir), "a run directory holding config.yaml")
    check_out(out, run_dir, force)
    missing = [m for m in ("transformers", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        raise BadInput(f"dw export needs {' and '.join(missing)}: pip install 'depthwidth[hf]'")
    model, cfg, step = load_model(run_dir, checkpoint, "cpu")
    spec, seq_len = model.spec, int(cfg.train.seq_len)
    t = target(spec)
    tok = hf_tokenizer.for_run(cfg.data, seq_len)
    git = provenance.git_state()
    dw = {
        "version": __version__,
        "git": {"commit": git["commit"], "dirty": git["dirty"]},
        "run_id": cfg.get("run_id"),
        "run_dir": str(run_dir.resolve()),
        "checkpoint_step": step,
        "dtype": dtype,
        "class": t.arch,
        "stock_class": t.stock,
        "why": t.why,
        "spec": spec.to_dict(),
        "tokenizer": tok.describe(),
        "trained_with": _trained_with(cfg),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    config = {**hf_config(spec, t, seq_len, tok, dtype), "dw": dw}

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = make_temp_dir(out.parent, f".{out.name}.export-")
    try:
        write_json(tmp / "config.json", config)
        meta = {"dw_run_id": str(dw["run_id"]), "dw_checkpoint_step": str(step), "dw_version": __version__}
        save_weights(hf_state_dict(model, t), tmp / "model.safetensors", dtype, meta)
        if not t.stock:
            here = Path(__file__).resolve().parent
            for name in REMOTE_FILES:
                write_text(tmp / name, (here / name).read_text())
        _generation_config(tok).save_pretrained(str(tmp))
        hf_tokenizer.write(tok, tmp, seq_len)
        write_text(tmp / "README.md", card.render(run_dir, cfg, dw, config))
        _into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    files = sorted(p.name for p in out.iterdir())
    return {**dw, "out": str(out), "files": files, "warnings": [tok.warning] if tok.warning else []}


def _trained_with(cfg) -> dict:
    """dw version and commit that trained the run (config.yaml's provenance block)."""
    p = cfg.get("provenance") or {}
    g = p.get("git") or {}
    return {"version": p.get("dw"), "commit": g.get("commit"), "dirty": g.get("dirty"), "precision": p.get("precision")}


def _generation_config(tok: hf_tokenizer.HFTokenizer):
    from transformers import GenerationConfig

    # greedy by default; generation stops at end-of-text where the tokenizer has one
    return GenerationConfig(bos_token_id=None, eos_token_id=tok.eos_id, pad_token_id=tok.eos_id, do_sample=False)


def _into_place(tmp: Path, out: Path) -> None:
    """Rename the finished folder to OUT; an old OUT (empty, or --force) goes only once the new one is there."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}-{time.time_ns()}")
        os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        if old is not None:
            os.rename(old, out)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
