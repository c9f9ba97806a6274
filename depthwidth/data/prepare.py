"""``dw data prepare``: text -> pretokenized ``.bin`` shards + ``meta.json``.

Sources (``--source``):
  * a text file: documents are separated by one or more blank lines;
  * a directory of text files (``*.txt``, ``*.text``, ``*.md``, recursive,
    sorted by path): one document per file;
  * a Hugging Face dataset saved with ``save_to_disk`` (a ``Dataset`` or a
    ``DatasetDict``, ``--split`` picks the split);
  * a hub dataset name (``owner/name``, or ``hf:NAME`` to force it), loaded
    with ``datasets.load_dataset(name, split=..., streaming=True)``.

Each document is tokenised and followed by the end-of-text id.  Split
(valsplit.py, rule dw-split/2): a document goes to ``val`` iff
blake2b-64(text) / 2^64 < val_fraction (so the split does not depend on order
and duplicate documents never straddle it); if val then holds fewer than
max(ceil(val_fraction * T), min(val_min_tokens, T // 2)) of the T tokens, the
lowest-hash train documents move to val until it does (one cut if need be),
and a corpus too small for ``--val-min-tokens`` gets one ``warning:`` line.
Shards are ``{split}_{i:06d}.bin`` of at most ``shard_tokens`` tokens, raw
little-endian uint16 or uint32.

Nothing is half-written: all checks run first, shards and meta.json are
written (atomically, via ``depthwidth.core.atomic``) into a hidden staging
directory next to ``--out``, which is renamed to ``--out`` at the end.  An
``--out`` that already holds the same dataset (same settings) is left as is;
one that holds anything else is refused.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from depthwidth.core.atomic import check_creatable, write_bytes, write_json
from depthwidth.core.errors import BadInput, WorkFailed, bad
from depthwidth.data.base import SPLITS
from depthwidth.data.memmap import DTYPES, MEMMAP_FORMAT
from depthwidth.data.tokenizer import load_tokenizer
from depthwidth.data.valsplit import DEFAULT_VAL_MIN_TOKENS, SPLIT_RULE, TrainIndex, by_hash, doc_hash, top_up

TEXT_SUFFIXES = (".txt", ".text", ".md")
_HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_LOCAL_SUFFIXES = (".txt", ".text", ".md", ".json", ".jsonl", ".bin", ".arrow", ".parquet", ".csv", ".gz")
ENCODE_BATCH = 512  # documents per tokenizer call


# ---------------------------------------------------------------------------
# sources: (description, iterator of documents, total or None)
# ---------------------------------------------------------------------------


def _text_file_docs(path: Path) -> Iterator[str]:
    buf: list[str] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.strip():
                buf.append(line)
            elif buf:
                yield "".join(buf).rstrip("\n")
                buf = []
    if buf:
        yield "".join(buf).rstrip("\n")


def _dir_docs(files: list[Path]) -> Iterator[str]:
    for f in files:
        yield f.read_text(encoding="utf-8", errors="replace")


def _is_saved_hf(p: Path) -> bool:
    return (p / "dataset_dict.json").is_file() or ((p / "state.json").is_file() and (p / "dataset_info.json").is_file())


def _hf_docs(ds, column: str) -> Iterator[str]:
    for batch in ds.iter(batch_size=1000):
        yield from batch[column]


def open_source(source: str, text_column: str, split: str) -> tuple[dict, Iterator[str], int | None]:
    """Validate ``source`` and return (description, documents, number of documents if known)."""
    p = Path(os.path.expanduser(source))
    if p.is_file():
        st = p.stat()
        desc = {"kind": "text_file", "path": str(p.resolve()), "bytes": st.st_size}
        return desc, _text_file_docs(p), None
    if p.is_dir():
        if _is_saved_hf(p):
            return _open_saved_hf(p, text_column, split)
        files = sorted(
            f
            for f in p.rglob("*")
            if f.is_file()
            and f.suffix.lower() in TEXT_SUFFIXES
            and not any(part.startswith(".") for part in f.relative_to(p).parts)
        )
        if not files:
            raise BadInput(
                f"--source {source!r} is a directory without text files ({', '.join(TEXT_SUFFIXES)}) "
                "and not a saved Hugging Face dataset"
            )
        desc = {
            "kind": "text_dir",
            "path": str(p.resolve()),
            "files": len(files),
            "bytes": sum(f.stat().st_size for f in files),
        }
        return desc, _dir_docs(files), len(files)
    name = source[3:] if source.startswith("hf:") else source
    if source.startswith("hf:") or (_HUB_NAME.match(source) and not source.lower().endswith(_LOCAL_SUFFIXES)):
        return _open_hub(name, text_column, split)
    raise BadInput(
        f"--source {source!r} does not exist (allowed: a text file, a directory of text files, "
        "a saved Hugging Face dataset, or a hub dataset name)"
    )


def _column_check(columns, text_column: str, where: str) -> None:
    if columns is not None and text_column not in columns:
        raise BadInput(f"--text-column {text_column!r} not in {where} (columns: {', '.join(map(str, columns))})")


def _open_saved_hf(p: Path, text_column: str, split: str):
    import datasets

    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as e:
        raise BadInput(f"--source {str(p)!r}: cannot load saved dataset ({' '.join(str(e).split())[:200]})") from None
    if isinstance(ds, datasets.DatasetDict):
        if split not in ds:
            raise bad("--split", split, ", ".join(ds.keys()))
        ds = ds[split]
    _column_check(ds.column_names, text_column, f"dataset {p}")
    ds = ds.select_columns([text_column])
    desc = {
        "kind": "hf_disk",
        "path": str(p.resolve()),
        "split": split,
        "text_column": text_column,
        "fingerprint": getattr(ds, "_fingerprint", None),
        "rows": len(ds),
    }
    return desc, _hf_docs(ds, text_column), len(ds)


def _open_hub(name: str, text_column: str, split: str):
    import datasets

    try:
        ds = datasets.load_dataset(name, split=split, streaming=True)
        it = iter(ds)
        first = next(it)
    except StopIteration:
        raise BadInput(f"hub dataset {name!r} split {split!r} is empty") from None
    except (FileNotFoundError, ValueError) as e:  # DatasetNotFoundError is a FileNotFoundError; bad split: ValueError
        msg = " ".join(str(e).split())[:240]
        raise BadInput(f"--source {name!r} is neither an existing path nor a loadable hub dataset ({msg})") from None
    except Exception as e:
        raise WorkFailed(f"could not stream hub dataset {name!r}: {' '.join(str(e).split())[:240]}") from None
    _column_check(list(first.keys()), text_column, f"hub dataset {name}")

    def docs():
        yield first[text_column]
        for ex in it:
            yield ex[text_column]

    return {"kind": "hf_hub", "name": name, "split": split, "text_column": text_column}, docs(), None


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------


class ShardWriter:
    """Buffers one split's tokens and writes full shards atomically."""

    def __init__(self, directory: Path, split: str, dtype, shard_tokens: int):
        self.dir, self.split, self.dtype = directory, split, dtype
        self.buf = np.empty(min(shard_tokens, 1 << 20), dtype=dtype)
        self.cap, self.fill = shard_tokens, 0
        self.shards: list[dict] = []
        self.tokens = self.docs = 0

    def add(self, ids: np.ndarray, doc: bool = True) -> None:
        """Append ``ids``; ``doc``: they begin a document (False: they continue the last one)."""
        self.docs += bool(doc)
        pos = 0
        while pos < len(ids):
            if self.fill == len(self.buf) and len(self.buf) < self.cap:  # grow up to one shard
                self.buf = np.concatenate(
                    [self.buf, np.empty(min(len(self.buf), self.cap - len(self.buf)), self.dtype)]
                )
            take = min(len(ids) - pos, len(self.buf) - self.fill)
            self.buf[self.fill : self.fill + take] = ids[pos : pos + take]
            self.fill += take
            pos += take
            if self.fill == self.cap:
                self.flush()

    def flush(self) -> None:
        if not self.fill:
            return
        name = f"{self.split}_{len(self.shards):06d}.bin"
        write_bytes(self.dir / name, memoryview(np.ascontiguousarray(self.buf[: self.fill])))
        self.shards.append({"file": name, "tokens": int(self.fill)})
        self.tokens += self.fill
        self.fill = 0


