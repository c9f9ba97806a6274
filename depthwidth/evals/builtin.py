"""Built-in tasks: lm-eval tasks that dw writes itself from the run's own held-out text (offline).

    dirs = task_dirs(["dw_heldout_cloze", "hellaswag"], run_cfg, text)   # -> include paths for the harness

The harness's standard tasks download their datasets; a built-in is a task YAML
plus a JSONL of documents that dw writes from the validation split of the run's
data source, so ``dw eval RUN --tasks dw_heldout_cloze`` works with no internet
(this machine, CI, ``make demo``).  They are written into the data cache
(``data.cache_dir``, else $DW_CACHE_DIR or ~/.cache/dw: where the pydoc BPE is
cached) under ``evals/NAME-KEY/``, KEY a hash of what fixes the items: the data
source's fingerprint, ``train.seq_len``, the item count, the seed and
``VERSION``.  Every run of a sweep that shares those settings therefore reads
the same file, and its accuracies are comparable; runs on other data or
another seq_len get their own.  The directory becomes one more include path.

``dw_heldout_cloze`` (multiple choice; acc, acc_norm; chance 1/4).  Windows of
C + K tokens at evenly spaced offsets of the validation split (the way
``measure.inside.eval_set`` takes the held-out loss's windows, disjoint): the
first C tokens are the context, the last K the true continuation.  The items
are ``ITEMS`` of them drawn with ``SEED`` (in that drawn order, so a ``--limit``
prefix is a uniform sample); each gets three distractors, the continuations
of three other items, and its continuation's place among the four choices,
drawn from the same generator.  Sizes from seq_len, the model's context:

    K = clamp(seq_len // 16, 2, 8)              continuation tokens
    C = min(seq_len - K - seq_len // 8, 128)    context tokens

A choice's log-likelihood sums over its K tokens; the context mostly informs
the first of them, the rest is the choice's own likelihood, whichever context
precedes it, and in a small model that dominates: on the demo's 16 runs (bytes,
seq_len 64) 16-byte continuations gave accuracies of 0.27-0.35 from the worst
model to the best, 4-byte ones 0.25-0.56.  So K is short (a word or two), and
the context fills the rest of the training window (the model's use of a long
context counts; 128 tokens bound the cost at long seq_len).  The seq_len // 8
left over is room for what the harness does at the join: it encodes context +
choice as one text, so a distractor after another item's context may take a
token or two more than K (BPE merges across the join), and it moves a
context's trailing spaces into the choice.  Every (context, choice) is checked
to encode in at most seq_len tokens, so no window is cut (the demo: 52-byte
contexts, 4-byte continuations).  The text is the run's own tokenizer's
decoding of the tokens, kept only where it encodes back to exactly those
tokens (context alone and context + continuation: the harness then scores the
stream's own tokens), so a window that cuts a UTF-8 character, splits a BPE
merge or holds an end-of-text (a document boundary) is not an item, nor is one
whose context or continuation is blank.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

import numpy as np
import yaml

from depthwidth.core.atomic import write_jsonl, write_text
from depthwidth.core.errors import BadInput

CLOZE = "dw_heldout_cloze"
BUILTIN = (CLOZE,)  # the task names dw writes itself
VERSION = 1  # of the construction rule below: a change to it must change the items' cache key
ITEMS = 1000  # items asked; a small validation split gives what it holds (pydoc bytes at seq_len 64: ~620)
SEED = 0
CHOICES = 4
SPARE = 2  # candidate windows per item asked: some are not items (a cut character, a document boundary)
MIN_CONTINUATION, MAX_CONTINUATION, MAX_CONTEXT = 2, 8, 128


def sizes(seq_len: int) -> tuple[int, int]:
    """(context tokens C, continuation tokens K) for a model of context ``seq_len`` (module docstring)."""
    k = min(max(seq_len // 16, MIN_CONTINUATION), MAX_CONTINUATION)
    c = min(seq_len - k - seq_len // 8, MAX_CONTEXT)
    if c < 1:
        raise BadInput(f"train.seq_len {seq_len} is too short for {CLOZE} (a context and a continuation: seq_len >= 3)")
    return c, k


def task_dirs(tasks: list[str], run_cfg, text) -> list[Path]:
    """The include paths of the built-ins among ``tasks``, each written (once) for this run's
    data and ``train.seq_len`` with its text tokenizer ``text`` (evals/tokenizer.py)."""
    return [heldout_cloze(run_cfg.data, int(run_cfg.train.seq_len), text) for t in tasks if t == CLOZE]


def heldout_cloze(data: Mapping, seq_len: int, text, items: int = ITEMS) -> Path:
    """The directory holding ``dw_heldout_cloze.yaml`` and its documents for this data and seq_len."""
    from depthwidth.data.source import make_source
    from depthwidth.data.tokenizer import cache_dir

    source = make_source(data, seq_len)
    desc = {
        "task": CLOZE,
        "version": VERSION,
        "data": source.fingerprint,
        "seq_len": seq_len,
        "items": items,
        "seed": SEED,
    }
    key = hashlib.sha256(json.dumps(desc, sort_keys=True).encode()).hexdigest()[:16]
    root = cache_dir(data.get("cache_dir")) / "evals"
    d = root / f"{CLOZE}-{key}"
    if (d / f"{CLOZE}.yaml").is_file():  # written last: its presence means the documents are whole
        return d
    docs = cloze_items(source, seq_len, text, items)
    write_jsonl(d / "items.jsonl", docs)
    context, continuation = sizes(seq_len)
    config = {
        "task": CLOZE,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": str(d / "items.jsonl")}, "cache_dir": str(root / "hf-datasets")},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "context",  # field names: the harness reads them as they are, no template
        "doc_to_choice": "choices",
        "doc_to_target": "gold",
        "target_delimiter": "",  # a choice is the text's own continuation: nothing goes between
        "metric_list": [{"metric": "acc"}, {"metric": "acc_norm"}],
        "metadata": {
            "version": float(VERSION),
            "dw": {**desc, "n_items": len(docs), "context_tokens": context, "continuation_tokens": continuation},
        },
    }
    write_text(d / f"{CLOZE}.yaml", yaml.safe_dump(config, sort_keys=False))
    return d


def cloze_items(source, seq_len: int, text, items: int = ITEMS) -> list[dict]:
    """The task's documents, {"context", "choices", "gold"}, from ``source``'s validation split."""
    from depthwidth.measure.inside import eval_set

    c, k = sizes(seq_len)
    x, y = eval_set(source, c + k - 1, SPARE * items * (c + k - 1))
    windows = np.concatenate([x[:, :1], y], axis=1).tolist()  # each window's C + K tokens
    pairs = [p for p in (_split(w, c, text) for w in windows) if p is not None]
    rng = np.random.default_rng(SEED)
    pairs = [pairs[i] for i in rng.permutation(len(pairs))[:items]]
    conts = [cont for _, cont in pairs]
    if len(set(conts)) < CHOICES:
        raise BadInput(
            f"the validation split holds {len(set(conts))} distinct continuations of {k} tokens; "
            f"{CLOZE} needs at least {CHOICES}"
        )
    docs = []
    for i, (ctx, cont) in enumerate(pairs):
        wrong = _distractors(rng, conts, i)
        gold = int(rng.integers(CHOICES))
        choices = [*wrong[:gold], cont, *wrong[gold:]]
        if all(len(text.encode(ctx + ch)) <= seq_len for ch in choices):  # BPE at the join: see the docstring
            docs.append({"context": ctx, "choices": choices, "gold": gold})
    return docs


def _split(window: list[int], c: int, text) -> tuple[str, str] | None:
    """(context, continuation) texts of a window, or None where its text is not exactly its tokens."""
    if text.eot is not None and text.eot in window:  # a document boundary: not one text
        return None
    ctx, cont = text.decode(window[:c]), text.decode(window[c:])
    if not ctx.strip() or not cont.strip():  # nothing to judge (the harness strips a blank context to nothing)
        return None
    if text.encode(ctx) != window[:c] or text.encode(ctx + cont) != window:
        return None
    return ctx, cont


def _distractors(rng: np.random.Generator, conts: list[str], i: int) -> list[str]:
    """Three continuations of other items, distinct from each other and from item ``i``'s own."""
    picked: list[str] = []
    while len(picked) < CHOICES - 1:
        cand = conts[int(rng.integers(len(conts)))]
        if cand != conts[i] and cand not in picked:
            picked.append(cand)
    return picked
