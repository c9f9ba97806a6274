"""Write the documentation site's references from the code: ``docs/reference/*.md``.

    python scripts/gen_docs.py            # (re)write the pages
    python scripts/gen_docs.py --check    # exit 1 naming every stale page (tests/test_docs.py runs it)

Four pages, none typed by hand:

- ``cli.md``: every ``dw`` command and option, walked from the Typer app (depthwidth/cli/app.py);
- ``settings.md``: every run setting with its default, type, range and doc (config/docs.py, from the
  schema: what ``dw config show --markdown`` prints);
- ``sweep-file.md``: every sweep-file key, at which level it is allowed (sweep/file.py's key lists)
  and what it means;
- ``fit-json.md``: every key of ``fit.json``, field by field with its docstring (fit/result.py's
  ``FitDocument`` and ``Verdicts``).

Fast and torch-free: it imports the CLI's registration (which never imports torch), the schema and
two standard-library modules.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # document the checkout this script lives in, whatever is installed
OUT = ROOT / "docs" / "reference"
HEADER = "<!-- generated from the code by scripts/gen_docs.py (make docs runs it); do not edit by hand -->"


_RICH = re.compile(r"\[(?:/|/?(?:bold|dim|italic|underline|b|i|u|red|green|yellow|blue|cyan|magenta))\]")


def _plain(s) -> str:
    """Help text without rich's markup ([bold]...[/]): what a reader of the page sees in a terminal."""
    return _RICH.sub("", str(s))


def _cell(s) -> str:
    return " ".join(_plain(s).split()).replace("|", "\\|")


# -- every dw command ------------------------------------------------------------------------------


def _type_name(p) -> str:
    td = getattr(p, "type_descriptor", None)
    ann = getattr(td, "annotation", None)
    if ann is None:
        return ""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        inner = [a for a in args if a is not type(None)]
        return " \\| ".join(_ann(a) for a in inner) + (" \\| none" if len(inner) < len(args) else "")
    return _ann(ann)


def _ann(a) -> str:
    if typing.get_origin(a) is list:
        return f"list[{_ann(typing.get_args(a)[0])}]"
    return {"str": "text", "Path": "path", "bool": "flag"}.get(
        getattr(a, "__name__", ""), getattr(a, "__name__", str(a))
    )


def _default(p) -> str:
    d = p.default
    if d is None or callable(d) or repr(d).startswith("<"):
        return ""
    if getattr(p, "is_flag", False) and d is False:
        return "off"
    if getattr(p, "is_flag", False) and d is True:
        return "on"
    if isinstance(d, (list, tuple)) and not d:
        return ""
    return f"`{d}`"


def _opts(p) -> str:
    names = [*p.opts, *p.secondary_opts]
    if type(p).__name__.endswith("Argument"):
        name = p.name.upper() + ("…" if p.nargs == -1 else "")
        return f"`{name}`"
    return ", ".join(f"`{n}`" for n in names)


def commands(group=None, prefix: str = "dw") -> list[tuple[str, object]]:
    """(``dw CMD``, click command) for every command of the app, groups walked, in registration order."""
    if group is None:
        import typer.main

        from depthwidth.cli.app import app

        group = typer.main.get_command(app)
    out = []
    for name, cmd in group.commands.items():
        if getattr(cmd, "hidden", False):
            continue
        if hasattr(cmd, "commands"):
            out += commands(cmd, f"{prefix} {name}")
        else:
            out.append((f"{prefix} {name}", cmd))
    return out


def examples(cmd) -> list[str]:
    """The ``dw ...`` command lines of a command's help (its ``Example:`` lines and indented ones)."""
    out = []
    for line in inspect.cleandoc(cmd.help or "").splitlines():
        s = line.strip()
        if s.startswith("Example:"):
            s = s[len("Example:") :].strip()
        if s.startswith("dw "):
            out.append(s.split("  (")[0].split("   ")[0].strip())
    return out


