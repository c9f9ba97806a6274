"""`dw data prepare`'s validation split (dw-split/2: the hash rule topped up to a stated minimum)
and analyses that never count more validation tokens than the split holds."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from depthwidth.data.source import make_source
from depthwidth.data.valsplit import DEFAULT_VAL_MIN_TOKENS, doc_hash, goals, plan
from tests.helpers import assert_bad_input, dw, dw_in_process

WORDS = "alpha beta gamma delta épsilon zeta eta theta iota kappa".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """40 short local text files (51,551 byte tokens); at --val-fraction 0.01 the hash rule alone
    puts one of them (920 tokens, 1.8%) into val."""
    d = tmp_path_factory.mktemp("corpus")
    rng = np.random.default_rng(0)
    docs = [" ".join(rng.choice(WORDS, size=rng.integers(20, 400))) for _ in range(40)]
    for i, text in enumerate(docs):
        (d / f"{i:03d}.txt").write_text(text)
    return d, docs


def _prepare(capsys, src, out, *args):
    code, stdout, err = dw_in_process(capsys, "data", "prepare", "--source", str(src), "--out", str(out), *args)
    assert code == 0, err
    return json.loads((out / "meta.json").read_text()), err


def _docs_of(meta, out):
    """Each split's documents (byte tokenizer), decoded."""
    src = make_source({"name": "memmap", "path": str(out), "vocab_size": 257}, 8)
    back = {}
    for split in ("train", "val"):
        ids = src.streams[split].read(0, src.n_tokens(split))
        parts = np.split(ids, np.flatnonzero(ids == 256) + 1)
        assert len(parts[-1]) == 0  # the split ends with an eot
        back[split] = [bytes(p[:-1].astype(np.uint8)).decode() for p in parts[:-1]]
    return back


def test_a_small_corpus_holds_out_at_least_the_minimum_as_whole_lowest_hash_documents(corpus, tmp_path, capsys):
    src, docs = corpus
    meta, err = _prepare(capsys, src, tmp_path / "d", "--val-min-tokens", "5000")
    total = meta["tokens"]["train"] + meta["tokens"]["val"]
    assert total == 51_551 and meta["val_split"]["by_hash"] == {"docs": 1, "tokens": 920}  # the hash rule alone
    assert meta["tokens"]["val"] >= 5000 and meta["val_split"]["warning"] is None and "warning" not in err
    assert meta["val_split"]["moved"]["cut_tokens"] == 0 and meta["settings"]["val_min_tokens"] == 5000
    back = _docs_of(meta, tmp_path / "d")
    assert sorted(back["train"] + back["val"]) == sorted(docs)  # every document once, whole
    assert len(back["val"]) == meta["docs"]["val"] == 4
    # val is the documents below a hash threshold: every val hash under every train hash
    assert max(map(doc_hash, back["val"])) < min(map(doc_hash, back["train"]))
    # fewer whole documents would not do: the last one moved was needed
    last = max(back["val"], key=doc_hash)
    assert meta["tokens"]["val"] - (len(last.encode()) + 1) < 5000
    assert "dw-split/2" in meta["split_rule"] and "val_min_tokens" in meta["split_rule"]


