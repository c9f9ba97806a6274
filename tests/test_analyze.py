"""`dw analyze`: the three measures (matrix entropy, MLP density, logit lens) against
cases whose answer is known, and the command against the library call."""

from __future__ import annotations

import json
import math
import shutil

import pytest
import torch

from depthwidth.measure.inside import analyse, entropy_profile, eval_set, lens_logits
from depthwidth.measure.stats import matrix_entropy
from depthwidth.model.gpt import VariableWidthGPT
from depthwidth.model.spec import ModelSpec
from tests.helpers import assert_bad_input, dw, dw_in_process, run_dw

# ---------------------------------------------------------------------------- entropy


def test_isotropic_gaussian_has_entropy_close_to_one():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(20_000, 32, generator=g, dtype=torch.float64)
    assert 0.99 < matrix_entropy(Z) <= 1.0


def test_rank_one_has_entropy_zero():
    g = torch.Generator().manual_seed(1)
    Z = torch.randn(300, 1, generator=g) @ torch.randn(1, 48, generator=g)
    assert matrix_entropy(Z) == pytest.approx(0.0, abs=1e-9)


def test_entropy_is_invariant_to_scaling():
    Z = torch.randn(200, 24, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert matrix_entropy(3.7 * Z) == pytest.approx(matrix_entropy(Z), abs=1e-12)
    assert matrix_entropy(1e-3 * Z) == pytest.approx(matrix_entropy(Z), abs=1e-12)


@pytest.mark.parametrize("n, d, k", [(50, 20, 5), (12, 40, 7), (64, 64, 1), (30, 16, 16)])
def test_k_equal_singular_values_give_log_k_over_log_min_n_d(n, d, k):
    g = torch.Generator().manual_seed(3)
    U, _ = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(d, k, generator=g, dtype=torch.float64))
    Z = 2.5 * U @ V.T  # k singular values, all 2.5
    assert matrix_entropy(Z) == pytest.approx(math.log(k) / math.log(min(n, d)), abs=1e-12)


