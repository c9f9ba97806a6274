"""`dw export`: tiny runs trained here, exported, loaded back with transformers and compared with
dw's own forward: the same logits (fp32: within 1e-5; bf16: within bf16's rounding), the same greedy
continuation, stock classes without custom code where they match, dw's modeling file elsewhere."""

from __future__ import annotations

import ast
import base64
import json
import re
from pathlib import Path

import pytest
import torch

from depthwidth.export import hf
from depthwidth.model.spec import ModelSpec
from tests.helpers import assert_bad_input, dw_in_process, run_dw

TINY = [
    "model.depth=2",
    "model.width=64",
    "train.batch_size=4",
    "train.seq_len=32",
    "train.threads=1",
    "train.steps=3",
    "optim.lr=0.01",  # weights (ReZero's gates too) move well away from their init in 3 steps
    "optim.warmup=0",
]
X = ["model.shape=x", "model.depth=4", "model.quantum=16", "model.head_dim=16"]  # widths 80, 64, 16, 80 at h = 64
MOE = ["model.mlp=moe", "model.n_experts=4", "model.top_k=2", "model.expert_hidden=32", "model.head_dim=16"]

STOCK = {  # uniform models of each preset family, and the class that computes each exactly
    "depth_delusion": ([], "GPTNeoXForCausalLM"),
    "depth_delusion, no bias, tied": (["model.bias=false", "model.tied=true"], "GPTNeoXForCausalLM"),
    "vwt_500m uniform (µP)": (["model=vwt_500m", "model.shape=uniform", "model.heads=4"], "GraniteForCausalLM"),
    "vwt, µP off": (["model=vwt", "model.heads=4"], "LlamaForCausalLM"),
    "vwt, µP off, bias, tied": (
        ["model=vwt", "model.heads=4", "model.bias=true", "model.tied=true"],
        "LlamaForCausalLM",
    ),
    "vwt, 1/head_dim scale": (["model=vwt", "model.heads=4", "model.attn_scale=inv"], "GraniteForCausalLM"),
}
REMOTE = {  # everything no stock class computes
    "x carry µP (vwt_500m)": ["model=vwt_500m", "model.depth=4", "model.heads=2", "model.quantum=16"],
    "x zero": [*X, "model.resize=zero"],
    "x proj": [*X, "model.resize=proj"],
    "x proj, embed first": [*X, "model.resize=proj", "model.embed=first"],
    "post-LN": ["model.stabiliser=post"],
    "DeepNorm": ["model.stabiliser=deepnorm"],
    "ReZero": ["model.stabiliser=rezero"],
    "NormFormer": ["model.stabiliser=normformer"],
    "MoE": MOE,
    "MoE, x carry": [*X, *MOE],
    "no RoPE": ["model.rope=false"],
    "LayerNorm + SwiGLU, tied": ["model.mlp=swiglu", "model.tied=true"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> run directory, each trained once (on first use) for the whole module."""
    from depthwidth.config.compose import compose
    from depthwidth.train import train

    root, made = tmp_path_factory.mktemp("export_runs"), {}

    def get(name: str, overrides: list[str]) -> Path:
        if name not in made:
            d = root / re.sub(r"[^A-Za-z0-9]+", "_", name)
            s = train(compose([*TINY, *overrides, f"run.dir={d}"]), handle_signals=False, log=lambda m: None)
            assert s["status"] == "done"
            made[name] = d
        return made[name]

    return get


def _tokens(vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 32), generator=torch.Generator().manual_seed(seed))


def _greedy(dw_model, prompt: torch.Tensor, n: int) -> torch.Tensor:
    seq = prompt
    with torch.no_grad():
        for _ in range(n):
            seq = torch.cat([seq, dw_model(seq)[0][:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.size(1) :]


def _export_and_compare(run_dir: Path, out: Path, stock: bool, dtype: str = "fp32"):
    """Export, load with transformers, check logits and greedy decoding against dw's; returns (doc, hf model)."""
    from transformers import AutoModelForCausalLM

    from depthwidth.train.analysis import load_model

    doc = hf.export_run(run_dir, out, dtype=dtype)
    model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=not stock).eval()
    ours, _, _ = load_model(run_dir)
    x = _tokens(ours.spec.vocab_size)
    with torch.no_grad():
        want, got = ours(x)[0], model(x).logits
    if dtype == "fp32":
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        prompt = x[:1, :8]
        with torch.no_grad():
            gen = model.generate(prompt, max_new_tokens=6, do_sample=False)[:, 8:]
        assert gen.numel() > 0
        assert gen.tolist() == _greedy(ours, prompt, 6)[:, : gen.size(1)].tolist()  # eos may stop it sooner
    return doc, model, want, got


# ---------------------------------------------------------------------------- stock classes


@pytest.mark.parametrize("name", list(STOCK))
def test_a_uniform_model_loads_with_a_stock_class_without_custom_code(runs, tmp_path, name):
    overrides, cls = STOCK[name]
    out = tmp_path / "hf"
    doc, model, _, _ = _export_and_compare(runs(name, overrides), out, stock=True)
    assert doc["class"] == cls and doc["stock_class"] and type(model).__name__ == cls
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == [cls] and "auto_map" not in config
    assert not list(out.glob("*.py"))


def test_gpt_neox_is_sequential_and_fully_rotary(runs, tmp_path):
    out = tmp_path / "hf"
    hf.export_run(runs("depth_delusion", []), out)
    c = json.loads((out / "config.json").read_text())
    assert c["use_parallel_residual"] is False and c["rope_parameters"]["partial_rotary_factor"] == 1.0
    assert c["layer_norm_eps"] == 1e-5 and c["hidden_act"] == "gelu"


def test_granite_carries_the_mup_multipliers(runs, tmp_path):
    out = tmp_path / "hf"
    overrides, _ = STOCK["vwt_500m uniform (µP)"]
    hf.export_run(runs("vwt_500m uniform (µP)", overrides), out)
    c = json.loads((out / "config.json").read_text())
    assert (c["embedding_multiplier"], c["residual_multiplier"], c["logits_scaling"]) == (12.0, 0.22, 8.0)
    assert c["attention_multiplier"] == 1 / 16  # 1/head_dim: 64 wide, 4 heads
    assert c["rms_norm_eps"] == 1e-5


@pytest.mark.parametrize(
    "changes, cls",
    [
        ({}, "GPTNeoXForCausalLM"),
        ({"norm": "rmsnorm", "mlp": "swiglu"}, "LlamaForCausalLM"),
        ({"norm": "rmsnorm", "mlp": "swiglu", "mup": True}, "GraniteForCausalLM"),
        (
            {"norm": "rmsnorm", "mlp": "swiglu", "mup": True, "m_width": 1, "m_emb": 1, "m_residual": 1},
            "GraniteForCausalLM",
        ),
        (
            {
                "norm": "rmsnorm",
                "mlp": "swiglu",
                "mup": True,
                "m_width": 1,
                "m_emb": 1,
                "m_residual": 1,
                "attn_scale": "inv_sqrt",
            },
            "LlamaForCausalLM",
        ),
        ({"resize": "proj"}, "GPTNeoXForCausalLM"),  # uniform: the resize mode never acts
        ({"mup": True}, "DwForCausalLM"),
        ({"attn_scale": "inv"}, "DwForCausalLM"),
        ({"norm": "rmsnorm"}, "DwForCausalLM"),
        ({"mlp": "swiglu"}, "DwForCausalLM"),
        ({"rope": False}, "DwForCausalLM"),
        ({"stabiliser": "post"}, "DwForCausalLM"),
        ({"mlp": "moe"}, "DwForCausalLM"),
        ({"widths": (64, 32)}, "DwForCausalLM"),
        ({"embed_width": 32}, "DwForCausalLM"),
    ],
)
def test_the_mapping_names_a_stock_class_only_where_it_computes_the_model(changes, cls):
    spec = ModelSpec(**{"widths": (64, 64), "vocab_size": 50, "embed_width": 64, "head_dim": 16, **changes})
    t = hf.target(spec)
    assert t.arch == cls and t.stock == (cls != "DwForCausalLM") and t.why


# ---------------------------------------------------------------------------- dw's own modeling file


@pytest.mark.parametrize("name", list(REMOTE))
def test_every_other_model_loads_with_dws_modeling_file(runs, tmp_path, name):
    out = tmp_path / "hf"
    run_dir = runs(name, REMOTE[name])
    doc, model, _, _ = _export_and_compare(run_dir, out, stock=False)
    assert doc["class"] == "DwForCausalLM" and not doc["stock_class"] and type(model).__name__ == "DwForCausalLM"
    config = json.loads((out / "config.json").read_text())
    assert config["auto_map"] == {
        "AutoConfig": "configuration_dw.DwConfig",
        "AutoModelForCausalLM": "modeling_dw.DwForCausalLM",
    }
    for f in ("modeling_dw.py", "configuration_dw.py"):  # self-contained: runs where dw is not installed
        tree = ast.parse((out / f).read_text())
        mods = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        mods |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not any(m.startswith("depthwidth") for m in mods), mods
    if name == "ReZero":  # the gates were trained: the branches count
        assert model.blocks[0].gate_attn.detach() != 0 and model.blocks[0].gate_mlp.detach() != 0


def test_left_padded_batches_generate_what_each_prompt_generates_alone(runs, tmp_path):
    from transformers import AutoModelForCausalLM

    out = tmp_path / "hf"
    hf.export_run(runs("MoE, x carry", REMOTE["MoE, x carry"]), out)
    model = AutoModelForCausalLM.from_pretrained(out, trust_remote_code=True).eval()
    x = _tokens(256, seed=1)
    long, short = x[0, :8], x[1, :5]
    ids = torch.stack([long, torch.cat([torch.zeros(3, dtype=torch.long), short])])
    mask = torch.tensor([[1] * 8, [0] * 3 + [1] * 5])
    with torch.no_grad():
        both = model.generate(ids, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0)[:, 8:]
        alone = [model.generate(p[None], max_new_tokens=5, do_sample=False)[0, len(p) :] for p in (long, short)]
    assert both[0].tolist() == alone[0].tolist() and both[1].tolist() == alone[1].tolist()


# ---------------------------------------------------------------------------- bf16


@pytest.mark.parametrize("name, stock", [("vwt_500m uniform (µP)", True), ("MoE, x carry", False)])
def test_bf16_export_holds_bf16_weights_and_close_logits(runs, tmp_path, name, stock):
    from safetensors import safe_open

    from depthwidth.train.analysis import load_model

    run_dir = runs(name, STOCK[name][0] if stock else REMOTE[name])
    out = tmp_path / "hf"
    doc, model, want, got = _export_and_compare(run_dir, out, stock=stock, dtype="bf16")
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        assert {f.get_tensor(k).dtype for k in f.keys()} == {torch.bfloat16}
        assert f.metadata()["dw_run_id"] == doc["run_id"]
    assert json.loads((out / "config.json").read_text())["dtype"] == "bfloat16" and model.dtype == torch.bfloat16
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.float(), want, atol=0.05, rtol=0.02)  # bf16 keeps 8 bits of mantissa
    ours = load_model(run_dir)[0].to(torch.bfloat16)
    with torch.no_grad():  # dw's own forward in bf16 computes what the export computes
        torch.testing.assert_close(got, ours(_tokens(ours.spec.vocab_size))[0], atol=1e-2, rtol=1e-2)


