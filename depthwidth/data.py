"""Token sources for training (numpy only: training converts to tensors).

``make_source(data_cfg, seq_len)`` turns the Hydra ``data`` group into a
``TokenSource``; the training loop draws ``(x, y)`` int64 batches from a
``Sampler`` and evaluates on ``val_batches``.

Sources (``data.name``):

``pydoc``      the English reference text shipped in every CPython
               (``pydoc_data.topics``), byte-level (vocab 256) or BPE trained
               locally (``tokenizer: bpe``, cached, see ``depthwidth.tokenizer``).
               Split: topics in sorted order are cut into paragraphs (blank-line
               separated); exact duplicate paragraphs are dropped (pydoc repeats
               whole sections across topics); the last ``val_fraction`` of the
               characters, at a paragraph boundary, is validation.  The two
               splits are tokenised separately, so no token straddles them.
``synthetic``  an order-k Markov chain with known entropy (``depthwidth.synthetic``).
``memmap``     pretokenized ``.bin`` shards + ``meta.json`` written by
               ``dw data prepare`` (``depthwidth.prepare``), read with np.memmap.

Sampling: a training batch is ``batch_size`` windows of ``seq_len + 1`` tokens
at uniformly random offsets of the split's token stream (windows may cross
shard boundaries), drawn from ``np.random.default_rng([seed, split, step])``.
The sampler's state is therefore just its step counter, and a resumed run
draws exactly the batches the uninterrupted run would have drawn.
``val_batches`` are windows at evenly spaced offsets of the validation split:
fixed, deterministic, and independent of any seed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from depthwidth.errors import BadInput, bad

SPLITS = ("train", "val")
_SPLIT_CODE = {"train": 0, "val": 1}
SOURCES = ("pydoc", "synthetic", "memmap")
MEMMAP_FORMAT = "dw-tokens-v1"
DTYPES = {"uint16": np.dtype("<u2"), "uint32": np.dtype("<u4")}  # shards are little-endian


# ---------------------------------------------------------------------------
# interface
# ---------------------------------------------------------------------------


class Sampler:
    """Random training windows; state = step counter (JSON-able)."""

    def __init__(self, source: "TokenSource", split: str, batch_size: int, seq_len: int, seed: int):
        source._check_request(split, batch_size, seq_len)
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
            raise bad("seed", seed, "an integer >= 0")
        self.source, self.split = source, split
        self.batch_size, self.seq_len, self.seed = int(batch_size), int(seq_len), int(seed)
        self.step = 0

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([self.seed, _SPLIT_CODE[self.split], self.step])
        w = self.source._random_windows(self.split, rng, self.batch_size, self.seq_len)
        self.step += 1
        return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:])

    def state_dict(self) -> dict:
        return {
            "source": self.source.name, "split": self.split, "seed": self.seed, "step": self.step,
            "batch_size": self.batch_size, "seq_len": self.seq_len,
        }

    def load_state_dict(self, d: Mapping) -> None:
        """Continue the saved stream (the saved seed wins; shapes must agree)."""
        mine = self.state_dict()
        for key in ("source", "split", "batch_size", "seq_len"):
            if key in d and d[key] != mine[key]:
                raise BadInput(f"sampler state does not fit: saved {key} {d[key]!r}, this sampler has {mine[key]!r}")
        step, seed = d.get("step"), d.get("seed", self.seed)
        for key, v in (("step", step), ("seed", seed)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise bad(f"sampler state {key}", v, "an integer >= 0")
        self.step, self.seed = step, seed


class TokenSource:
    """What training needs from data.  Subclasses fill the two ``_*windows`` hooks."""

    name: str = ""
    vocab_size: int = 0
    bayes_loss: float | None = None  # nats/token; None if unknown
    meta: dict

    def n_tokens(self, split: str) -> int:
        raise NotImplementedError

    def sampler(self, split: str, batch_size: int, seq_len: int, seed: int) -> Sampler:
        return Sampler(self, split, batch_size, seq_len, seed)

    def val_batches(self, batch_size: int, seq_len: int, n_batches: int) -> list[tuple[np.ndarray, np.ndarray]]:
        self._check_request("val", batch_size, seq_len)
        if not isinstance(n_batches, (int, np.integer)) or n_batches < 1:
            raise bad("n_batches", n_batches, "an integer >= 1")
        w = self._fixed_windows(int(batch_size) * int(n_batches), int(seq_len))
        w = w.reshape(int(n_batches), int(batch_size), int(seq_len) + 1)
        return [(np.ascontiguousarray(b[:, :-1]), np.ascontiguousarray(b[:, 1:])) for b in w]

    # -- hooks ---------------------------------------------------------------
    def _random_windows(self, split: str, rng: np.random.Generator, batch: int, seq_len: int) -> np.ndarray:
        raise NotImplementedError

    def _fixed_windows(self, count: int, seq_len: int) -> np.ndarray:
        raise NotImplementedError

    def _check_request(self, split: str, batch_size: int, seq_len: int) -> None:
        if split not in SPLITS:
            raise bad("split", split, "train, val")
        for name, v in (("batch_size", batch_size), ("seq_len", seq_len)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise bad(name, v, "an integer >= 1")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} V={self.vocab_size}>"


# ---------------------------------------------------------------------------
# finite token streams (pydoc, memmap)
# ---------------------------------------------------------------------------


class TokenStream:
    """Several 1-D integer arrays (in memory or memmapped) read as one stream."""

    def __init__(self, parts: Sequence[np.ndarray]):
        self.parts = [p for p in parts if len(p)]
        self.ends = np.cumsum([len(p) for p in self.parts], dtype=np.int64)
        self.n = int(self.ends[-1]) if len(self.ends) else 0

    def read(self, start: int, length: int) -> np.ndarray:
        if start < 0 or start + length > self.n:
            raise IndexError(f"read [{start}, {start + length}) outside stream of {self.n} tokens")
        out = np.empty(length, dtype=np.int64)
        i = int(np.searchsorted(self.ends, start, side="right"))
        off = start - (int(self.ends[i - 1]) if i else 0)
        pos = 0
        while pos < length:
            chunk = self.parts[i][off: off + length - pos]
            out[pos: pos + len(chunk)] = chunk
            pos += len(chunk)
            i, off = i + 1, 0
        return out

    def windows(self, starts: np.ndarray, length: int) -> np.ndarray:
        if len(self.parts) == 1:  # fast path: one fancy-indexing read
            idx = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(length, dtype=np.int64)
            return np.asarray(self.parts[0][idx], dtype=np.int64)
        return np.stack([self.read(int(s), length) for s in starts]) if len(starts) else np.empty((0, length), np.int64)


class StreamSource(TokenSource):
    """A source backed by one finite token stream per split."""

    def __init__(self, name: str, vocab_size: int, streams: Mapping[str, TokenStream], meta: dict, seq_len: int):
        self.name, self.vocab_size, self.bayes_loss = name, int(vocab_size), None
        self.streams = dict(streams)
        self.meta = meta
        self._check_request("train", 1, seq_len)  # also checks that both splits hold a window

    def n_tokens(self, split: str) -> int:
        if split not in SPLITS:
            raise bad("split", split, "train, val")
        return self.streams[split].n

    def _check_len(self, seq_len: int) -> None:
        for split in SPLITS:
            n = self.streams[split].n
            if seq_len + 1 > n:
                raise BadInput(
                    f"seq_len {seq_len} is longer than the data: {self.name} {split} split holds {n} tokens "
                    f"(a window needs seq_len + 1 = {seq_len + 1})"
                )

    def _check_request(self, split, batch_size, seq_len) -> None:
        super()._check_request(split, batch_size, seq_len)
        if hasattr(self, "streams"):
            self._check_len(int(seq_len))

    def _random_windows(self, split, rng, batch, seq_len):
        st = self.streams[split]
        starts = rng.integers(0, st.n - seq_len, size=batch)  # start <= n - (seq_len + 1)
        return st.windows(starts, seq_len + 1)

    def _fixed_windows(self, count, seq_len):
        st = self.streams["val"]
        last = st.n - seq_len - 1
        starts = (np.arange(count, dtype=np.int64) * last) // max(count - 1, 1) if count > 1 else np.zeros(1, np.int64)
        return st.windows(starts, seq_len + 1)


# ---------------------------------------------------------------------------
# pydoc
# ---------------------------------------------------------------------------


def pydoc_split(val_fraction: float) -> tuple[str, str, dict]:
    """(train_text, val_text, info): the deduplicated pydoc paragraphs, tail held out."""
    from pydoc_data.topics import topics

    paras: list[str] = []
    seen: set[str] = set()
    for key in sorted(topics):
        for p in re.split(r"\n[ \t]*\n", topics[key]):
            p = p.strip("\n")
            if p.strip() and p not in seen:
                seen.add(p)
                paras.append(p)
    total = sum(len(p) for p in paras)
    cut, acc = len(paras), 0
    while cut > 1 and acc < val_fraction * total:
        cut -= 1
        acc += len(paras[cut])
    train, val = "\n\n".join(paras[:cut]) + "\n", "\n\n".join(paras[cut:]) + "\n"
    info = {
        "python": sys.version.split()[0],
        "topics": len(topics),
        "paragraphs": {"train": cut, "val": len(paras) - cut},
        "chars": {"train": len(train), "val": len(val)},
        "text_sha256": hashlib.sha256((train + "\x00" + val).encode()).hexdigest(),
        "split_rule": "topics sorted, cut into blank-line paragraphs, exact duplicates dropped; "
        "the last val_fraction of characters (at a paragraph boundary) is val",
    }
    return train, val, info


def _pydoc_source(cfg: Mapping, seq_len: int) -> StreamSource:
    tok = cfg.get("tokenizer", "byte")
    vocab = cfg.get("vocab_size")
    vf = _fraction(cfg.get("val_fraction", 0.1), "data.val_fraction", hi=0.5)
    train, val, info = pydoc_split(vf)
    if tok == "byte":
        if vocab != 256:
            raise bad("data.vocab_size", vocab, "256 for data=pydoc with tokenizer=byte")
        ids = {s: np.frombuffer(t.encode("utf-8"), dtype=np.uint8) for s, t in (("train", train), ("val", val))}
        tmeta: dict[str, Any] = {"kind": "byte"}
    elif tok == "bpe":
        from depthwidth.tokenizer import MAX_BPE_VOCAB, MIN_BPE_VOCAB, cached_bpe

        if not isinstance(vocab, int) or not MIN_BPE_VOCAB <= vocab <= MAX_BPE_VOCAB:
            raise bad("data.vocab_size", vocab, f"an integer in [{MIN_BPE_VOCAB}, {MAX_BPE_VOCAB}] for tokenizer=bpe")
        tk, path = cached_bpe(train, vocab, cfg.get("cache_dir"))
        ids = {s: np.asarray(tk.encode(t).ids, dtype=np.uint16) for s, t in (("train", train), ("val", val))}
        tmeta = {"kind": "bpe", "path": str(path), "trained_on": "pydoc train split",
                 "learned_vocab": tk.get_vocab_size()}
    else:
        raise bad("data.tokenizer", tok, "byte, bpe")
    meta = {
        "source": "pydoc", "tokenizer": tmeta, "vocab_size": vocab, "val_fraction": vf, **info,
        "tokens": {s: int(len(a)) for s, a in ids.items()},
    }
    return StreamSource("pydoc", vocab, {s: TokenStream([a]) for s, a in ids.items()}, meta, seq_len)


# ---------------------------------------------------------------------------
# memmap
# ---------------------------------------------------------------------------


def read_meta(path: str | os.PathLike) -> dict:
    """meta.json of a prepared dataset directory; BadInput if it is not one."""
    d = Path(path)
    mp = d / "meta.json"
    if not d.is_dir():
        raise BadInput(f"data path {str(path)!r} is not a directory (prepare one with: dw data prepare --out DIR)")
    if not mp.is_file():
        raise BadInput(f"data path {str(path)!r} holds no meta.json (prepare one with: dw data prepare --out DIR)")
    try:
        meta = json.loads(mp.read_text())
    except (OSError, ValueError) as e:
        raise BadInput(f"unreadable {mp}: {' '.join(str(e).split())}") from None
    if not isinstance(meta, dict) or meta.get("format") != MEMMAP_FORMAT:
        raise BadInput(f"{mp} is not a dw token dataset (format {MEMMAP_FORMAT!r} expected)")
    return meta


def _memmap_source(cfg: Mapping, seq_len: int) -> StreamSource:
    raw = cfg.get("path")
    if not raw:
        raise bad("data.path", raw, "the directory written by dw data prepare")
    d = Path(os.path.expandvars(os.path.expanduser(str(raw))))
    if not d.exists():
        raise BadInput(f"data.path {str(raw)!r} does not exist (prepare it with: dw data prepare --out {raw})")
    meta = read_meta(d)
    vocab = cfg.get("vocab_size")
    if vocab != meta.get("vocab_size"):
        raise BadInput(f"data.vocab_size {vocab!r} does not match {d / 'meta.json'} vocab_size {meta.get('vocab_size')!r}")
    dtype = DTYPES.get(meta.get("dtype"))
    if dtype is None:
        raise BadInput(f"{d / 'meta.json'} dtype {meta.get('dtype')!r} not supported (allowed: uint16, uint32)")
    streams = {}
    try:
        shards = {split: [(d / sh["file"], int(sh["tokens"])) for sh in meta["splits"][split]["shards"]] for split in SPLITS}
    except (KeyError, TypeError, ValueError):
        raise BadInput(f"{d / 'meta.json'} is malformed: no splits.train/val.shards list") from None
    for split in SPLITS:
        parts = []
        for f, n in shards[split]:
            size = f.stat().st_size if f.is_file() else -1
            if size != n * dtype.itemsize:
                raise BadInput(f"shard {f} has {size} bytes, meta.json says {n} tokens of {meta['dtype']}")
            if n:
                parts.append(np.memmap(f, dtype=dtype, mode="r", shape=(n,)))
        streams[split] = TokenStream(parts)
    out_meta = {k: v for k, v in meta.items() if k != "splits"}
    out_meta.update(path=str(d.resolve()), tokens={s: streams[s].n for s in SPLITS})
    return StreamSource("memmap", vocab, streams, out_meta, seq_len)


# ---------------------------------------------------------------------------
# entry point
# ---------------------------------------------------------------------------


def make_source(data_cfg: Mapping, seq_len: int) -> TokenSource:
    """The Hydra ``data`` group (as a dict or DictConfig) -> a TokenSource."""
    if not isinstance(data_cfg, Mapping):
        try:
            from omegaconf import OmegaConf

            data_cfg = OmegaConf.to_container(data_cfg, resolve=True)
        except Exception:
            raise bad("data config", type(data_cfg).__name__, "a mapping") from None
    name = data_cfg.get("name")
    if not isinstance(seq_len, (int, np.integer)) or isinstance(seq_len, bool) or seq_len < 1:
        raise bad("seq_len", seq_len, "an integer >= 1")
    if "vocab_size" not in data_cfg:
        raise BadInput(f"data config {name!r} has no vocab_size key (every data config needs one)")
    if name == "pydoc":
        return _pydoc_source(data_cfg, int(seq_len))
    if name == "memmap":
        return _memmap_source(data_cfg, int(seq_len))
    if name == "synthetic":
        from depthwidth.synthetic import synthetic_source

        return synthetic_source(data_cfg, int(seq_len))
    raise bad("data.name", name, ", ".join(SOURCES))


def _fraction(v, name: str, hi: float = 1.0) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 < float(v) <= hi:
        raise bad(name, v, f"a number in (0, {hi}]")
    return float(v)
