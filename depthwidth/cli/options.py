"""A command's flags made from its library's options tables (core/options.py's ``Option``).

``@with_options(SOURCE_OPTIONS, FIT_OPTIONS)`` adds one ``typer.Option`` per option to the
command's signature, after its arguments; the command receives them as keywords (``**kw``) and
hands them to the library's options dataclass.  The flag, default and help are the table's, so
``dw fit --help``, ``FitOptions`` and ``dw config show fit`` cannot disagree.
"""

from __future__ import annotations

import inspect
from typing import List, Optional, get_type_hints

import typer

from depthwidth.core.options import Option


def _annotation(o: Option):
    if o.kind is list:
        return Optional[List[str]]
    t = o.value_type
    return Optional[t] if o.default is None else t


def with_options(*tables: tuple[Option, ...]):
    """Give the decorated command one flag per option of ``tables`` (each name once)."""

    def deco(fn):
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        if len(own) == len(sig.parameters):
            raise TypeError(f"{fn.__name__} takes no **kw for its generated options")
        taken = {p.name for p in own}
        hints = get_type_hints(fn)
        made = []
        for t in tables:
            for o in t:
                if o.name in taken:
                    raise TypeError(f"{fn.__name__}: option {o.name!r} given twice")
                taken.add(o.name)
                ann = _annotation(o)
                hints[o.name] = ann
                opt = typer.Option(o.default, *o.flags, help=o.help, metavar=o.metavar or None)
                made.append(inspect.Parameter(o.name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann))
        args = [p for p in own if isinstance(p.default, typer.models.ArgumentInfo)]
        rest = [p for p in own if p not in args]
        rest = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in rest]
        fn.__signature__ = sig.replace(parameters=[*args, *made, *rest])
        fn.__annotations__ = hints
        return fn

    return deco


def taken(tables: tuple[tuple[Option, ...], ...], kw: dict) -> dict:
    """The options of ``tables`` out of a command's keywords (removed from ``kw``)."""
    return {o.name: kw.pop(o.name) for t in tables for o in t if o.name in kw}


def command_flags(ctx, command: str) -> set[str]:
    """The flags of ``dw COMMAND`` as registered beside the running command (``ctx``'s group): what
    the sweep file's ``then:`` arguments are checked against."""
    cmd = ctx.parent.command.get_command(ctx.parent, command)
    return {f for p in cmd.params for f in (*p.opts, *getattr(p, "secondary_opts", ())) if f.startswith("-")}
