"""Run ``dw ARGS`` with a SIGKILL armed at one point of the code.

    python -m tests.reliability.faults POINT N -- train ARGS...
    python -m tests.reliability.faults --matrix DIR POINTS.json -- train ARGS...

The process kills itself (``kill -9``: no handler, no flush, no cleanup) on the
N-th time it reaches POINT.  Nothing in dw knows about this: each point wraps a
real function of the running code from outside, so the run dies exactly where
a node failure or an OOM killer could stop it.

``--matrix`` imports torch once and forks one process per run (the reference
run, then per point the killed run and its resume, each in DIR/NAME), two
points at a time: a fork costs milliseconds where a fresh interpreter spends
seconds importing torch.
The parent computes nothing with torch, so no thread pool crosses a fork.
It writes DIR/results.json: {"ref": exit, POINT: {"killed": exit, "resumed": exit}}
(a negative exit is the signal that ended the process).
"""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def _wrap(module: str, name: str, before=None, after=None):
    """Replace ``module.name`` by a wrapper that calls ``before(n, *args)`` / ``after(n, *args)``
    around it (n: 1-based call count)."""
    mod = importlib.import_module(module)
    real = getattr(mod, name)
    count = [0]

    @functools.wraps(real)
    def wrapper(*args, **kw):
        count[0] += 1
        if before:
            before(count[0], *args, **kw)
        out = real(*args, **kw)
        if after:
            after(count[0], *args, **kw)
        return out

    setattr(mod, name, wrapper)
    return real


def _at(n):
    return lambda k, *a, **kw: _die() if k == n else None


def _torn(n, name):
    """append_jsonl to ``name``: the n-th call writes half its payload, then dies."""

    def before(k, path, rows, *a, **kw):
        if str(path).endswith(name):
            before.hits += 1
            if before.hits == n:
                payload = "".join(__import__("json").dumps(r) + "\n" for r in rows)
                with open(path, "a") as f:
                    f.write(payload[: len(payload) // 2])
                _die()

    before.hits = 0
    return before


def _after_append(n, name):
    def after(k, path, rows, *a, **kw):
        if str(path).endswith(name):
            after.hits += 1
            if after.hits == n:
                _die()

    after.hits = 0
    return after


def _branch_step(step):
    """lr_at(step, total) asked by a decay branch (total < the run's steps) at ``step``."""

    def before(k, s, total, o, *rest):  # rest: tokens per step
        if total == int(os.environ["DW_FAULT_BRANCH_TOTAL"]) and s == step:
            _die()

    return before


def _in_eval(n, rows_call):
    """Inside the n-th evaluation, at its ``rows_call``-th batch."""
    state = {"evals": 0, "rows": 0, "on": False}
    tr = importlib.import_module("depthwidth.train.trainer")
    real_eval = tr.Trainer.evaluate

    def evaluate(self):
        state["evals"] += 1
        state["on"], state["rows"] = state["evals"] == n, 0
        try:
            return real_eval(self)
        finally:
            state["on"] = False

    tr.Trainer.evaluate = evaluate

    def before(k, *a, **kw):
        if state["on"]:
            state["rows"] += 1
            if state["rows"] == rows_call:
                _die()

    _wrap("depthwidth.train.dist", "rows", before=before)


def arm(point: str, n: int) -> None:
    if point == "checkpoint-shards":  # shards on disk, hashing them: no manifest yet
        _wrap("depthwidth.train.checkpoint", "_sha", before=_at(n))
    elif point == "checkpoint-manifest":  # every file hashed, the manifest not written
        _wrap("depthwidth.train.checkpoint", "write_text", before=_at(n))
    elif point == "checkpoint-renamed":  # renamed into place, older ones not yet pruned
        _wrap("depthwidth.train.checkpoint", "list_steps", before=_at(n))
    elif point == "wsd-branch":
        _wrap("depthwidth.train.optim", "lr_at", before=_branch_step(n))
    elif point == "micro-batch":  # between two accumulation micro-batches of one step
        _wrap("depthwidth.train.parallel", "sync", before=_at(n))
    elif point == "evaluation":
        _in_eval(n, 2)
    elif point == "metrics-torn":  # half a metrics line on disk
        _wrap("depthwidth.track.tracker", "append_jsonl", before=_torn(n, "metrics.jsonl"))
    elif point == "probe-written":  # a probe line on disk past the last checkpoint
        _wrap("depthwidth.track.tracker", "append_jsonl", after=_after_append(n, "probes.jsonl"))
    elif point == "optimizer-step":  # gradients clipped, the update not applied
        import torch

        real = torch.nn.utils.clip_grad_norm_
        count = [0]

        def clip(*a, **kw):
            count[0] += 1
            out = real(*a, **kw)
            if count[0] == n:
                _die()
            return out

        torch.nn.utils.clip_grad_norm_ = clip
    elif point == "summary":  # writing a summary (the n-th: running, then done)
        _wrap("depthwidth.train.summary", "write_json", before=_at(n))
    else:
        raise SystemExit(f"unknown fault point {point!r}")


def _dw(argv, point=None, n=0) -> int:
    """``dw ARGV`` in a forked child (armed at ``point``); its exit status, -signal if killed."""
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            if point:
                arm(point, n)
            from depthwidth.cli import main

            sys.argv = ["dw", *argv]
            main()
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


JOBS = 2


def matrix(root: str, points: dict, args: list) -> dict:
    import json
    from pathlib import Path

    import torch  # noqa: F401  (imported once, before any fork)
    import torch.distributed.checkpoint  # noqa: F401

    import depthwidth.cli  # noqa: F401
    import depthwidth.train.trainer  # noqa: F401

    root = Path(root)
    jobs = [("ref", None, 0), *((point, point, int(n)) for point, n in points.items())]
    running, out = {}, {}

    def reap():
        pid, _ = os.waitpid(-1, 0)
        name = running.pop(pid)
        out[name] = json.loads((root / f"{name}.result.json").read_text())

    for name, point, n in jobs:  # two at a time (the CI machine's cores); each job runs its steps in order
        while len(running) >= JOBS:
            reap()
        pid = os.fork()
        if pid == 0:
            d = root / name
            res = (
                _dw([*args, f"run.dir={d}"])
                if point is None
                else {"killed": _dw([*args, f"run.dir={d}"], point, n), "resumed": _dw([*args, f"run.dir={d}"])}
            )
            (root / f"{name}.result.json").write_text(json.dumps(res))
            os._exit(0)
        running[pid] = name
    while running:
        reap()
    (root / "results.json").write_text(json.dumps(out))
    return out


if __name__ == "__main__":
    if sys.argv[1] == "--matrix":
        import json

        root, points, sep, *args = sys.argv[2:]
        assert sep == "--"
        matrix(root, json.loads(open(points).read()), args)
        sys.exit(0)
    point, n, sep, *args = sys.argv[1:]
    assert sep == "--"
    arm(point, int(n))
    from depthwidth.cli import main

    sys.argv = ["dw", *args]
    main()