# ---------------------------------------------------------------------------- tokenizer, card, provenance


def test_byte_runs_get_a_byte_tokenizer_and_the_card_names_the_run(runs, tmp_path):
    from transformers import AutoTokenizer

    run_dir = runs("depth_delusion", [])
    out = tmp_path / "hf"
    doc = hf.export_run(run_dir, out, checkpoint="3")
    text = "héllo wörld\n  def f(x): return x"
    tok = AutoTokenizer.from_pretrained(out)
    assert tok(text)["input_ids"] == list(text.encode("utf-8")) and tok.decode(list(text.encode())) == text
    summary = json.loads((run_dir / "summary.json").read_text())
    card = (out / "README.md").read_text()
    assert summary["run_id"] in card and f"{summary['final_val_loss']:.4f}" in card
    assert "```yaml\n" + (run_dir / "config.yaml").read_text().rstrip("\n") + "\n```" in card
    dw = json.loads((out / "config.json").read_text())["dw"]
    assert dw["run_id"] == summary["run_id"] and dw["checkpoint_step"] == 3 and dw["dtype"] == "fp32"
    assert (
        dw["version"]
        and "commit" in dw["git"]
        and dw["trained_with"]["commit"] == summary["provenance"]["git"]["commit"]
    )
    assert doc["files"] == sorted(p.name for p in out.iterdir())
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "README.md"} <= set(
        doc["files"]
    )