def test_centring_removes_a_common_offset():
    Z = torch.randn(500, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    shifted = Z + 50.0 * torch.randn(1, 16, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert matrix_entropy(shifted) < 0.2  # the offset's direction holds almost all the energy
    assert matrix_entropy(shifted, centre=True) == pytest.approx(matrix_entropy(Z, centre=True), abs=1e-9)


# ---------------------------------------------------------------------------- MLP density


def _planted(mlp: str, dead: int, alive: int):
    """A model whose MLP units are constant: weights 0, biases chosen so ``dead`` units
    never fire and ``alive`` units always do."""
    spec = ModelSpec(widths=(32, 32), vocab_size=50, embed_width=32, head_dim=16, mlp=mlp, mlp_ratio=4, bias=True)
    torch.manual_seed(0)
    model = VariableWidthGPT(spec, 16)
    m = spec.mlp_hidden(0)
    assert dead + alive == m
    with torch.no_grad():
        for b in model.blocks:
            b.mlp.c_fc.weight.zero_()
            b.mlp.c_fc.bias[:dead] = -1.0  # GELU(-1) < 0: inactive
            b.mlp.c_fc.bias[dead:] = 1.0
            if mlp == "swiglu":
                b.mlp.c_gate.weight.zero_()
                b.mlp.c_gate.bias[:dead] = 0.0  # silu(0) = 0: the product is exactly 0
                b.mlp.c_gate.bias[dead:] = 2.0  # silu(2)·1 = 1.76
    return model


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_planted_dead_and_always_active_units_give_exactly_those_fractions(mlp):
    model = _planted(mlp, dead=40, alive=88)
    x = torch.randint(0, 50, (6, 16), generator=torch.Generator().manual_seed(0))
    doc = analyse(model, x, x)
    for r in doc["layers"]:
        assert r["mlp_density"] == 88 / 128
        assert r["mlp_dead"] == 40 / 128
        assert r["mlp_balance"] == pytest.approx(math.log(88) / math.log(128), abs=1e-12)


def test_the_swiglu_rule_is_the_stated_one_and_a_fixed_threshold_is_configurable():
    model = _planted("swiglu", dead=40, alive=88)
    x = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(0))
    doc = analyse(model, x, x)
    assert doc["options"]["mlp_rule"] == "cett" and doc["options"]["cett_target"] == 0.2
    assert doc["options"]["swiglu_threshold"] is None
    # |a| is 0 or 1.76 on every token: dropping the zeros loses nothing, dropping the rest everything
    assert [r["mlp_threshold"] for r in doc["layers"]] == [pytest.approx(1.76, abs=0.01)] * 2
    above = analyse(model, x, x, threshold=2.0)  # 1.76 is below it: every unit is dead now
    assert [r["mlp_dead"] for r in above["layers"]] == [1.0, 1.0]
    assert above["options"]["mlp_rule"] == "fixed" and above["options"]["swiglu_threshold"] == 2.0
    assert [r["mlp_threshold"] for r in above["layers"]] == [2.0, 2.0]
    gelu = analyse(_planted("gelu", dead=40, alive=88), x, x)
    assert gelu["options"]["mlp_rule"] == "gelu>0" and [r["mlp_threshold"] for r in gelu["layers"]] == [None] * 2


# ---------------------------------------------------------------------------- logit lens

SPECS = {
    "x carry": ModelSpec(
        widths=(64, 32, 16, 32, 64), vocab_size=97, embed_width=32, head_dim=16, mlp="swiglu", norm="rmsnorm"
    ),
    "x zero": ModelSpec(widths=(64, 32, 16, 32, 64), vocab_size=97, embed_width=32, head_dim=16, resize="zero"),
    "x proj": ModelSpec(widths=(64, 32, 16, 32, 64), vocab_size=97, embed_width=32, head_dim=16, resize="proj"),
    "diamond carry": ModelSpec(widths=(16, 48, 16), vocab_size=97, embed_width=32, head_dim=16),
}


def _model(name, seed=0):
    torch.manual_seed(seed)
    return VariableWidthGPT(SPECS[name], 32).eval()


@pytest.mark.parametrize("name", list(SPECS))
def test_lens_at_the_last_layer_is_the_models_own_output(name):
    model = _model(name)
    x = torch.randint(0, 97, (4, 32), generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 97, (4, 32), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits, loss, hidden = model(x, y, return_hidden=True)
        assert torch.equal(lens_logits(model, hidden[-1], model.spec.depth), logits)
    doc = analyse(model, x, y, batch_tokens=64)  # two batches: sums over batches
    top = doc["layers"][-1]
    assert top["lens_kl_final"] == 0.0
    assert top["lens_ce"] == pytest.approx(float(loss), rel=1e-6)
    assert doc["eval_loss"] == pytest.approx(float(loss), rel=1e-6)


def test_carry_x_model_lens_reads_every_layer_as_readout_does():
    model = _model("x carry")
    x = torch.randint(0, 97, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, _, hidden = model(x, return_hidden=True)
        for i, h in enumerate(hidden):
            assert h.size(-1) == 64  # the whole stream, R = max w_i
            assert torch.equal(lens_logits(model, h, i + 1), model.readout(h))


@pytest.mark.parametrize("name", ["x carry", "x zero", "x proj"])
@pytest.mark.parametrize("layer", [1, 2, 3])
def test_lens_is_the_output_the_model_gives_when_later_layers_add_nothing(name, layer):
    """What the lens means for every resize: with the branches of layers after
    ``layer`` switched off, the model's own logits are the lens of that layer."""
    model = _model(name)
    x = torch.randint(0, 97, (2, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        _, _, hidden = model(x, return_hidden=True)
        lens = lens_logits(model, hidden[layer - 1], layer)
        for b in model.blocks[layer:]:
            b.attn.c_proj.weight.zero_()
            b.mlp.c_proj.weight.zero_()
        out, _ = model(x)
    assert torch.equal(lens, out)


# ---------------------------------------------------------------------------- dw analyze

TINY = [
    "model=vwt",
    "model.heads=4",
    "model.quantum=8",
    "model.depth=3",
    "model.width=32",
    "model.shape=x",
    "train.batch_size=8",
    "train.seq_len=32",
    "train.threads=1",
    "train.steps=12",
    "train.log_every=4",
    "probe.every=0",
    "probe.entropy_every=4",
    "train.analyze_at_end=true",
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from depthwidth.config.compose import compose
    from depthwidth.train import train

    d = tmp_path_factory.mktemp("analyze") / "run"
    s = train(compose([*TINY, f"run.dir={d}"]), handle_signals=False, log=lambda m: None)
    assert s["status"] == "done"
    return d


def _same(a: dict, b: dict):
    assert a["step"] == b["step"] and a["eval"] == b["eval"] and a["options"] == b["options"]
    assert len(a["layers"]) == len(b["layers"])
    for ra, rb in zip(a["layers"], b["layers"]):
        for k, v in ra.items():
            assert rb[k] == (v if v is None else pytest.approx(v, rel=1e-6, abs=1e-9)), k


def test_analyze_at_end_and_dw_analyze_give_the_library_numbers(run_dir):
    from depthwidth.train.analysis import analyse_run

    at_end = json.loads((run_dir / "analysis.json").read_text())
    lib = analyse_run(run_dir, write=False)
    _same(lib, at_end)
    assert at_end["run_status"] == "done" and at_end["provenance"]["dw"]
    assert at_end["eval"]["tokens"] == 8192 and at_end["eval"]["entropy_tokens"] == 2048
    p = dw("analyze", str(run_dir), "--json", "--tokens", "1024")
    assert p.returncode == 0, p.stderr
    cli = json.loads(p.stdout)
    _same(analyse_run(run_dir, tokens=1024, write=False), cli)
    assert json.loads((run_dir / "analysis.json").read_text())["eval"]["tokens"] == 1024  # rewritten
    table = dw("analyze", str(run_dir), "--checkpoint", "12")
    assert table.returncode == 0 and "H prefix" in table.stdout and "KL final" in table.stdout
    assert (run_dir / "analysis_step_00000012.json").is_file()


def test_entropy_probe_records_the_profile_of_the_fixed_batch(run_dir):
    from depthwidth.train.analysis import load_model

    rows = [json.loads(ln) for ln in (run_dir / "probes.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "entropy" in r] == [4, 8, 12]
    model, cfg, step = load_model(run_dir)  # the final checkpoint: after step 12
    from depthwidth.data.source import make_source

    x, _ = eval_set(make_source(cfg.data, 32), 32, 512)  # the probe's fixed batch: 16 windows of 32
    assert x.shape == (16, 32)
    got = [r for r in rows if r["step"] == 12][0]["entropy"]
    assert got == pytest.approx(entropy_profile(model, torch.as_tensor(x)), abs=1e-9)
    assert all(0 < h <= 1 for h in got)


def _planted_run(run_dir, dest, dead: dict, big: dict, scale: float = 2.0**-12):
    """A copy of ``run_dir`` whose newest checkpoint (step 13) holds the trained model with layer i's
    hidden units ``dead[i]`` exactly 0 (their up-projection rows zeroed) and unit ``big[i]`` carrying
    16× the output (its up row × 4, its c_proj column × 4); every up matrix × ``scale`` and c_proj ×
    1/``scale`` (the same function at activations 4,096 times smaller, as at µP init scales)."""
    from depthwidth.train import checkpoint
    from depthwidth.train.analysis import load_model
    from depthwidth.train.dist import World

    shutil.copytree(run_dir, dest)
    model, _, _ = load_model(dest)
    with torch.no_grad():
        for i, b in enumerate(model.blocks):
            b.mlp.c_fc.weight[list(dead.get(i, []))] = 0.0
            if i in big:
                b.mlp.c_fc.weight[big[i]] *= 4.0
                b.mlp.c_proj.weight[:, big[i]] *= 4.0
            b.mlp.c_fc.weight.mul_(scale)
            b.mlp.c_proj.weight.div_(scale)
    checkpoint.save(dest / "ckpt", 13, World(), model, torch.optim.AdamW(model.parameters()), {}, keep=5)
    return model


def test_dw_analyze_reports_planted_dead_units_exactly(run_dir, tmp_path):
    """x model (widths 40, 8, 40; SwiGLU hidden 160, 32, 160): units planted dead in layers 1 and 3 are
    exactly the dead fraction `dw analyze` reports, every other unit is alive, a unit carrying a large
    share of the output is active on most tokens; the old fixed |a| > 1e-3 would call (nearly) all dead."""
    from depthwidth.data.source import make_source
    from depthwidth.train.analysis import load_model

    dead, big = {0: range(0, 40), 2: range(100, 116)}, {0: 50, 2: 7}
    _planted_run(run_dir, tmp_path / "run", dead, big)
    p = dw("analyze", str(tmp_path / "run"), "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["step"] == 13 and [r["mlp_dead"] for r in doc["layers"]] == [40 / 160, 0.0, 16 / 160]
    assert doc["options"]["mlp_rule"] == "cett"
    model, cfg, _ = load_model(tmp_path / "run")
    x, _ = eval_set(make_source(cfg.data, 32), 32, 8192)
    with torch.no_grad():
        acts = {}
        hs = [
            b.mlp.c_proj.register_forward_pre_hook(lambda _m, inp, i=i: acts.__setitem__(i, inp[0]))
            for i, b in enumerate(model.blocks)
        ]
        model(torch.as_tensor(x))
        for h in hs:
            h.remove()
    for i, r in enumerate(doc["layers"]):
        a = acts[i].reshape(-1, acts[i].size(-1)).abs()
        assert (a[:, list(dead.get(i, []))] == 0).all() and r["mlp_threshold"] > 0
        on = (a >= r["mlp_threshold"]).double().mean(0)  # each unit's active fraction, as dw analyze counts
        assert r["mlp_density"] == pytest.approx(float(on.mean()), abs=1e-12)
        if i in big:  # 4× the activation, 16× the output: the layer's most active unit, on most tokens
            assert float(on[big[i]]) == float(on.max()) and float(on[big[i]]) > 0.7 > 2 * r["mlp_density"]
        assert float((a > 1e-3).double().mean()) < 0.01  # the old absolute rule: (nearly) nothing active


def test_sweep_mode_analyses_only_finished_runs_without_an_analysis(run_dir, tmp_path):
    root = tmp_path / "runs"
    for name in ("a", "b", "c", "d"):  # four runs of a store without a manifest: one per run id
        shutil.copytree(run_dir, root / "sw" / name)
        f = root / "sw" / name / "summary.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "run_id": name}))
    (root / "sw" / "b" / "analysis.json").unlink()
    s = json.loads((root / "sw" / "c" / "summary.json").read_text())
    (root / "sw" / "c" / "analysis.json").unlink()
    (root / "sw" / "c" / "summary.json").write_text(json.dumps({**s, "status": "running"}))
    older = json.loads((root / "sw" / "d" / "analysis.json").read_text())  # measured with older definitions
    (root / "sw" / "d" / "analysis.json").write_text(json.dumps({**older, "schema": "dw.analysis/1"}))
    p = dw("analyze", "sw", "--root", str(root), "--json")
    assert p.returncode == 0, p.stderr
    assert [d["run_dir"] for d in json.loads(p.stdout)] == [str(root / "sw" / "b"), str(root / "sw" / "d")]
    again = dw("analyze", "sw", "--root", str(root), "--json")
    assert json.loads(again.stdout) == [] and not (root / "sw" / "c" / "analysis.json").exists()


def test_an_older_analysis_reads_with_the_current_lens_keys(tmp_path):
    from depthwidth.measure import doc as adoc

    old = {
        "schema": "dw.analysis/1",
        "options": {"mlp": "swiglu", "swiglu_threshold": 1e-3},
        "embedding_lens": {"lens_ce": 4.0, "lens_target_prob": 0.05},
        "layers": [{"layer": 1, "lens_ce": 2.0, "lens_target_prob": 0.3}],
    }
    (tmp_path / "analysis.json").write_text(json.dumps(old))
    d = adoc.read(tmp_path)
    assert d["layers"][0]["lens_target_prob"] == math.exp(-2.0) and d["layers"][0]["lens_target_prob_mean"] == 0.3
    assert d["embedding_lens"]["lens_target_prob"] == math.exp(-4.0)
    assert d["options"]["mlp_rule"] == "fixed" and not adoc.current(tmp_path)


def test_bad_input_exits_2_with_one_line_and_writes_nothing(run_dir, tmp_path, capsys):
    def bad(*argv):  # in-process dw: the same exit-code / one-line contract, without a start per case
        code, out, err = dw_in_process(capsys, "analyze", *argv)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err + out, (code, err)
        return lines[0]

    assert "RUN_DIR" in assert_bad_input(run_dw("analyze", str(tmp_path / "nowhere/")))  # one real process
    assert "RUN_DIR" in bad(str(tmp_path))  # a folder, no config.yaml
    assert "sweep" in bad("no_such_sweep", "--root", str(tmp_path))
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run_dir / "config.yaml", bare / "config.yaml")
    assert "no valid checkpoint" in bad(str(bare))
    assert "--checkpoint" in bad(str(run_dir), "--checkpoint", "7")
    assert "--checkpoint" in bad(str(run_dir), "--checkpoint", "last")
    assert "--tokens" in bad(str(run_dir), "--tokens", "0")
    assert "--frobnicate" in bad(str(run_dir), "--frobnicate")
    assert "--device" in bad(str(run_dir), "--device", "tpu")
    assert not list(bare.glob("analysis*.json")) and not list(tmp_path.glob("analysis*.json"))


def test_sums_over_batches_do_not_depend_on_the_batching():
    model = _model("x zero")
    x = torch.randint(0, 97, (6, 32), generator=torch.Generator().manual_seed(3))
    one, many = analyse(model, x, x, batch_tokens=4096), analyse(model, x, x, batch_tokens=32)
    assert one["eval"] == many["eval"]
    for a, b in zip(one["layers"], many["layers"]):
        for k, v in a.items():
            assert b[k] == (v if v is None else pytest.approx(v, rel=1e-5, abs=1e-7)), k
    assert set(one["embedding_lens"]) == {
        "lens_ce",
        "lens_target_prob",
        "lens_target_prob_mean",
        "lens_entropy",
        "lens_kl_final",
    }


def test_the_eval_set_depends_on_data_and_seq_len_only():
    from depthwidth.config.compose import compose
    from depthwidth.data.source import make_source

    a = eval_set(make_source(compose(["run.seed=1"]).data, 64), 64, 1000)
    b = eval_set(make_source(compose(["run.seed=2", "model.width=96"]).data, 64), 64, 1000)
    assert a[0].shape == (16, 64)  # ceil(1000 / 64) whole windows
    assert (a[0] == b[0]).all() and (a[1] == b[1]).all()


def test_a_failed_end_of_run_analysis_is_a_warning_not_an_error(run_dir, tmp_path):
    from depthwidth.train.analysis import at_end

    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(run_dir / "config.yaml", bare / "config.yaml")
    said = []
    at_end(bare, said.append)  # no checkpoint: must not raise
    assert len(said) == 1 and said[0].startswith("warning: analysis failed") and "dw analyze" in said[0]


def test_neither_setting_changes_a_run_id():
    from depthwidth.config.compose import compose
    from depthwidth.config.identity import run_id

    def rid(extra):
        cfg = compose(["train.precision=fp32", *extra])
        return run_id(cfg)

    assert rid([]) == rid(["probe.entropy_every=10", "train.analyze_at_end=true"])
    assert rid([]) != rid(["probe.every=10"])  # the gradient probe's cadence still is identity
