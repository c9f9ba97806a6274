"""The ``dw`` command line.  ``app.py`` holds the Typer app and the exit-code
policy; each sibling module adds one command and keeps its top-level imports
light (no torch, pandas or scipy until the command body runs)."""

from depthwidth.cli.app import app, main  # noqa: F401

# Each import registers one command on ``app``.
from depthwidth.cli import shapes  # noqa: F401,E402
from depthwidth.cli import data  # noqa: F401,E402
from depthwidth.cli import train  # noqa: F401,E402
from depthwidth.cli import sweep  # noqa: F401,E402
from depthwidth.cli import status  # noqa: F401,E402
from depthwidth.cli import fit  # noqa
from depthwidth.cli import sync  # noqa: F401,E402
from depthwidth.cli import report  # noqa: F401,E402