def test_synthetic_runs_say_there_is_no_text_tokenizer(runs, tmp_path):
    out = tmp_path / "hf"
    hf.export_run(runs("synthetic", ["data=synthetic"]), out)
    assert not (out / "tokenizer.json").exists()
    assert json.loads((out / "config.json").read_text())["dw"]["tokenizer"]["kind"] == "none"
    assert "no text tokenizer" in (out / "README.md").read_text()


def test_prepared_data_brings_its_tokenizer_and_end_of_text(runs, tmp_path_factory, tmp_path):
    from transformers import AutoTokenizer

    from depthwidth.data.prepare import prepare
    from depthwidth.data.tokenizer import load_tokenizer, train_bpe

    src = tmp_path_factory.mktemp("corpus")
    words = "the of and to in is was for on that with as by at from it an be this which".split()
    docs = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(80)) for i in range(120)]
    (src / "corpus.txt").write_text("\n\n".join(docs))
    (src / "tok.json").write_text(train_bpe((src / "corpus.txt").read_text(), 300).to_str())
    text = "the of and<|endoftext|>"
    for kind, spec in (("byte", "byte"), ("file", str(src / "tok.json"))):
        data = src / f"tokens_{kind}"
        vocab = prepare(str(src / "corpus.txt"), spec, data, val_fraction=0.1)["vocab_size"]
        run_dir = runs(f"memmap {kind}", ["data=memmap", f"data.path={data}", f"data.vocab_size={vocab}"])
        out = tmp_path / kind
        _export_and_compare(run_dir, out, stock=True)
        tok = AutoTokenizer.from_pretrained(out)
        ref = load_tokenizer(spec)
        assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id == ref.eot == vocab - 1
        assert tok(text)["input_ids"] == ref.encode_batch([text[: -len("<|endoftext|>")]])[0].tolist() + [ref.eot]
        assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == ref.eot


