"""The train/val split of ``dw data prepare``: rule ``dw-split/2`` (meta.json ``split_rule``, ``val_split``).

Every document (its tokens and the end-of-text id after them) has a hash
u = blake2b-64(utf-8 text) / 2^64 in [0, 1).  With T the tokens of all the
documents, f = ``--val-fraction`` and m = ``--val-min-tokens``, validation holds
at least

    goal = max(ceil(f·T), min(m, T // 2))

tokens: a fraction f of the corpus and at least m tokens, except that to reach
m it never takes more than half of the corpus (a corpus of fewer than 2m tokens
gets T // 2 and ``dw data prepare`` says so in one ``warning:`` line).

1. While the documents stream in, a document goes to val iff u < f (dw-split/1,
   the rule before: it does not depend on the order, and duplicates never
   straddle it) and to train otherwise.  Of a train document only (u, length)
   is kept, 16 bytes; its tokens go to the train shards at once.
2. At the end, if val holds fewer than ``goal`` tokens, train documents move to
   val in increasing u (ties: source order), whole, until it holds the goal;
   documents with the u of the last one moved (duplicates) follow it.  The one
   document that would carry val past max(goal, T // 2) is cut instead: only
   its last tokens, as many as the goal still lacks, move (the one document in
   both splits; it happens with few or very long documents).  So val is the
   documents with u below a threshold t ≥ f, plus at most one cut tail; when the
   hash rule alone holds the goal nothing moves and the split is dw-split/1's.
3. The moved tokens are appended to val in source order, then each train shard
   that held some is rewritten without them (one shard at a time: the extra
   disk is one shard); shards left empty are dropped and the rest renumbered.

Memory: 16 bytes per train document (160 MB for ten million documents), never
the corpus; the rewrite reads and writes each affected shard once, which costs
far less than tokenising it.  The same input gives the same shards, byte for byte.
"""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path

import numpy as np

RULE = "dw-split/2"
SPLIT_RULE = (
    f"{RULE}: document -> val iff blake2b-64(utf-8 text) / 2^64 < val_fraction; if val then holds fewer "
    "than goal = max(ceil(val_fraction * T), min(val_min_tokens, T // 2)) tokens (T: all tokens), train "
    "documents move to val in increasing hash order (ties: source order) until it does, the one that would "
    "carry val past max(goal, T // 2) cut (its last tokens to val); eot after every document"
)
DEFAULT_VAL_MIN_TOKENS = 100_000
_CHUNK = 1 << 16  # train-index entries buffered before they become a numpy chunk


