"""``python -m depthwidth.launch task TASKS.json INDEX | worker TASKS.json SLOT``."""

from __future__ import annotations

import sys
from typing import Sequence

from depthwidth.launch.local import worker
from depthwidth.launch.task import run_task


def main(argv: Sequence[str] | None = None) -> int:
    """A task or worker process; an error that escapes it (its files cannot be written: a full disk)
    is one line on its log and exit 1, never a traceback."""
    try:
        return _main(argv)
    except OSError as e:
        try:  # the log may sit on the full disk too
            print(
                f"dw: error: {type(e).__name__}: {e.strerror or e}{f': {e.filename}' if e.filename else ''}", flush=True
            )
        except OSError:
            pass
        return 1


def _main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 3 or argv[0] not in ("task", "worker"):
        sys.stderr.write("usage: python -m depthwidth.launch task TASKS.json INDEX | worker TASKS.json SLOT\n")
        return 2
    if argv[0] == "worker":
        return worker(argv[1], int(argv[2]))

    return run_task(argv[1], int(argv[2]), log=lambda m: print(m, flush=True))


if __name__ == "__main__":
    sys.exit(main())
