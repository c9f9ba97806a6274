"""Typer app, shared rendering helpers and the exit-code policy.

Exit codes: 0 success; 2 bad input (one line on stderr, no traceback, nothing
written); 1 the work itself failed.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

app = typer.Typer(
    name="dw",
    help=(
        "dw — depth, width and width-shape scaling experiments.\n\n"
        "Example: dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def emit_json(obj: Any) -> None:
    """One JSON document on stdout (for ``--json``)."""
    from depthwidth.atomic import _default

    sys.stdout.write(json.dumps(obj, indent=2, default=_default) + "\n")


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def main(argv: list[str] | None = None) -> None:
    import click

    from depthwidth.errors import DwError

    try:
        rv = app(args=argv, prog_name="dw", standalone_mode=False)
    except DwError as e:
        sys.stderr.write(f"dw: error: {_one_line(str(e))}\n")
        sys.exit(e.exit_code)
    except click.exceptions.UsageError as e:
        # click would print usage + hint + error on several lines; one is enough.
        sys.stderr.write(f"dw: error: {_one_line(e.format_message())} (see --help)\n")
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        sys.stderr.write("dw: aborted\n")
        sys.exit(130)
    except KeyboardInterrupt:
        sys.stderr.write("dw: interrupted\n")
        sys.exit(130)
    if isinstance(rv, int):
        sys.exit(rv)
