"""The ``dw`` command line.  ``app.py`` holds the Typer app, the exit-code
policy and the one place where commands are registered; each sibling module
is one command and keeps its top-level imports light (no torch, pandas or
scipy until the command body runs): it parses arguments, calls the library
and renders the result (report/render.py)."""

from depthwidth.cli.app import app, main  # noqa: F401