def test_a_corpus_too_small_for_the_minimum_gives_half_of_it_and_one_warning_line(corpus, tmp_path, capsys):
    src, docs = corpus
    meta, err = _prepare(capsys, src, tmp_path / "d")  # the default minimum, 100,000 tokens
    assert meta["settings"]["val_min_tokens"] == DEFAULT_VAL_MIN_TOKENS == 100_000
    total = meta["tokens"]["train"] + meta["tokens"]["val"]
    assert meta["tokens"]["val"] == total // 2 == 25_775
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dw: warning: ") and "Traceback" not in err
    assert "25,775" in lines[0] and "51,551" in lines[0] and "100,000" in lines[0] and "--val-min-tokens" in lines[0]
    assert lines[0] == f"dw: warning: {meta['val_split']['warning']}"
    # one document is cut (its tail in val); every token is still there exactly once
    assert meta["val_split"]["moved"]["cut_tokens"] > 0
    src_ = make_source({"name": "memmap", "path": str(tmp_path / "d"), "vocab_size": 257}, 8)
    got = Counter()
    for split in ("train", "val"):
        got.update(src_.streams[split].read(0, src_.n_tokens(split)).tolist())
    want = Counter()
    for text in docs:
        want.update([*text.encode(), 256])
    assert got == want
    # the same command on the prepared directory: a no-op that says it again
    code, out, err = dw_in_process(capsys, "data", "prepare", "--source", str(src), "--out", str(tmp_path / "d"))
    assert code == 0 and "already prepared" in out and err.startswith("dw: warning: ") and len(err.splitlines()) == 1


def test_the_split_is_reproducible_byte_for_byte_with_shards_rewritten(corpus, tmp_path, capsys):
    src, docs = corpus
    args = ("--val-min-tokens", "12000", "--shard-tokens", "700")
    metas = [_prepare(capsys, src, tmp_path / name, *args)[0] for name in ("a", "b")]
    files = [sorted(p.name for p in (tmp_path / n).iterdir()) for n in ("a", "b")]
    assert files[0] == files[1]
    for name in files[0]:
        if name.endswith(".bin"):
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    strip = lambda m: {k: v for k, v in m.items() if k not in ("created", "seconds")}  # noqa: E731
    assert strip(metas[0]) == strip(metas[1])
    meta = metas[0]
    assert meta["tokens"]["val"] >= 12000 and meta["val_split"]["moved"]["docs"] > 1
    for split in ("train", "val"):  # shards: numbered from 0 without gaps, none empty or over the size
        sh = meta["splits"][split]["shards"]
        assert [s["file"] for s in sh] == [f"{split}_{i:06d}.bin" for i in range(len(sh))]
        assert all(0 < s["tokens"] <= 700 for s in sh) and sum(s["tokens"] for s in sh) == meta["tokens"][split]
    assert len(meta["splits"]["train"]["shards"]) < -(-(51_551 - 920) // 700)  # some ended empty: dropped
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]
    back = _docs_of(meta, tmp_path / "a")  # make_source checked every shard's size
    assert sorted(back["train"] + back["val"]) == sorted(docs)


def test_the_hash_rule_alone_is_kept_when_it_holds_enough(corpus, tmp_path, capsys):
    src, _ = corpus
    meta, err = _prepare(capsys, src, tmp_path / "d", "--val-min-tokens", "0", "--val-fraction", "0.01")
    assert meta["tokens"]["val"] == 920 and meta["val_split"]["moved"]["docs"] == 0 and not err


def test_plan_moves_whole_documents_in_hash_order_duplicates_together_and_cuts_only_past_the_limit():
    h = np.array([50, 10, 30, 30, 20], dtype=np.uint64)
    n = np.array([5, 4, 3, 3, 100], dtype=np.int64)
    # goal 6 from nothing: hash 10 (4 tokens), hash 20 (100 tokens) fits the limit
    assert plan(h, n, 0, 6, 200) == [(1, 4), (4, 100)]
    # ... but past a limit of 50 it is cut: its last 2 tokens reach the goal exactly
    assert plan(h, n, 0, 6, 50) == [(1, 4), (4, 2)]
    # a duplicate (same hash) follows the last document moved
    h2 = np.array([10, 30, 30, 40], dtype=np.uint64)
    assert plan(h2, np.array([4, 3, 3, 9]), 0, 7, 100) == [(0, 4), (1, 3), (2, 3)]
    assert plan(h, n, 10, 6, 50) == []  # the hash rule already holds the goal
    assert goals(51_551, 0.01, 100_000) == (100_000, 25_775, 25_775)
    assert goals(10_000_000, 0.01, 100_000) == (100_000, 100_000, 5_000_000)
    assert goals(10_000_000, 0.05, 100_000) == (500_000, 500_000, 5_000_000)


