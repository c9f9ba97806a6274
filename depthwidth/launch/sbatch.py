"""Small SLURM jobs of dw's own and the scheduler commands they need, without submitit (light:
the follow-up, halving and retries run them from inside jobs, the dry run never).

``cpu_job`` writes the sbatch file of a one-CPU job that runs ``python -m MODULE ARGS`` where
dw ran (the wave job of slurm.py/waves.py, the follow-up of followup.py); ``submit`` sbatches
one; ``scontrol`` runs one scontrol command, with tries, and says whether it succeeded.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from depthwidth.core import store
from depthwidth.core.atomic import write_text
from depthwidth.core.errors import BadInput, WorkFailed


def where_lines() -> list[str]:
    """Shell lines a job starts with: where dw ran, its code, its run store."""
    return [
        f"cd {shlex.quote(os.getcwd())}",
        f"export PYTHONPATH={shlex.quote(str(Path(__file__).resolve().parents[2]))}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"export DW_RUNS={shlex.quote(str(store.runs_root().absolute()))}",
    ]


def cpu_job(path: Path, cfg: dict, *, opts: list[str], comment: str, module: str, args: list[str]) -> Path:
    """Write the sbatch file of a one-CPU, one-node job (``opts``: its own #SBATCH options, the
    launcher's partition/account/QOS added: its slot counts against the same limits) running
    ``python -m module args`` after the launcher's setup lines; -> ``path``."""
    opts = [
        *opts,
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
        *(f"--{k}={cfg[k]}" for k in ("partition", "account", "qos") if cfg.get(k) not in (None, "")),
    ]
    python = shlex.quote(cfg.get("python") or sys.executable)
    lines = [
        "#!/bin/bash",
        *(f"#SBATCH {o}" for o in opts),
        f"# {comment}",
        *where_lines(),
        *(str(s) for s in cfg.get("setup") or []),
        f"exec {python} -m {module} {' '.join(shlex.quote(a) for a in args)}",
        "",
    ]
    write_text(path, "\n".join(lines))
    return path


def submit(script: Path, what: str, *opts: str) -> str:
    """``sbatch --parsable OPTS SCRIPT`` -> the job id; BadInput without sbatch, WorkFailed if refused."""
    try:
        p = subprocess.run(["sbatch", "--parsable", *opts, str(script)], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise BadInput("launcher=slurm but there is no sbatch on PATH") from None
    except subprocess.TimeoutExpired:
        raise WorkFailed(f"sbatch of {what} did not answer within 60 s") from None
    if p.returncode != 0 or not p.stdout.strip():
        raise WorkFailed(f"sbatch of {what} failed: {' '.join(p.stderr.split())[:400] or f'exit {p.returncode}'}")
    return p.stdout.strip().split(";")[0]


def scontrol(*args: str, tries: int = 1, who: str = "dw") -> bool:
    """``scontrol ARGS`` (``tries`` times, a growing pause between); whether it succeeded (the last
    refusal printed to stderr with ``who``)."""
    err = ""
    for k in range(tries):
        try:
            p = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=60)
            if p.returncode == 0:
                return True
            err = " ".join(p.stderr.split())
        except (OSError, subprocess.TimeoutExpired) as e:
            err = str(e)
        if k + 1 < tries:
            time.sleep(1.0 + k)
    print(f"{who}: scontrol {' '.join(args)}: {err}", file=sys.stderr, flush=True)
    return False
