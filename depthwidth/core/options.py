"""One option of a library call and of the command that makes it: ``Option``.

A library's options table (``fit/defaults.py`` for ``dw fit``, ``track/run_source.py`` for where
runs are read from) lists each option once — its name (the dataclass field and the command's
parameter), default, help and flag — and ``cli/options.py`` turns the table into the command's
flags.  So a default, a help text or a flag name has one home, and ``dw config show`` reads the
same table.

Standard library only: ``dw --help`` builds every command's flags from these tables.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One option: a field of the library's options dataclass and one flag of its command."""

    name: str
    """The dataclass field and the command's parameter name."""
    default: object
    """The default, the library's and the command's."""
    help: str
    """What it does, as ``--help`` prints it."""
    allowed: str = ""
    """The values allowed, in a few words (``dw config show``'s "allowed" column)."""
    flag: str = ""
    """The command's flag; empty: ``--`` and the name with dashes."""
    kind: type | None = None
    """The command's value type; None: the default's type (``str`` where the default is None).
    ``list``: a repeatable flag of strings."""
    short: str = ""
    """A one-letter alias (``-f``), if any."""
    metavar: str = ""
    """The value's name in ``--help`` (``ACTIONS``); empty: typer's own."""

    @property
    def flags(self) -> tuple[str, ...]:
        long = self.flag or "--" + self.name.replace("_", "-")
        return (long, self.short) if self.short else (long,)

    @property
    def value_type(self) -> type:
        if self.kind is not None:
            return self.kind
        return str if self.default is None else type(self.default)


def table(options: tuple[Option, ...] | list[Option]) -> dict[str, Option]:
    """{name: option}; a name given twice is a programming error."""
    out: dict[str, Option] = {}
    for o in options:
        if o.name in out:
            raise ValueError(f"option {o.name!r} declared twice")
        out[o.name] = o
    return out