def test_bad_minimum_exits_2_and_older_datasets_still_load(corpus, tmp_path, capsys):
    src, _ = corpus
    line = assert_bad_input(
        dw("data", "prepare", "--source", str(src), "--out", str(tmp_path / "x"), "--val-min-tokens", "-1")
    )
    assert "--val-min-tokens" in line and not (tmp_path / "x").exists()
    # a dataset written by the previous dw (hash rule only, no val_min_tokens) still loads ...
    meta, _ = _prepare(capsys, src, tmp_path / "old", "--val-min-tokens", "0")
    for key in ("val_split",):
        meta.pop(key)
    meta["settings"].pop("val_min_tokens")
    meta["split_rule"] = "document -> val iff blake2b-64(utf-8 text) / 2^64 < val_fraction; eot after every document"
    (tmp_path / "old" / "meta.json").write_text(json.dumps(meta))
    old = make_source({"name": "memmap", "path": str(tmp_path / "old"), "vocab_size": 257}, 64)
    assert old.n_tokens("val") == 920
    # ... and preparing it again says why it is not left as is
    code, _, err = dw_in_process(capsys, "data", "prepare", "--source", str(src), "--out", str(tmp_path / "old"))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "older dw" in err


# ---------------------------------------------------------------------------- analyses


def test_the_eval_set_never_takes_more_tokens_than_a_small_split_holds(corpus, tmp_path, capsys):
    from depthwidth.measure.inside import eval_set

    src, _ = corpus
    _prepare(capsys, src, tmp_path / "d", "--val-min-tokens", "0")
    s = make_source({"name": "memmap", "path": str(tmp_path / "d"), "vocab_size": 257}, 64)
    n = s.n_tokens("val")  # 920
    x, y = eval_set(s, 64, 8192)
    assert x.size == y.size == 64 * ((n - 1) // 64) <= n  # 14 windows of 64, not 128 overlapping ones
    ids = s.streams["val"].read(0, n)
    starts = [int(np.flatnonzero([(ids[i : i + 64] == row).all() for i in range(n - 64)])[0]) for row in x]
    assert all(b - a >= 64 for a, b in zip(starts, starts[1:]))  # disjoint windows: distinct tokens
    big = eval_set(s, 64, 256)  # a request the split holds is unchanged
    assert big[0].shape == (4, 64)


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
    "train.steps=4",
    "train.log_every=4",
    "probe.every=0",
    "train.analyze_at_end=false",
    "train.eval_batches=1",
]


def test_dw_analyze_on_a_tiny_val_split_reports_at_most_the_split_s_tokens(corpus, tmp_path, capsys):
    from depthwidth.config.compose import compose
    from depthwidth.train import train

    src, _ = corpus
    meta, _ = _prepare(capsys, src, tmp_path / "d", "--val-min-tokens", "0")
    n_val = meta["tokens"]["val"]  # 920 tokens: 28 disjoint windows of 32, fewer than 8,192 tokens
    run = tmp_path / "run"
    s = train(
        compose([*TINY, "data=memmap", f"data.path={tmp_path / 'd'}", "data.vocab_size=257", f"run.dir={run}"]),
        handle_signals=False,
        log=lambda m: None,
    )
    assert s["status"] == "done"
    p = dw("analyze", str(run), "--json")
    assert p.returncode == 0, p.stderr
    e = json.loads(p.stdout)["eval"]
    assert e["tokens"] <= n_val and e["tokens"] == 32 * ((n_val - 1) // 32) == 896 and e["sequences"] == 28
    table = dw("analyze", str(run))
    assert table.returncode == 0, table.stderr
    flat = " ".join(table.stdout.split())
    assert "896 memmap val tokens" in flat and "fewer than the 8,192 asked" in flat
