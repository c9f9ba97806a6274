"""Tokenizers for dw's data: byte-level, a BPE trained locally, any tokenizer.json.

* ``cached_bpe(text, vocab_size, cache_dir)`` trains a byte-level BPE with the
  ``tokenizers`` package (GPT-2 style pre-tokenizer, min_frequency 2, no
  special tokens) and caches ``tokenizer.json`` under
  ``CACHE/tokenizers/bpe<V>-<key>/`` where key hashes the settings and the
  training text; the file is written atomically, so concurrent runs at worst
  train twice.
* ``load_tokenizer("byte" | "cl100k" | "cl100k:PATH" | PATH)`` gives the tokenizer
  ``dw data prepare`` uses (cl100k: the VWT paper's, through tiktoken).  Every document is
  followed by an end-of-text id: for ``byte`` that is
  256 (vocab 257); for a tokenizer.json the first of ``EOT_TOKENS`` it knows,
  otherwise one id past its vocabulary (vocab + 1, noted in meta.json).

The cache directory is ``data.cache_dir`` if set, else ``$DW_CACHE_DIR``, else
``$XDG_CACHE_HOME/dw``, else ``~/.cache/dw``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from depthwidth.core.atomic import write_json, write_text
from depthwidth.core.errors import BadInput

MIN_BPE_VOCAB = 257
MAX_BPE_VOCAB = 65536
BPE_ALGO = "dw-bytelevel-bpe-v1"
EOT_TOKENS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[EOS]")


def cache_dir(explicit: str | os.PathLike | None = None) -> Path:
    if explicit:
        return Path(os.path.expanduser(str(explicit)))
    env = os.environ.get("DW_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "dw" if xdg else Path.home() / ".cache" / "dw"


def bpe_key(text: str, vocab_size: int) -> str:
    settings = {
        "algo": BPE_ALGO,
        "vocab_size": vocab_size,
        "min_frequency": 2,
        "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
    }
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def train_bpe(text: str, vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tk.train_from_iterator([text], trainer=trainer)
    return tk


def cached_bpe(text: str, vocab_size: int, cache: str | os.PathLike | None = None):
    """(Tokenizer, path): the BPE for ``text`` at ``vocab_size``, trained once."""
    from tokenizers import Tokenizer

    d = cache_dir(cache) / "tokenizers" / f"bpe{vocab_size}-{bpe_key(text, vocab_size)}"
    path = d / "tokenizer.json"
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path)), path
        except Exception:
            pass  # unreadable cache entry: train again and replace it
    tk = train_bpe(text, vocab_size)
    write_text(path, tk.to_str())
    write_json(
        d / "settings.json",
        {"algo": BPE_ALGO, "vocab_size": vocab_size, "min_frequency": 2, "learned_vocab": tk.get_vocab_size()},
    )
    return tk, path


# ---------------------------------------------------------------------------
# tokenizers for `dw data prepare`
# ---------------------------------------------------------------------------


class ByteTokenizer:
    """UTF-8 bytes 0..255, end-of-text 256."""

    vocab_size = 257
    eot = 256

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8", errors="replace"), dtype=np.uint8) for t in texts]

    def describe(self) -> dict:
        return {"kind": "byte", "vocab_size": self.vocab_size, "eot": self.eot, "eot_token": None}


class FileTokenizer:
    """A ``tokenizers`` tokenizer.json (e.g. GPT-2's: vocab 50257, eot 50256)."""

    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        try:
            self.tk = Tokenizer.from_file(str(path))
        except Exception as e:
            msg = " ".join(str(e).split())[:200]
            raise BadInput(f"--tokenizer {str(path)!r} is not a tokenizers tokenizer.json ({msg})") from None
        self.tk.no_truncation()
        self.tk.no_padding()
        self.path = path.resolve()
        n = self.tk.get_vocab_size(with_added_tokens=True)
        self.eot_token = next((t for t in EOT_TOKENS if self.tk.token_to_id(t) is not None), None)
        if self.eot_token is None:
            self.eot, self.vocab_size = n, n + 1
        else:
            self.eot, self.vocab_size = int(self.tk.token_to_id(self.eot_token)), n

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.int64) for e in self.tk.encode_batch(texts, add_special_tokens=False)]

    def describe(self) -> dict:
        h = hashlib.sha256(self.path.read_bytes()).hexdigest()
        return {
            "kind": "file",
            "path": str(self.path),
            "sha256": h,
            "vocab_size": self.vocab_size,
            "eot": self.eot,
            "eot_token": self.eot_token,
            "eot_appended": self.eot_token is None,
        }


class Cl100kTokenizer:
    """OpenAI's cl100k_base through ``tiktoken`` (the VWT paper's tokenizer; optional:
    ``pip install 'depthwidth[cl100k]'``).  ``cl100k`` lets tiktoken fetch or reuse its
    cached BPE file; ``cl100k:PATH`` reads a local ``cl100k_base.tiktoken`` (offline
    clusters).  End-of-text is ``<|endoftext|>`` (100257); special-token text inside
    documents is encoded as ordinary text.  The vocabulary is the paper's 100,263
    (configs' vocab_size), which holds every id this encoding produces (<= 100257).
    (The paper's HF conversion of cl100k ends documents with <|eos|> = 100261 instead;
    for training from scratch the choice of id does not matter.)"""

    vocab_size = 100263

    def __init__(self, path: str | None):
        try:
            import tiktoken
        except ImportError:
            raise BadInput("--tokenizer cl100k needs tiktoken (pip install 'depthwidth[cl100k]' or tiktoken)") from None
        self.path = path
        if path is None:
            self.enc = tiktoken.get_encoding("cl100k_base")
        else:
            import tiktoken_ext.openai_public as openai_public
            from tiktoken.load import load_tiktoken_bpe

            p = Path(os.path.expanduser(path))
            if not p.is_file():
                raise BadInput(f"--tokenizer cl100k:{path}: no such file (allowed: a cl100k_base.tiktoken file)")
            ranks = load_tiktoken_bpe(str(p))
            # tiktoken's cl100k constructor hard-wires its download; take its regex and special
            # tokens with the local ranks in place of the fetch.
            fetch, openai_public.load_tiktoken_bpe = openai_public.load_tiktoken_bpe, lambda *a, **k: ranks
            try:
                base = openai_public.cl100k_base()
            finally:
                openai_public.load_tiktoken_bpe = fetch
            self.enc = tiktoken.Encoding(**base)
        self.eot = self.enc.eot_token

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        ids = self.enc.encode_ordinary_batch(texts)
        return [np.asarray(x, dtype=np.int64) for x in ids]

    def describe(self) -> dict:
        d = {"kind": "cl100k", "vocab_size": self.vocab_size, "eot": self.eot, "eot_token": "<|endoftext|>"}
        if self.path is not None:
            d["path"] = str(self.path)
            d["sha256"] = hashlib.sha256(Path(os.path.expanduser(self.path)).read_bytes()).hexdigest()
        return d


def load_tokenizer(spec: str):
    if spec == "byte":
        return ByteTokenizer()
    if spec == "cl100k" or spec.startswith("cl100k:"):
        return Cl100kTokenizer(spec.split(":", 1)[1] if ":" in spec else None)
    p = Path(os.path.expanduser(spec))
    if p.is_dir() and (p / "tokenizer.json").is_file():
        p = p / "tokenizer.json"
    if not p.is_file():
        raise BadInput(
            f"unknown --tokenizer {spec!r} (allowed: byte, cl100k, cl100k:PATH, or the path of a tokenizer.json)"
        )
    return FileTokenizer(p)
