"""How far a command travels through the package (issue #35's measures).

Runs a ``dw`` command in this process under ``sys.setprofile`` and counts, for calls into
``depthwidth.*``: the distinct modules whose functions ran, the packages they belong to, and the
entries into each module from another (a module entered 7 times to render one fit's tables), and
the calls from report/ into fit/ (the bounce between stages a typed result removes: the report
walks the fit's result and calls back into the fit for nothing; {} for ``fit`` since the analyses'
lines and cells are stored in fit.json's verdicts and each analysis module's ``tables`` renders them, not counted; for
``report`` no rule since the figure's record is stored too, and what is left reads fit.json into
fit/result.py's ``FitDocument`` once (``from_json``: its stored verdicts, none decided), evaluates the
fitted law for the figures' curves, reads the probe record tau(W) was fitted to, and cleans numbers).  What runs
while a module is imported (class bodies, the methods a dataclass makes, constants computed at
import) is not counted: a module imported for a name only is not "executed".

    python benchmarks/trace_modules.py fit           # dw fit on a simulated demo store (depth-delusion)
    python benchmarks/trace_modules.py report        # dw report --plots of that store's written fit.json
                                                     # (tables and figures; the fit itself not measured)
    python benchmarks/trace_modules.py submit        # dw sweep demo launcher=local (the submission only:
                                                     # local workers are detached processes)

Each prints one JSON line: {command, modules, packages, entries, report_to_fit, calls, names}.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


# report/ -> fit/ calls that render, not decide: each analysis makes its own tables from its stored
# section and verdicts (fit/analyses/__init__.py ``tables``), which report/ and dw fit show, in the
# registry's order (``Entry.section``: a name); a module's own ``tables`` where report/ shows one
# analysis's document by itself (match.json: report/matching.py); its figures' data likewise
# (``figures``: report/figs.py draws them)
RENDERING = {"depthwidth.fit.analyses.tables", "depthwidth.fit.analyses.section", "depthwidth.fit.analyses.figures"}


def rendering(key: str) -> bool:
    """Whether the report -> fit call ``key`` (module.function) renders rather than decides."""
    own = key.startswith("depthwidth.fit.analyses.") and key.rsplit(".", 1)[-1] in ("tables", "figures")
    return key in RENDERING or own


def traced(argv: list[str]) -> dict:
    """Run ``dw argv`` in-process and count the depthwidth modules it executes."""
    from depthwidth.cli.app import main

    seen: dict[str, int] = {}
    entries: dict[str, int] = {}  # calls into a module from another one
    back: dict[str, int] = {}  # report/ -> fit/ calls, by the fit function called
    stack: list[str] = []
    importing = [0]  # depthwidth modules being imported (their <module> frames live)

    def prof(frame, event, arg):
        mod = frame.f_globals.get("__name__", "")
        if event not in ("call", "return") or not mod.startswith("depthwidth"):
            return
        if frame.f_code.co_name == "<module>":  # importing a module is not running its functions: nor
            importing[0] += 1 if event == "call" else -1  # its class bodies, dataclasses' made methods,
            return  # constants computed, nor anything it imports in turn
        if importing[0]:
            return
        if event == "return":
            if stack:
                stack.pop()
            return
        seen[mod] = seen.get(mod, 0) + 1
        caller = stack[-1] if stack else None
        if caller != mod:
            entries[mod] = entries.get(mod, 0) + 1
            if caller and caller.startswith("depthwidth.report") and mod.startswith("depthwidth.fit"):
                key = f"{mod}.{frame.f_code.co_name}"
                if not rendering(key):
                    back[key] = back.get(key, 0) + 1
        stack.append(mod)

    out, err = io.StringIO(), io.StringIO()
    sys.setprofile(prof)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(argv)
            except SystemExit as e:
                if e.code not in (0, None):
                    raise RuntimeError(f"dw {' '.join(argv)} exited {e.code}: {err.getvalue()[-300:]}") from None
    finally:
        sys.setprofile(None)
    names = sorted(seen)
    return {
        "command": "dw " + " ".join(argv),
        "modules": len(names),
        "packages": len({".".join(n.split(".")[:2]) for n in names}),
        "entries": sum(entries.values()),
        "most_entered": sorted(entries.items(), key=lambda kv: -kv[1])[:8],
        "report_to_fit": back,
        "calls": sum(seen.values()),
        "names": names,
    }


def main(argv=None) -> int:
    what = (argv or sys.argv[1:] or ["fit"])[0]
    tmp = Path(tempfile.mkdtemp(prefix="dw-trace-"))
    os.environ["DW_RUNS"] = str(tmp / "runs")
    if what in ("fit", "report"):
        from depthwidth.simulate import simulate

        simulate("demo", name="demo-sim", root=str(tmp / "runs"), seed=1)
        fit = ["fit", "demo-sim", "--law", "depth-delusion", "--bootstrap", "20"]
        if what == "fit":
            doc = traced([*fit, "--no-write"])
        else:
            from depthwidth.cli.app import main as dw

            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                with contextlib.suppress(SystemExit):
                    dw(fit)  # fit.json written, untraced
            doc = traced(["report", "demo-sim", "--plots", str(tmp / "report")])
    elif what == "submit":
        doc = traced(["sweep", "demo", "launcher=local", "launcher.workers=1"])
        import signal

        for w in (tmp / "runs" / "demo" / "jobs").glob("*/worker-*.json"):  # the detached worker: not measured
            with contextlib.suppress(OSError, ValueError, KeyError):
                os.kill(int(json.loads(w.read_text())["pid"]), signal.SIGKILL)
    else:
        print(f"bad value for what: {what!r} (allowed: fit, report, submit)", file=sys.stderr)
        return 2
    print(json.dumps(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