def test_a_pydoc_bpe_run_ships_the_bpe_it_was_trained_with(runs, tmp_path):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    cache = tmp_path / "cache"
    run_dir = runs("pydoc bpe", ["data.tokenizer=bpe", "data.vocab_size=400", f"data.cache_dir={cache}"])
    out = tmp_path / "hf"
    hf.export_run(run_dir, out)
    (ref_path,) = cache.glob("tokenizers/*/tokenizer.json")
    text = "The built-in function len() returns the number of items.\n\nSee also:  iter()"
    assert AutoTokenizer.from_pretrained(out)(text)["input_ids"] == Tokenizer.from_file(str(ref_path)).encode(text).ids


def test_tiktoken_ranks_convert_to_the_same_ids_with_end_of_text_at_its_own_id(tmp_path):
    from depthwidth.data.tokenizer import Cl100kTokenizer
    from depthwidth.export.tokenizer import from_tiktoken

    ranks = [bytes([b]) for b in range(256)] + [b"th", b"the", b" the", b"in", b" in", b"an", b"and", b" and"]
    path = tmp_path / "mini.tiktoken"  # cl100k's pattern and end-of-text over a few ranks, as cl100k:PATH reads them
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(ranks)))
    enc = Cl100kTokenizer(str(path)).enc
    tk = from_tiktoken(enc)
    for text in ("the cat and the dog in there", "héllo  wörld\n\n 123456 the"):
        assert tk.encode(text).ids == enc.encode_ordinary(text)
    assert tk.token_to_id("<|endoftext|>") == enc.eot_token == 100257