def _batched(it: Iterable[str], n: int) -> Iterator[list[str]]:
    batch = []
    for d in it:
        batch.append(d if isinstance(d, str) else ("" if d is None else str(d)))
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def _check_out(out: Path, settings: dict) -> dict | None:
    """None if ``out`` may be written; the existing meta if it already holds this dataset."""
    import json

    if not out.exists():
        return None
    if not out.is_dir():
        raise BadInput(f"--out {str(out)!r} exists and is not a directory")
    mp = out / "meta.json"
    if mp.is_file():
        try:
            meta = json.loads(mp.read_text())
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict) and meta.get("settings") == settings:
            return meta
        older = meta.get("settings") if isinstance(meta, dict) else None
        if (
            isinstance(older, dict)
            and "val_min_tokens" not in older
            and older == {k: v for k, v in settings.items() if k != "val_min_tokens"}
        ):
            raise BadInput(
                f"--out {str(out)!r} holds this dataset split by an older dw (no --val-min-tokens: "
                f"{meta.get('split_rule', 'hash rule only')}); remove it or choose another --out to "
                "prepare it with the current split rule"
            )
        src = meta.get("source") if isinstance(meta, dict) else None
        what = (
            f"{src.get('kind')} {src.get('path') or src.get('name')}"
            if isinstance(src, dict)
            else "an unreadable meta.json"
        )
        raise BadInput(
            f"--out {str(out)!r} already holds a different dataset ({what}); choose another --out or remove it"
        )
    if any(out.iterdir()):
        raise BadInput(f"--out {str(out)!r} is not empty and holds no dw dataset; choose an empty or new directory")
    return None


