"""``dw data prepare``: pretokenize text into ``.bin`` shards + ``meta.json``."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from depthwidth.cli.render import console, emit_json


def prepare_cmd(
    source: str = typer.Option(
        ...,
        "--source",
        help="text file (blank-line separated documents) | directory of "
        ".txt/.md files (one document each) | dataset saved with save_to_disk | hub name "
        "(owner/name or hf:NAME, streamed)",
    ),
    tokenizer: str = typer.Option(
        "byte",
        "--tokenizer",
        help="byte (vocab 257, eot 256) | cl100k (tiktoken; the VWT paper's, vocab 100263) | "
        "cl100k:PATH/cl100k_base.tiktoken | PATH/tokenizer.json",
    ),
    out: str = typer.Option(
        ..., "--out", help="output directory (new or empty; rerunning with the same settings is a no-op)"
    ),
    text_column: str = typer.Option("text", "--text-column", help="column holding the text (HF datasets)"),
    split: str = typer.Option("train", "--split", help="split to read (HF datasets)"),
    val_fraction: float = typer.Option(
        0.01,
        "--val-fraction",
        help="validation holds at least this fraction of the tokens, in (0, 1): documents whose text hash falls "
        "below it, topped up by the lowest-hash others",
    ),
    val_min_tokens: Optional[int] = typer.Option(
        None,
        "--val-min-tokens",
        help="validation holds at least this many tokens too (default 100,000: data/valsplit.py), but never more "
        "than half the corpus for it (a smaller corpus: a warning); 0: no minimum",
    ),
    shard_tokens: int = typer.Option(
        1 << 26, "--shard-tokens", help="tokens per .bin shard (memory used while writing ~ one shard)"
    ),
    limit_docs: Optional[int] = typer.Option(None, "--limit-docs", help="stop after this many documents"),
    dtype: str = typer.Option(
        "auto", "--dtype", help="auto (uint16 if the vocabulary fits, else uint32) | uint16 | uint32"
    ),
    as_json: bool = typer.Option(False, "--json", help="print meta.json instead of a table"),
) -> None:
    """Tokenise a text corpus into [bold]train_*.bin[/] / [bold]val_*.bin[/] shards + [bold]meta.json[/].

    Example: dw data prepare --source DKYoon/SlimPajama-6B --tokenizer gpt2/tokenizer.json \
--out data/slimpajama --limit-docs 1000000

    Then train on it with: dw train data=memmap data.path=data/slimpajama data.vocab_size=50257
    """
    from depthwidth.data.prepare import prepare

    with _Progress() as bar:
        meta = prepare(
            source,
            tokenizer,
            out,
            text_column=text_column,
            split=split,
            val_fraction=val_fraction,
            shard_tokens=shard_tokens,
            limit_docs=limit_docs,
            dtype=dtype,
            progress=bar.update,
            **({} if val_min_tokens is None else {"val_min_tokens": val_min_tokens}),
        )
    warning = (meta.get("val_split") or {}).get("warning")
    if warning:
        sys.stderr.write(f"dw: warning: {warning}\n")  # one line, never wrapped
    if as_json:
        emit_json(meta)
        return
    _render(meta, out)


class _Progress:
    """A rich progress bar on stderr, shown only on a terminal."""

    def __enter__(self):
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self.p = Progress(
            TextColumn("tokenising"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("docs · {task.fields[tok]} tokens"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
        )
        self.p.disable = not self.p.console.is_terminal
        self.task = self.p.add_task("prepare", total=None, tok="0")
        self.p.start()
        return self

    def update(self, docs: int, tokens: int, total: int | None) -> None:
        self.p.update(self.task, completed=docs, total=total, tok=f"{tokens:,}")

    def __exit__(self, *exc):
        self.p.stop()
        return False


def _render(meta: dict, out: str) -> None:
    from rich.table import Table

    c = console()
    src = meta["source"]
    where = src.get("path") or src.get("name")
    state = "already prepared" if meta.get("existing") else "prepared"
    c.print(
        f"{out}: {state} from {src['kind']} {where}; tokenizer {meta['tokenizer']['kind']}, "
        f"vocab {meta['vocab_size']}, eot {meta['eot']}, {meta['dtype']}",
        soft_wrap=True,
    )
    t = Table()
    for col in ("split", "documents", "tokens", "shards"):
        t.add_column(col, justify="right")
    for s, d in meta["splits"].items():
        t.add_row(s, f"{d['docs']:,}", f"{d['tokens']:,}", str(len(d["shards"])))
    c.print(t)
