"""``dw data prepare``: pretokenize text into ``.bin`` shards + ``meta.json``."""

from __future__ import annotations

import sys

from depthwidth.cli.options import taken, with_options
from depthwidth.report.render import console, emit_json
from depthwidth.data.options import PREPARE_OPTIONS  # dw data prepare's options (data/options.py)


@with_options(PREPARE_OPTIONS)
def prepare_cmd(**kw) -> None:
    """Tokenise a text corpus into [bold]train_*.bin[/] / [bold]val_*.bin[/] shards + [bold]meta.json[/].

    Example: dw data prepare --source DKYoon/SlimPajama-6B --tokenizer gpt2/tokenizer.json \
--out data/slimpajama --limit-docs 1000000

    Then train on it with: dw train data=memmap data.path=data/slimpajama data.vocab_size=50257
    """
    from depthwidth.data.prepare import prepare

    o = taken((PREPARE_OPTIONS,), kw)
    as_json, out = o.pop("as_json"), o["out"]
    with _Progress() as bar:
        meta = prepare(**o, progress=bar.update)
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
