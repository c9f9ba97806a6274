"""Typer app, shared rendering helpers and the exit-code policy.

Exit codes: 0 success; 2 bad input (one line on stderr, no traceback, nothing
written); 1 the work itself failed.
"""

from __future__ import annotations

import sys

import typer


def command_group(help: str, **kw) -> typer.Typer:
    """dw or one of its command groups (``dw data``, ``dw config``): help with an example,
    no shell-completion options, dw's own one-line errors instead of typer's tracebacks."""
    return typer.Typer(
        help=help,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        **kw,
    )


app = command_group(
    "dw — depth, width and width-shape scaling experiments.\n\n"
    "Example: dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt",
    name="dw",
)


def _one_line(msg: str) -> str:
    return " ".join(str(msg).split())


def _click_exceptions():
    """Typer >= 0.2x vendors click as ``typer._click``; older ones use click."""
    try:
        from typer._click import exceptions as cx
    except ImportError:  # pragma: no cover - older typer
        from click import exceptions as cx
    return cx


def _offending_value(e, argv: list[str]) -> str | None:
    """The raw token a BadParameter refers to, so the message can name it."""
    param = getattr(e, "param", None)
    if param is None:
        return None
    for opt in getattr(param, "opts", []):
        for i, tok in enumerate(argv):
            if tok == opt and i + 1 < len(argv):
                return argv[i + 1]
            if tok.startswith(opt + "="):
                return tok[len(opt) + 1 :]
    return None


def main(argv: list[str] | None = None) -> None:
    from depthwidth.core.atomic import never_world_writable
    from depthwidth.core.errors import DwError

    never_world_writable()
    cx = _click_exceptions()
    try:
        rv = app(args=argv, prog_name="dw", standalone_mode=False)
    except DwError as e:
        sys.stderr.write(f"dw: error: {_one_line(str(e))}\n")
        sys.exit(e.exit_code)
    except cx.NoArgsIsHelpError:
        sys.exit(0)  # typer has already printed the help
    except cx.UsageError as e:
        # click would print usage + hint + error on several lines; one is enough.
        msg = _one_line(e.format_message())
        got = _offending_value(e, sys.argv[1:] if argv is None else argv)
        if got is not None and repr(got) not in msg:
            msg += f" (got {got!r})"
        sys.stderr.write(f"dw: error: {msg} (see --help)\n")
        sys.exit(2)
    except cx.ClickException as e:
        sys.stderr.write(f"dw: error: {_one_line(e.format_message())}\n")
        sys.exit(e.exit_code)
    except (typer.Exit, SystemExit) as e:
        code = getattr(e, "exit_code", getattr(e, "code", 0))
        sys.exit(code)
    except typer.Abort:
        sys.stderr.write("dw: aborted\n")
        sys.exit(130)
    except _ctrl_c() as e:
        _interrupted(e)
    if rv == 130:  # inside a command typer turns Ctrl-C's KeyboardInterrupt into a silent Exit(130)
        _interrupted(KeyboardInterrupt())
    if isinstance(rv, int):
        sys.exit(rv)


def _ctrl_c() -> tuple:
    """What Ctrl-C raises: KeyboardInterrupt, or train.signals.Interrupted once dw has handled it
    (imported only when an exception is on its way out)."""
    from depthwidth.train.signals import Interrupted

    return KeyboardInterrupt, Interrupted


def _interrupted(e: BaseException) -> None:
    """Ctrl-C: one line and exit 130; a handled one (``Interrupted``) says what it saved and
    brings its own exit code (3: checkpointed)."""
    sys.stderr.write(f"{_one_line(str(e)) or 'dw: interrupted'}\n")
    sys.exit(getattr(e, "exit_code", 130))


def register(app: typer.Typer) -> typer.Typer:
    """Every command, registered here and only here (no import side effects)."""
    from depthwidth.cli import (
        analyze,
        clean,
        config,
        data,
        eval,
        export,
        fit,
        forget,
        report,
        shapes,
        simulate,
        status,
        stop,
        suggest,
        sweep,
        sync,
        train,
    )

    raw = {"allow_extra_args": True, "ignore_unknown_options": True}  # Hydra overrides pass through
    app.command("shapes")(shapes.shapes_cmd)
    data_app = command_group("Token data for training: prepare pretokenized .bin shards (used by data=memmap).")
    data_app.command("prepare")(data.prepare_cmd)
    app.add_typer(data_app, name="data")
    config_app = command_group("The settings of a run: every key, its default, type, allowed values and what it does.")
    config_app.command("show")(config.show_cmd)
    app.add_typer(config_app, name="config")
    app.command("train", context_settings=raw)(train.train_cmd)
    app.command("sweep", context_settings=raw)(sweep.sweep_cmd)
    app.command("status")(status.status_cmd)
    app.command("stop")(stop.stop_cmd)
    app.command("forget")(forget.forget_cmd)
    app.command("clean")(clean.clean_cmd)
    app.command("simulate", context_settings=raw)(simulate.simulate_cmd)
    app.command("fit")(fit.fit_cmd)
    app.command("suggest", context_settings=raw)(suggest.suggest_cmd)
    app.command("sync")(sync.sync_cmd)
    app.command("report")(report.report_cmd)
    app.command("analyze")(analyze.analyze_cmd)
    app.command("export")(export.export_cmd)
    app.command("eval")(eval.eval_cmd)
    return app


@app.callback()
def _root() -> None:
    """dw — depth, width and width-shape scaling experiments.

    Example: dw shapes x --width 640 --depth 16 --vocab 100263 --match vwt
    """


register(app)