def doc_hash(text: str) -> int:
    """blake2b-64 of the document's utf-8 text, as an unsigned integer."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", errors="replace"), digest_size=8).digest(), "little")


def by_hash(h: int, val_fraction: float) -> bool:
    """Step 1: whether a document of hash ``h`` goes to val as it streams in."""
    return h < val_fraction * 2.0**64


class TrainIndex:
    """(hash, tokens) of every train document, in source order, as compact numpy chunks."""

    def __init__(self):
        self._chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self._h: list[int] = []
        self._n: list[int] = []

    def add(self, h: int, n: int) -> None:
        self._h.append(h)
        self._n.append(n)
        if len(self._h) >= _CHUNK:
            self._seal()

    def _seal(self) -> None:
        if self._h:
            self._chunks.append((np.array(self._h, dtype=np.uint64), np.array(self._n, dtype=np.int64)))
            self._h, self._n = [], []

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        self._seal()
        if not self._chunks:
            return np.empty(0, np.uint64), np.empty(0, np.int64)
        return (np.concatenate([c[0] for c in self._chunks]), np.concatenate([c[1] for c in self._chunks]))


def goals(total: int, val_fraction: float, val_min_tokens: int) -> tuple[int, int, int]:
    """(asked, goal, limit): the tokens asked, max(ceil(f·T), m); the goal, with m bounded by
    T // 2; the most val may reach with whole documents, max(goal, T // 2)."""
    part = math.ceil(val_fraction * total)
    goal = max(part, min(val_min_tokens, total // 2))
    return max(part, val_min_tokens), goal, max(goal, total // 2)


def plan(hashes: np.ndarray, lengths: np.ndarray, have: int, goal: int, limit: int) -> list[tuple[int, int]]:
    """Step 2: [(train document index, tokens moved from its end)], in source order."""
    if have >= goal or not len(hashes):
        return []
    order = np.argsort(hashes, kind="stable")  # increasing hash, ties in source order
    cum = have + np.cumsum(lengths[order])
    k = int(np.searchsorted(cum, goal))  # the first document with which val holds the goal
    if k == len(order):  # even all of train does not: everything moves (train ends empty)
        k = len(order) - 1
    if cum[k] <= limit:
        end = k + 1
        while end < len(order) and hashes[order[end]] == hashes[order[end - 1]] and cum[end] <= limit:
            end += 1
        moves = [(int(i), int(lengths[i])) for i in order[:end]]
    else:
        before = int(cum[k - 1]) if k else have
        moves = [(int(i), int(lengths[i])) for i in order[:k]] + [(int(order[k]), goal - before)]
    return sorted(moves)


def _pieces(bounds: np.ndarray, a: int, b: int):
    """(shard, lo, hi) local pieces of the global train range [a, b)."""
    j = int(np.searchsorted(bounds, a, side="right")) - 1
    while a < b:
        hi = min(b, int(bounds[j + 1]))
        if hi > a:
            yield j, a - int(bounds[j]), hi - int(bounds[j])
        a, j = max(a, hi), j + 1


def move(train, val, lengths: np.ndarray, moves: list[tuple[int, int]]) -> None:
    """Step 3: append the moved tokens to ``val`` (a ShardWriter) and rewrite ``train``'s shards without them."""
    if not moves:
        return
    train.flush()
    stage: Path = train.dir
    ends = np.cumsum(lengths)
    ranges = [(int(ends[i]) - take, int(ends[i])) for i, take in moves]
    bounds = np.concatenate([[0], np.cumsum([sh["tokens"] for sh in train.shards])]).astype(np.int64)
    maps = [np.memmap(stage / sh["file"], dtype=train.dtype, mode="r", shape=(sh["tokens"],)) for sh in train.shards]
    cut: dict[int, list[tuple[int, int]]] = {}
    for a, b in ranges:
        first = True
        for j, lo, hi in _pieces(bounds, a, b):
            val.add(maps[j][lo:hi], doc=first)
            first = False
            cut.setdefault(j, []).append((lo, hi))
    del maps
    shards = []
    for j, sh in enumerate(train.shards):
        path, n = stage / sh["file"], sh["tokens"]
        if j in cut:
            n = _rewrite(path, train.dtype, sh["tokens"], cut[j])
        if n == 0:
            path.unlink()
            continue
        name = f"{train.split}_{len(shards):06d}.bin"
        if name != sh["file"]:  # an earlier shard was dropped: its name (and every lower one) is free
            os.rename(path, stage / name)
        shards.append({"file": name, "tokens": int(n)})
    moved = sum(b - a for a, b in ranges)
    whole = sum(1 for i, take in moves if take == lengths[i])
    train.shards, train.tokens, train.docs = shards, train.tokens - moved, train.docs - whole


def _rewrite(path: Path, dtype, n: int, drop: list[tuple[int, int]]) -> int:
    """Rewrite shard ``path`` of ``n`` tokens without the local ranges ``drop`` (sorted); tokens kept."""
    keep, pos = [], 0
    for lo, hi in sorted(drop):
        if lo > pos:
            keep.append((pos, lo))
        pos = max(pos, hi)
    if pos < n:
        keep.append((pos, n))
    kept = sum(hi - lo for lo, hi in keep)
    if kept:
        mm = np.memmap(path, dtype=dtype, mode="r", shape=(n,))
        tmp = path.with_name(f".{path.name}.rewrite")
        with open(tmp, "wb") as f:
            for lo, hi in keep:
                f.write(memoryview(np.ascontiguousarray(mm[lo:hi])))
            f.flush()
            os.fsync(f.fileno())
        del mm
        os.replace(tmp, path)
    return kept


def top_up(train, val, index: TrainIndex, val_fraction: float, val_min_tokens: int) -> dict:
    """Steps 2 and 3 on the two writers once every document is in; returns meta.json's ``val_split``."""
    hashes, lengths = index.arrays()
    have, have_docs = val.tokens + val.fill, val.docs
    total = have + train.tokens + train.fill
    asked, goal, limit = goals(total, val_fraction, val_min_tokens)
    moves = plan(hashes, lengths, have, goal, limit)
    move(train, val, lengths, moves)
    got = val.tokens + val.fill
    cut = [take for i, take in moves if take < lengths[i]]
    warning = None
    if total and got < asked:
        warning = (
            f"the validation split holds {got:,} tokens ({got / total:.1%} of the corpus's {total:,}), fewer "
            f"than the {asked:,} asked (--val-min-tokens {val_min_tokens:,}): the corpus is too small, and "
            "val takes at most half of it to reach the minimum; add documents or lower --val-min-tokens"
        )
    return {
        "rule": RULE,
        "val_fraction": val_fraction,
        "val_min_tokens": val_min_tokens,
        "total_tokens": int(total),
        "asked_tokens": int(asked),
        "goal_tokens": int(goal),
        "by_hash": {"docs": int(have_docs), "tokens": int(have)},
        "moved": {"docs": len(moves), "tokens": int(got - have), "cut_tokens": int(cut[0]) if cut else 0},
        "warning": warning,
    }
