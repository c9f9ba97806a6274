"""Token sources (pydoc, synthetic, memmap) and `dw data prepare`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from depthwidth.data.base import TokenStream
from depthwidth.data.pydoc import pydoc_split
from depthwidth.data.source import make_source
from depthwidth.core.errors import BadInput
from tests.helpers import REPO, assert_bad_input, run_dw

PYDOC = {"name": "pydoc", "tokenizer": "byte", "vocab_size": 256, "val_fraction": 0.1, "cache_dir": None}
SYN = {"name": "synthetic", "vocab_size": 16, "order": 2, "alpha": 0.1, "seed": 3}


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("DW_CACHE_DIR", str(tmp_path / "cache"))


def _check_resume(src, split="train", k=3, more=2):
    s = src.sampler(split, 4, 32, seed=11)
    for _ in range(k):
        x, y = s.next()
        assert x.dtype == np.int64 and y.dtype == np.int64 and x.shape == y.shape == (4, 32)
        assert np.array_equal(x[:, 1:], y[:, :-1])  # y is x shifted by one
    state = json.loads(json.dumps(s.state_dict()))  # JSON-able
    expected = [s.next() for _ in range(more)]
    fresh = src.sampler(split, 4, 32, seed=11)
    fresh.load_state_dict(state)
    got = [fresh.next() for _ in range(more)]
    for (x1, y1), (x2, y2) in zip(expected, got):
        assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    with pytest.raises(BadInput, match="saved batch_size 4"):
        src.sampler(split, 5, 32, seed=11).load_state_dict(state)
    other = src.sampler(split, 4, 32, seed=12)
    assert not np.array_equal(other.next()[0], src.sampler(split, 4, 32, seed=11).next()[0])


# ---------------------------------------------------------------------------
# pydoc
# ---------------------------------------------------------------------------


def test_pydoc_byte_deterministic_disjoint_and_resumable():
    a, b = make_source(PYDOC, 64), make_source(PYDOC, 64)
    train, val, info = pydoc_split(0.1)
    for split, text in (("train", train), ("val", val)):
        ids = a.streams[split].read(0, a.n_tokens(split))
        assert np.array_equal(ids, b.streams[split].read(0, b.n_tokens(split)))
        assert bytes(ids.astype(np.uint8)) == text.encode()  # exactly the split's text
        assert a.n_tokens(split) == a.meta["tokens"][split] == len(text.encode())
        assert ids.min() >= 0 and ids.max() < 256
    assert 0.09 < len(val) / (len(train) + len(val)) < 0.12
    # no 128-byte span of the validation text occurs anywhere in the training text
    tb, vb = train.encode(), val.encode()
    spans = {tb[i : i + 128] for i in range(len(tb) - 127)}
    assert not any(vb[i : i + 128] in spans for i in range(len(vb) - 127))
    assert a.bayes_loss is None and a.vocab_size == 256
    vb1, vb2 = a.val_batches(8, 64, 3), b.val_batches(8, 64, 3)
    assert len(vb1) == 3 and all(np.array_equal(p[0], q[0]) and np.array_equal(p[1], q[1]) for p, q in zip(vb1, vb2))
    _check_resume(a, "train")
    _check_resume(a, "val")


def test_pydoc_bpe_cached_deterministic(tmp_path):
    cfg = {**PYDOC, "tokenizer": "bpe", "vocab_size": 512, "cache_dir": str(tmp_path / "c1")}
    a = make_source(cfg, 64)
    path = a.meta["tokenizer"]["path"]
    assert path.startswith(str(tmp_path / "c1")) and os.path.isfile(path)
    mtime = os.stat(path).st_mtime_ns
    b = make_source(cfg, 64)  # from the cache
    assert os.stat(path).st_mtime_ns == mtime
    c = make_source({**cfg, "cache_dir": str(tmp_path / "c2")}, 64)  # trained again from scratch
    assert open(path).read() == open(c.meta["tokenizer"]["path"]).read()
    from tokenizers import Tokenizer

    tk = Tokenizer.from_file(path)
    train, val, _ = pydoc_split(0.1)
    for split, text in (("train", train), ("val", val)):
        ids = a.streams[split].read(0, a.n_tokens(split))
        assert np.array_equal(ids, b.streams[split].read(0, b.n_tokens(split)))
        assert np.array_equal(ids, c.streams[split].read(0, c.n_tokens(split)))
        assert ids.max() < 512 and ids.min() >= 0
        assert tk.decode(ids.tolist()) == text  # lossless: the split is exactly its text
    ids = a.streams["train"].read(0, a.n_tokens("train"))
    assert len(np.unique(ids[ids >= 256])) > 200  # the learned merges are used
    assert a.n_tokens("train") < 0.6 * len(train.encode())  # BPE compresses
    _check_resume(a)


# ---------------------------------------------------------------------------
# synthetic
# ---------------------------------------------------------------------------


def _simulate(P, V, k, n, length, burn, rng):
    """Independent sampler: uniform start, `burn` steps of the chain, then `length` tokens."""
    ctx = rng.integers(0, V, size=(n, k))
    cdf = np.cumsum(P, axis=1)
    out = np.empty((n, burn + length), np.int64)
    for t in range(burn + length):
        s = ctx @ (V ** np.arange(k - 1, -1, -1))
        nxt = np.minimum((rng.random(n)[:, None] > cdf[s]).sum(1), V - 1)
        out[:, t] = nxt
        ctx = np.concatenate([ctx[:, 1:], nxt[:, None]], axis=1)
    return out[:, burn:]


def test_synthetic_bayes_loss_matches_monte_carlo_and_beats_simple_predictors():
    T = 16
    src = make_source(SYN, T)
    ch = src.chain
    V, k = 16, 2
    rng = np.random.default_rng(123)
    w = _simulate(ch.P, V, k, n=6000, length=T + 1, burn=60, rng=rng)  # (n, T+1) stationary windows
    # plug-in conditionals from the simulated data for the short context and the simple predictors
    uni = np.bincount(w.ravel(), minlength=V) / w.size
    pair = np.zeros((V, V))
    np.add.at(pair, (w[:, :-1].ravel(), w[:, 1:].ravel()), 1)
    big = pair / pair.sum(1, keepdims=True)
    # Monte-Carlo loss of the Bayes predictor on the windows: position 0 sees one token
    # (p(x1|x0)), positions >= 1 see two (the chain's own transition)
    nll = np.empty((len(w), T))
    nll[:, 0] = -np.log(big[w[:, 0], w[:, 1]])
    s = w[:, :-2] * V + w[:, 1:-1]
    nll[:, 1:] = -np.log(ch.P[s, w[:, 2:]])
    per_window = nll.mean(1)
    mc, se = per_window.mean(), per_window.std() / np.sqrt(len(w))
    assert abs(mc - src.bayes_loss) < 4 * se + 2e-3, (mc, se, src.bayes_loss)
    assert abs(nll[:, 0].mean() - (ch.Hm[2] - ch.Hm[1])) < 0.03
    assert abs(nll[:, 1:].mean() - ch.H) < 4 * nll[:, 1:].std() / np.sqrt(nll[:, 1:].size) + 1e-3
    # the exact per-token NLL agrees with the independent one where both are exact
    x, y = w[:, :-1], w[:, 1:]
    assert np.allclose(src.true_nll(x, y)[:, 1:], nll[:, 1:])
    # simple predictors lose more: unigram and the best previous-token predictor
    uni_loss = -np.log(uni[y]).mean()
    big_loss = -np.log(big[x, y]).mean()
    assert abs(uni_loss - src.meta["unigram_loss"]) < 0.02 and abs(big_loss - src.meta["bigram_loss"]) < 0.02
    assert src.bayes_loss < big_loss - 0.5 and big_loss < uni_loss
    assert src.bayes_loss == pytest.approx(((ch.Hm[2] - ch.Hm[1]) + (T - 1) * ch.H) / T, abs=1e-12)


def test_synthetic_sampler_draws_from_the_chain_and_resumes():
    src = make_source(SYN, 32)
    s = src.sampler("train", 64, 32, seed=5)
    batches = [s.next() for _ in range(30)]
    nll = np.concatenate([src.true_nll(x, y).mean(1) for x, y in batches])
    assert abs(nll.mean() - src.bayes_loss) < 4 * nll.std() / np.sqrt(len(nll))
    assert all(0 <= x.min() and x.max() < 16 for x, _ in batches)
    v1, v2 = src.val_batches(8, 32, 2), make_source(SYN, 32).val_batches(8, 32, 2)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(v1, v2))
    assert not np.array_equal(v1[0][0], src.sampler("val", 8, 32, seed=0).next()[0])
    _check_resume(src)
    one = make_source({**SYN, "order": 1}, 8)
    assert one.bayes_loss == pytest.approx(one.meta["entropy_rate"]) and one.bayes_loss < one.meta["unigram_loss"]
    assert src.n_tokens("train") > 10**15


# ---------------------------------------------------------------------------
# memmap + dw data prepare
# ---------------------------------------------------------------------------


def _dw(capsys, *args):
    """In-process `dw ARGS` through the real entry point: (exit code, stdout, stderr)."""
    from depthwidth.cli import main

    try:
        main(list(args))
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _docs(rng, n):
    words = "alpha beta gamma delta épsilon zeta eta theta iota kappa".split()
    return [" ".join(rng.choice(words, size=rng.integers(5, 60))) for _ in range(n)]


def _decode_docs(src):
    """All documents back from a byte-tokenised memmap source, per split."""
    out = {}
    for split in ("train", "val"):
        ids = src.streams[split].read(0, src.n_tokens(split))
        assert ids[-1] == 256
        cuts = np.flatnonzero(ids == 256)
        starts = np.r_[0, cuts[:-1] + 1]
        out[split] = [bytes(ids[a:b].astype(np.uint8)).decode() for a, b in zip(starts, cuts)]
    return out


def test_prepare_text_dir_and_file_roundtrip(tmp_path, capsys):
    rng = np.random.default_rng(0)
    docs = _docs(rng, 60)
    (tmp_path / "corpus").mkdir()
    for i, d in enumerate(docs):
        (tmp_path / "corpus" / f"{i:03d}.txt").write_text(d)
    code, out, err = _dw(
        capsys,
        "data",
        "prepare",
        "--source",
        str(tmp_path / "corpus"),
        "--out",
        str(tmp_path / "d16"),
        "--val-fraction",
        "0.2",
        "--shard-tokens",
        "500",
        "--val-min-tokens",
        "0",
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "d16" / "meta.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == 257 and meta["eot"] == 256
    assert meta["source"]["kind"] == "text_dir" and meta["tokenizer"]["kind"] == "byte"
    src = make_source({"name": "memmap", "path": str(tmp_path / "d16"), "vocab_size": 257}, 64)
    for split in ("train", "val"):
        sh = meta["splits"][split]["shards"]
        assert len(sh) > 1 and all(s["tokens"] <= 500 for s in sh)
        assert src.n_tokens(split) == meta["tokens"][split] == sum(s["tokens"] for s in sh)
        assert sum(os.path.getsize(tmp_path / "d16" / s["file"]) for s in sh) == 2 * meta["tokens"][split]
        assert isinstance(src.streams[split].parts[0], np.memmap)
    back = _decode_docs(src)
    assert sorted(back["train"] + back["val"]) == sorted(docs)  # every document, once, in one split
    assert not set(back["train"]) & set(back["val"]) and len(back["val"]) == meta["docs"]["val"] > 0
    _check_resume(src)
    # windows across shard boundaries read the concatenated stream
    whole = np.concatenate(
        [np.fromfile(tmp_path / "d16" / s["file"], dtype="<u2") for s in meta["splits"]["train"]["shards"]]
    )
    x, y = src.sampler("train", 16, 64, seed=1).next()
    rows = {tuple(whole[i : i + 64]) for i in range(len(whole) - 64)}
    assert all(tuple(r) in rows for r in x)
    # the same command again is a no-op; a different dataset into the same --out is refused
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "d16").iterdir()}
    code, out, _ = _dw(
        capsys,
        "data",
        "prepare",
        "--source",
        str(tmp_path / "corpus"),
        "--out",
        str(tmp_path / "d16"),
        "--val-fraction",
        "0.2",
        "--shard-tokens",
        "500",
        "--val-min-tokens",
        "0",
    )
    assert code == 0 and "already prepared" in out
    assert before == {p.name: p.stat().st_mtime_ns for p in (tmp_path / "d16").iterdir()}
    # a single text file: documents separated by blank lines; uint32 shards
    (tmp_path / "one.txt").write_text("\n\n\n".join(docs) + "\n")
    code, _, err = _dw(
        capsys,
        "data",
        "prepare",
        "--source",
        str(tmp_path / "one.txt"),
        "--out",
        str(tmp_path / "d32"),
        "--val-fraction",
        "0.2",
        "--dtype",
        "uint32",
        "--limit-docs",
        "50",
        "--json",
        "--val-min-tokens",
        "0",
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "d32" / "meta.json").read_text())
    assert meta["dtype"] == "uint32" and meta["docs"]["train"] + meta["docs"]["val"] == 50
    src = make_source({"name": "memmap", "path": str(tmp_path / "d32"), "vocab_size": 257}, 16)
    assert src.streams["train"].parts[0].dtype == np.dtype("<u4")
    back = _decode_docs(src)
    assert sorted(back["train"] + back["val"]) == sorted(docs[:50])
    assert (
        sum(os.path.getsize(tmp_path / "d32" / s["file"]) for s in meta["splits"]["val"]["shards"])
        == 4 * meta["tokens"]["val"]
    )


def test_prepare_saved_hf_dataset_and_tokenizer_json(tmp_path, capsys):
    import datasets
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    rng = np.random.default_rng(1)
    docs = _docs(rng, 80)
    ds = datasets.Dataset.from_dict({"body": docs, "n": list(range(80))})
    datasets.DatasetDict({"train": ds, "test": ds.select(range(10))}).save_to_disk(str(tmp_path / "hf"))
    capsys.readouterr()
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(
        docs,
        trainers.BpeTrainer(
            vocab_size=300,
            special_tokens=["<|endoftext|>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tk.save(str(tmp_path / "tokenizer.json"))
    eot = tk.token_to_id("<|endoftext|>")
    code, _, err = _dw(
        capsys,
        "data",
        "prepare",
        "--source",
        str(tmp_path / "hf"),
        "--tokenizer",
        str(tmp_path / "tokenizer.json"),
        "--text-column",
        "body",
        "--out",
        str(tmp_path / "out"),
        "--val-fraction",
        "0.25",
        "--val-min-tokens",
        "0",
    )
    assert code == 0, err
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["eot"] == eot and meta["vocab_size"] == tk.get_vocab_size() and meta["source"]["kind"] == "hf_disk"
    assert meta["docs"]["train"] + meta["docs"]["val"] == 80
    src = make_source({"name": "memmap", "path": str(tmp_path / "out"), "vocab_size": meta["vocab_size"]}, 32)
    for split in ("train", "val"):
        ids = src.streams[split].read(0, src.n_tokens(split))
        assert src.n_tokens(split) == meta["tokens"][split] and ids.max() < meta["vocab_size"]
        texts = [tk.decode(list(map(int, part))) for part in np.split(ids, np.flatnonzero(ids == eot) + 1)[:-1]]
        assert all(t in docs for t in texts) and len(texts) == meta["docs"][split]
    # the DatasetDict's other split, through the real `dw` executable
    proc = run_dw(
        "data",
        "prepare",
        "--source",
        str(tmp_path / "hf"),
        "--split",
        "test",
        "--text-column",
        "body",
        "--out",
        str(tmp_path / "test"),
        "--val-fraction",
        "0.5",
        "--json",
        "--val-min-tokens",
        "0",
        env={"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    cut = m["val_split"]["moved"]["cut_tokens"] > 0  # a document cut to reach the goal counts in both splits
    assert m["docs"]["train"] + m["docs"]["val"] - cut == 10


# ---------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------


def test_make_source_bad_inputs(tmp_path):
    with pytest.raises(BadInput, match="data.name: 'nope'"):
        make_source({"name": "nope", "vocab_size": 1}, 8)
    with pytest.raises(BadInput, match="does not exist"):
        make_source({"name": "memmap", "path": str(tmp_path / "missing"), "vocab_size": 257}, 8)
    with pytest.raises(
        BadInput, match=r"seq_len 400000 is longer than the data: pydoc train split holds 3\d{5} tokens"
    ):
        make_source(PYDOC, 400_000)
    with pytest.raises(BadInput, match="vocab_size"):
        make_source({**PYDOC, "vocab_size": 300}, 8)
    with pytest.raises(BadInput, match="data.order"):
        make_source({**SYN, "order": 0}, 8)
    stream = TokenStream([np.arange(5), np.arange(5, 9)])
    assert np.array_equal(stream.read(3, 5), np.arange(3, 8))
    # a prepared dataset: vocabulary mismatch and too-short data name both numbers
    d = tmp_path / "d"
    (tmp_path / "a.txt").write_text("\n\n".join(f"document number {i}" for i in range(40)))
    from depthwidth.data.prepare import prepare

    meta = prepare(str(tmp_path / "a.txt"), "byte", d, val_fraction=0.3, val_min_tokens=0)
    with pytest.raises(BadInput, match=r"data.vocab_size 50257 does not match .*vocab_size 257"):
        make_source({"name": "memmap", "path": str(d), "vocab_size": 50257}, 8)
    n_val = meta["tokens"]["val"]
    assert meta["tokens"]["train"] > n_val + 1
    with pytest.raises(
        BadInput, match=rf"seq_len {n_val} is longer than the data: memmap val split holds {n_val} tokens"
    ):
        make_source({"name": "memmap", "path": str(d), "vocab_size": 257}, n_val)
    src = make_source({"name": "memmap", "path": str(d), "vocab_size": 257}, 8)
    with pytest.raises(BadInput, match="seq_len 5000"):
        src.sampler("train", 2, 5000, seed=0)
    with pytest.raises(BadInput, match="split"):
        src.sampler("test", 2, 8, seed=0)


def test_prepare_bad_inputs_exit_2_one_line_nothing_written(tmp_path, capsys):
    (tmp_path / "c.txt").write_text("\n\n".join(f"doc {i} " * 5 for i in range(30)))
    (tmp_path / "blank.txt").write_text("\n  \n\n\t\n")  # no document at all
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("not a dataset")
    code, _, _ = _dw(
        capsys,
        "data",
        "prepare",
        "--source",
        str(tmp_path / "c.txt"),
        "--out",
        str(tmp_path / "other"),
        "--val-fraction",
        "0.3",
    )
    assert code == 0
    cases = [
        (["--source", str(tmp_path / "missing.txt"), "--out", str(tmp_path / "o1")], "missing.txt"),
        (["--source", str(tmp_path / "c.txt"), "--tokenizer", "gpt7", "--out", str(tmp_path / "o2")], "gpt7"),
        (["--source", str(tmp_path / "c.txt"), "--val-fraction", "1.5", "--out", str(tmp_path / "o3")], "1.5"),
        (
            ["--source", str(tmp_path / "c.txt"), "--val-fraction", "0.2", "--out", str(tmp_path / "other")],
            "different dataset",
        ),
        (["--source", str(tmp_path / "c.txt"), "--out", str(tmp_path / "full")], "not empty"),
        (["--source", str(tmp_path / "blank.txt"), "--out", str(tmp_path / "o4")], "split is empty"),
        (
            ["--source", str(tmp_path / "c.txt"), "--val-min-tokens", "-5", "--out", str(tmp_path / "o7")],
            "--val-min-tokens",
        ),
        (
            ["--source", str(tmp_path / "c.txt"), "--shard-tokens", "many", "--out", str(tmp_path / "o5")],
            "--shard-tokens",
        ),
    ]
    listing = sorted(p.name for p in tmp_path.iterdir())
    for args, needle in cases:
        code, out, err = _dw(capsys, "data", "prepare", *args)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in err, (args, err)
        assert sorted(p.name for p in tmp_path.iterdir()) == listing  # no out dir, no staging left behind
    assert sorted(os.listdir(tmp_path / "full")) == ["x"]
    # and through the real executable
    line = assert_bad_input(
        run_dw("data", "prepare", "--source", str(tmp_path / "nope"), "--out", str(tmp_path / "o6"))
    )
    assert "nope" in line and not (tmp_path / "o6").exists()


def test_imports_stay_light():
    code = (
        "import sys, depthwidth.cli, depthwidth.data.source, depthwidth.data.synthetic, depthwidth.data.prepare, "
        "depthwidth.data.tokenizer\n"
        "bad = [m for m in ('torch', 'datasets', 'tokenizers') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    code = (
        "import sys, depthwidth.cli\nassert 'depthwidth.data.prepare' not in sys.modules and 'datasets' not in "
        "sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