def prepare(
    source: str,
    tokenizer: str,
    out: str | os.PathLike,
    text_column: str = "text",
    split: str = "train",
    val_fraction: float = 0.01,
    shard_tokens: int = 1 << 26,
    limit_docs: int | None = None,
    dtype: str = "auto",
    progress: Callable[..., Any] | None = None,
    val_min_tokens: int | None = DEFAULT_VAL_MIN_TOKENS,
) -> dict:
    """Tokenise ``source`` into ``out``; returns the meta.json written (``existing: True`` if already there).
    ``val_min_tokens`` None: the default (data/valsplit.py).

    ``progress(docs, tokens, total_docs)`` is called after every batch of documents.  A split
    smaller than asked (a small corpus) is meta.json's ``val_split.warning`` (None otherwise).
    """
    if isinstance(val_fraction, bool) or not 0.0 < val_fraction < 1.0:
        raise bad("--val-fraction", val_fraction, "a number in (0, 1)")
    val_min_tokens = DEFAULT_VAL_MIN_TOKENS if val_min_tokens is None else val_min_tokens
    if isinstance(val_min_tokens, bool) or not isinstance(val_min_tokens, (int, np.integer)) or val_min_tokens < 0:
        raise bad("--val-min-tokens", val_min_tokens, "an integer >= 0")
    val_min_tokens = int(val_min_tokens)
    if shard_tokens < 1:
        raise bad("--shard-tokens", shard_tokens, "an integer >= 1")
    if limit_docs is not None and limit_docs < 1:
        raise bad("--limit-docs", limit_docs, "an integer >= 1")
    if dtype not in ("auto", *DTYPES):
        raise bad("--dtype", dtype, "auto, uint16, uint32")
    tok = load_tokenizer(tokenizer)
    if dtype == "auto":
        dtype = "uint16" if tok.vocab_size <= 1 << 16 else "uint32"
    if tok.vocab_size > np.iinfo(DTYPES[dtype]).max + 1:
        raise BadInput(f"--dtype {dtype} cannot hold vocabulary {tok.vocab_size} (allowed: uint32)")
    out = Path(os.path.expanduser(str(out)))
    check_creatable("--out", out)  # /proc/nope: bad input before the source is read
    desc, docs, total = open_source(source, text_column, split)
    tdesc = tok.describe()
    settings = {
        "source": desc,
        "tokenizer": {k: tdesc.get(k) for k in ("kind", "sha256", "vocab_size", "eot")},
        "val_fraction": val_fraction,
        "val_min_tokens": val_min_tokens,
        "limit_docs": limit_docs,
        "dtype": dtype,
        "shard_tokens": shard_tokens,
    }
    existing = _check_out(out, settings)
    if existing is not None:
        return {**existing, "existing": True}
    if limit_docs is not None:
        total = min(total, limit_docs) if total is not None else limit_docs

    out.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(stage, 0o777 & ~umask)  # mkdtemp/mkstemp make private 0700/0600 entries
        t0 = time.time()
        writers = {s: ShardWriter(stage, s, DTYPES[dtype], shard_tokens) for s in SPLITS}
        eot = np.array([tok.eot], dtype=np.int64)
        index = TrainIndex()  # (hash, tokens) of each train document: the top-up's candidates
        n_docs = 0
        for batch in _batched(docs, ENCODE_BATCH):
            if limit_docs is not None:
                batch = batch[: limit_docs - n_docs]
            n_docs += len(batch)
            batch = [d for d in batch if d.strip()]  # empty documents are skipped
            for text, ids in zip(batch, tok.encode_batch(batch)):
                h = doc_hash(text)
                if by_hash(h, val_fraction):
                    writers["val"].add(np.concatenate([ids, eot]))
                else:
                    writers["train"].add(np.concatenate([ids, eot]))
                    index.add(h, len(ids) + 1)
            if progress:
                progress(n_docs, sum(w.tokens + w.fill for w in writers.values()), total)
            if limit_docs is not None and n_docs >= limit_docs:
                break
        val_split = top_up(writers["train"], writers["val"], index, val_fraction, val_min_tokens)
        for w in writers.values():
            w.flush()
        for s, w in writers.items():
            if w.tokens == 0:
                raise BadInput(
                    f"the {s} split is empty ({n_docs} documents, {val_split['total_tokens']:,} tokens, "
                    f"--val-fraction {val_fraction}); give more documents or change --val-fraction"
                )
        meta = {
            "format": MEMMAP_FORMAT,
            "vocab_size": tok.vocab_size,
            "dtype": dtype,
            "eot": tok.eot,
            "tokenizer": tdesc,
            "source": desc,
            "settings": settings,
            "tokens": {s: w.tokens for s, w in writers.items()},
            "docs": {s: w.docs for s, w in writers.items()},
            "split_rule": SPLIT_RULE,
            "val_split": val_split,
            "splits": {s: {"tokens": w.tokens, "docs": w.docs, "shards": w.shards} for s, w in writers.items()},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seconds": round(time.time() - t0, 3),
            "python": sys.version.split()[0],
        }
        write_json(stage / "meta.json", meta)
        for f in stage.iterdir():
            os.chmod(f, 0o666 & ~umask)
        if out.exists():  # empty directory (checked above)
            out.rmdir()
        os.rename(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return meta
