"""The two kinds of failure every dw command distinguishes.

``BadInput``  -> exit code 2, one line naming the bad value and what is allowed,
                 raised *before* anything is written.
``WorkFailed`` -> exit code 1, the work itself failed; stores stay consistent.
"""


class DwError(Exception):
    exit_code = 1


class BadInput(DwError):
    """The user asked for something invalid (exit code 2)."""

    exit_code = 2


class WorkFailed(DwError):
    """Valid request, but the work failed (exit code 1)."""

    exit_code = 1


def bad(name: str, value, allowed: str) -> BadInput:
    """Uniform one-line message: ``bad value for NAME: VALUE (allowed: ...)``."""
    return BadInput(f"bad value for {name}: {value!r} (allowed: {allowed})")


# A flag's upper-case metavar (``LAW``, ``FILE.yaml``, ``NAME=COLUMN``, ``METRIC:TASK``): the argument
# ``call(law=)`` names the value itself, so "run_fit(law=) LAW" would say it twice.  A value that is
# not all metavar (``KEY=value``, ``LR=3e-4``) is an example, and stays.
_FLAG = r"(?<![\w-])--([a-z][a-z0-9-]*)(?: [A-Z][A-Z0-9_]*(?:[=:][A-Z][A-Z0-9_]*|\.[a-z]+)*(?!\w|[=:.]\w))?"


def as_arguments(text: str, call: str) -> str:
    """``text``, said for the command line, as said to a Python caller of ``call``: each flag
    ``--x-y`` (and its metavar, ``--x-y X``) named as the argument ``call(x_y=)`` (a library function
    forwarding another's error)."""
    import re

    return re.sub(_FLAG, lambda m: f"{call}({m.group(1).replace('-', '_')}=)", text)


def did_you_mean(word: str, options) -> str:
    """``"did you mean X? "`` for the closest of ``options`` to a mistyped ``word`` (difflib's
    ratio >= 0.6, the one home of every "did you mean" dw prints), else ``""``."""
    import difflib

    close = difflib.get_close_matches(str(word), [str(o) for o in options], n=1, cutoff=0.6)
    return f"did you mean {close[0]}? " if close else ""


def number(name: str, value, allowed: str = "a number") -> float:
    """``float(value)``, or BadInput naming the setting (never a ValueError traceback)."""
    if isinstance(value, bool):
        raise bad(name, value, allowed)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise bad(name, value, allowed) from None


def key_values(spec, option: str, example: str):
    """``"a=1,b=2"`` or a list of such -> [(key, value), ...] (both stripped).
    Shared by ``--columns``, ``--pin`` and ``--where``; a part without ``=`` is bad input."""
    items = [] if not spec else [spec] if isinstance(spec, str) else list(spec)
    out = []
    for item in items:
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            k, sep, v = part.partition("=")
            if not sep or not k.strip():
                raise bad(option, part, example)
            out.append((k.strip(), v.strip()))
    return out
