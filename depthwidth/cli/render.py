"""What every command shares for output: rich consoles and ``--json`` documents."""

from __future__ import annotations

import json
import sys
from typing import Any


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


def emit_json(obj: Any) -> None:
    """One JSON document on stdout (for ``--json``)."""
    from depthwidth.core.atomic import json_default

    sys.stdout.write(json.dumps(obj, indent=2, default=json_default) + "\n")


def wide_console():
    """Tables are wide: when stdout is not a terminal, do not squeeze them into 80 columns."""
    import sys

    from rich.console import Console

    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)
