"""What training needs from token data: ``TokenSource`` and its ``Sampler``.

Sampling: a training batch is ``batch_size`` windows of ``seq_len + 1`` tokens
at uniformly random offsets of the split's token stream (windows may cross
shard boundaries), drawn from ``np.random.default_rng([seed, split, step])``.
The sampler's state is therefore just its step counter, and a resumed run
draws exactly the batches the uninterrupted run would have drawn.
``val_batches`` are windows at evenly spaced offsets of the validation split:
fixed, deterministic, and independent of any seed.

``fingerprint`` identifies the data a run trained on (provenance): a hash of
the source's description (``meta``, without machine-local paths) unless the
source sets a stronger one (memmap: meta.json and the shard list).
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

import numpy as np

from depthwidth.core.errors import BadInput, bad
from depthwidth.core.provenance import fingerprint as hash_parts

SPLITS = ("train", "val")
_SPLIT_CODE = {"train": 0, "val": 1}


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
            "source": self.source.name,
            "split": self.split,
            "seed": self.seed,
            "step": self.step,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
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

    def disk_bytes(self) -> int | None:
        """Bytes the prepared data take on disk (every file of ``meta["path"]``); None for a source
        held in memory or generated (pydoc, synthetic)."""
        path = (self.meta or {}).get("path")
        if not path:
            return None
        from pathlib import Path

        return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())

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

    @property
    def fingerprint(self) -> str:
        fp = getattr(self, "_fingerprint", None)
        if fp is None:
            local = ("path", "cache_dir")
            desc = {k: v for k, v in (self.meta or {}).items() if k not in local}
            if isinstance(desc.get("tokenizer"), dict):
                desc["tokenizer"] = {k: v for k, v in desc["tokenizer"].items() if k not in local}
            fp = self._fingerprint = hash_parts(self.name, json.dumps(desc, sort_keys=True, default=str))
        return fp

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} V={self.vocab_size}>"


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
            chunk = self.parts[i][off : off + length - pos]
            out[pos : pos + len(chunk)] = chunk
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