# ---------------------------------------------------------------------------- the command


def test_the_command_prints_one_line_and_json(runs, tmp_path, capsys):
    run_dir = runs("depth_delusion", [])
    code, out, err = dw_in_process(capsys, "export", str(run_dir), str(tmp_path / "a"))
    assert code == 0 and err == "" and out.count("\n") == 1
    assert "GPTNeoXForCausalLM" in out and "fp32" in out and str(tmp_path / "a") in out
    code, out, _ = dw_in_process(capsys, "export", str(run_dir), str(tmp_path / "b"), "--json", "--dtype", "bf16")
    doc = json.loads(out)
    assert code == 0 and doc["dtype"] == "bf16" and doc["out"] == str(tmp_path / "b")


def test_bad_input_exits_2_with_one_line_and_writes_nothing(runs, tmp_path, capsys):
    run_dir = runs("depth_delusion", [])
    work = tmp_path / "work"
    work.mkdir()
    full = work / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    (work / "file").write_text("")

    def bad(*argv):
        code, out, err = dw_in_process(capsys, "export", *argv)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err + out, (code, err)
        return lines[0]

    new = str(work / "new")
    assert "--dtype" in assert_bad_input(run_dw("export", str(run_dir), new, "--dtype", "fp16"))  # a real process
    assert "'fp16'" in bad(str(run_dir), new, "--dtype", "fp16") and "fp32|bf16" in bad(
        str(run_dir), new, "--dtype", "fp16"
    )
    assert "RUN_DIR" in bad(str(work / "nowhere"), new)
    assert "RUN_DIR" in bad(str(work), new)  # a folder, no config.yaml
    assert "--checkpoint" in bad(str(run_dir), new, "--checkpoint", "7") and ": 3" in bad(
        str(run_dir), new, "--checkpoint", "7"
    )
    assert "--checkpoint" in bad(str(run_dir), new, "--checkpoint", "last")
    assert "--force" in bad(str(run_dir), str(full))
    assert "OUT" in bad(str(run_dir), str(work / "file"))
    assert "outside the run directory" in bad(str(run_dir), str(run_dir), "--force")
    assert "outside the run directory" in bad(str(run_dir), str(run_dir.parent), "--force")
    assert sorted(p.name for p in work.iterdir()) == ["file", "full"] and (full / "keep.txt").read_text() == "mine"
    assert (run_dir / "config.yaml").is_file()


def test_force_replaces_and_an_empty_out_is_fine(runs, tmp_path):
    run_dir = runs("depth_delusion", [])
    out = tmp_path / "out"
    out.mkdir()
    hf.export_run(run_dir, out)
    (out / "stale.txt").write_text("old")
    hf.export_run(run_dir, out, dtype="bf16", force=True)
    assert not (out / "stale.txt").exists() and json.loads((out / "config.json").read_text())["dtype"] == "bfloat16"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary folder left


def test_a_failure_while_writing_leaves_nothing_half_written(runs, tmp_path, monkeypatch):
    from depthwidth.export import card

    run_dir = runs("depth_delusion", [])
    out = tmp_path / "out"
    hf.export_run(run_dir, out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(card, "render", boom)
    with pytest.raises(RuntimeError):
        hf.export_run(run_dir, tmp_path / "new")
    with pytest.raises(RuntimeError):
        hf.export_run(run_dir, out, dtype="bf16", force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