def cli_md() -> str:
    cmds = commands()
    lines = [
        HEADER,
        "",
        "# Command reference",
        "",
        "Every `dw` command with its arguments and options, walked from the Typer app "
        "(`depthwidth/cli/app.py` registers every command).  `dw COMMAND --help` prints the same.  "
        "Exit codes everywhere: 0 done, 1 the work itself failed, 2 bad input (one line on stderr, "
        "nothing written).",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for name, cmd in cmds:
        first = inspect.cleandoc(cmd.help or "").split("\n\n")[0]
        anchor = name.replace(" ", "-")
        lines.append(f"| [`{name}`](#{anchor}) | {_cell(first)} |")
    for name, cmd in cmds:
        anchor = name.replace(" ", "-")
        lines += ["", f"## `{name}` {{#{anchor}}}", ""]
        lines += ["```text", _usage(name, cmd), "```", ""]
        lines += ["```text", _plain(inspect.cleandoc(cmd.help or "")).rstrip(), "```", ""]
        params = [p for p in cmd.params if not getattr(p, "hidden", False) and p.name != "help"]
        if params:
            lines += ["| argument / option | type | default | what it does |", "|---|---|---|---|"]
            for p in params:
                help_ = getattr(p, "help", None) or ""
                req = " (required)" if p.required else ""
                lines.append(f"| {_opts(p)}{req} | {_type_name(p)} | {_default(p)} | {_cell(help_)} |")
    return "\n".join(lines) + "\n"


def _usage(name: str, cmd) -> str:
    parts = [name, "[OPTIONS]"]
    for p in cmd.params:
        if type(p).__name__.endswith("Argument"):
            arg = p.name.upper() + ("..." if p.nargs == -1 else "")
            parts.append(arg if p.required else f"[{arg}]")
    return " ".join(parts)


# -- every run setting -----------------------------------------------------------------------------


def settings_md() -> str:
    from depthwidth.config import docs
    from depthwidth.config.schema import ALL_GROUPS

    return "\n".join(
        [
            HEADER,
            "",
            "# Run settings",
            "",
            "Every setting of a run, one row each, from `depthwidth/config/schema.py` (one dataclass field per "
            "setting: its one default, type, allowed values and doc).  `dw config show GROUP` (or `GROUP.KEY`, "
            "`--json`) prints the same rows; `dw config show GROUP=PRESET KEY=VALUE ...` prints the config "
            "they resolve to.  A setting of a launcher, tracker or data source is listed once per variant "
            f"(e.g. `launcher.time (slurm)`).  Groups: {', '.join(f'`{g}`' for g in ALL_GROUPS)}.",
            "",
            docs.markdown(),
            "",
        ]
    )


# -- every sweep-file key --------------------------------------------------------------------------


def sweep_md() -> str:
    from depthwidth.sweep import file as sf

    levels = {"file": sf.TOP_KEYS, "block": sf.BLOCK_KEYS, "run": sf.POINT_META}
    known = set().union(*levels.values())
    SWEEP_KEYS = sf.KEY_DOCS  # each key's meaning and example: one home, beside the keys
    if known != set(SWEEP_KEYS):
        missing, extra = sorted(known - set(SWEEP_KEYS)), sorted(set(SWEEP_KEYS) - known)
        raise SystemExit(f"gen_docs: sweep keys out of step with sweep/file.py: no row for {missing}, unknown {extra}")
    lines = [
        HEADER,
        "",
        "# Sweep-file keys",
        "",
        "A sweep is `sweeps/NAME.yaml` (or `$DW_SWEEPS/NAME.yaml`); every key is optional except at least one "
        "of `runs`, `axes`, `zip`, `seeds`, `blocks` or `isoflop`.  Keys with a dot are config keys "
        "(`model.depth`), keys without one config groups (`model: vwt`), exactly as on the `dw train` command "
        "line.  Which keys are allowed where comes from `depthwidth/sweep/file.py`; the guide "
        "[Your own data](../guides/own-data.md) shows a whole file.",
        "",
        "| key | allowed in | meaning | example |",
        "|---|---|---|---|",
    ]
    order = [*sf.TOP_KEYS, *[k for k in sf.BLOCK_KEYS if k not in sf.TOP_KEYS]]
    order += [k for k in sf.POINT_META if k not in order]
    for k in order:
        where = ", ".join(lv for lv, keys in levels.items() if k in keys)
        meaning, example = SWEEP_KEYS[k]
        lines.append(f"| `{k}` | {where} | {_cell(meaning)} | `{_cell(example)}` |")
    lines += [
        "",
        f"Options of `tune:` that are not tuned settings: {', '.join(f'`{k}`' for k in sf.TUNE_OPTIONS)}.  "
        f"Keys a sweep never sets (the launcher's business): {', '.join(f'`{k}`' for k in sf.RESERVED)}.",
        "",
        "From the module's own description (`depthwidth/sweep/file.py`):",
        "",
        "```text",
        inspect.cleandoc(sf.__doc__ or "").rstrip(),
        "```",
        "",
    ]
    return "\n".join(lines)


# -- every fit.json key ----------------------------------------------------------------------------


def _field_docs(cls) -> dict[str, str]:
    """A dataclass's field docstrings: the string literal right after each annotated field."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body
    out = {}
    for a, b in zip(body, body[1:]):
        if (
            isinstance(a, ast.AnnAssign)
            and isinstance(a.target, ast.Name)
            and isinstance(b, ast.Expr)
            and isinstance(b.value, ast.Constant)
            and isinstance(b.value.value, str)
        ):
            out[a.target.id] = inspect.cleandoc(b.value.value)
    return out


def _fields_table(cls) -> list[str]:
    docs = _field_docs(cls)
    hints = {f.name: f.type for f in dataclasses.fields(cls)}
    lines = ["| key | type | what it holds |", "|---|---|---|"]
    for f in dataclasses.fields(cls):
        doc = docs.get(f.name, "")
        lines.append(f"| `{f.name}` | `{_cell(hints[f.name])}` | {_cell(doc) if doc else '—'} |")
    return lines


def fit_md() -> str:
    from depthwidth.fit import result

    return "\n".join(
        [
            HEADER,
            "",
            "# fit.json keys",
            "",
            f"`dw fit` writes `runs/NAME/fit.json` (schema `{result.SCHEMA}`) through "
            "`depthwidth/fit/result.py`'s `FitDocument`; every reader (`dw report`, `dw status`, `dw suggest`, "
            "the figures) reads it back through the same class.  The rows below are its fields with their "
            "docstrings (— where the field has none).  The run-directory formats and the `identification` "
            "record are in [Contracts](../CONTRACTS.md).",
            "",
            "## `FitDocument`",
            "",
            inspect.cleandoc(result.FitDocument.__doc__ or ""),
            "",
            *_fields_table(result.FitDocument),
            "",
            "`sections` is not a key of its own: every other top-level key of fit.json is an optional "
            "analysis kept as written, in order.",
            "",
            "## `verdicts`: `Verdicts`",
            "",
            inspect.cleandoc(result.Verdicts.__doc__ or ""),
            "",
            *_fields_table(result.Verdicts),
            "",
        ]
    )


PAGES = {"cli.md": cli_md, "settings.md": settings_md, "sweep-file.md": sweep_md, "fit-json.md": fit_md}


def generate() -> dict[str, str]:
    return {name: fn() for name, fn in PAGES.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every stale page")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    pages = generate()
    if a.check:
        stale = [n for n, text in pages.items() if not (a.out / n).is_file() or (a.out / n).read_text() != text]
        if stale:
            print(f"stale: {', '.join(f'docs/reference/{n}' for n in stale)}: run python scripts/gen_docs.py")
            return 1
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (a.out / name).write_text(text)
    print(f"wrote {', '.join(pages)} in {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
