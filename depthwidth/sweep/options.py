"""Every option of ``dw sweep`` (and of ``dw suggest``), in one place, and ``SweepOptions``: what a
submission or a dry run is asked.

``dw sweep``'s flags are made from ``SWEEP_OPTIONS`` (cli/options.py); ``SweepOptions`` takes the
same names and defaults, and ``check()`` refuses the combinations that make no sense (one line,
exit 2, before anything is planned).  ``then_actions`` checks ``--then`` and the sweep file's
``then:`` arguments against the commands they are for.

Standard library only at import: ``dw --help`` builds the flags from this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from depthwidth.core.devices import PLAN_CPU_FLOPS, PLAN_MFU, PLAN_PEAK_FLOPS
from depthwidth.core.options import Option

SWEEP_OPTIONS = (
    Option(
        "dry_run",
        False,
        "check every run as the submission does (the data too) and list them with params, "
        "FLOPs, GPU- or CPU-hours, requeues, nodes, calendar time and checkpoint disk; submit nothing",
    ),
    Option(
        "no_data_check",
        False,
        "with --dry-run: plan even where the data are missing or do not match "
        "(e.g. before preparing them); each problem is a warning, the submission still refuses it",
    ),
    Option("as_json", False, "one JSON document (each run's exact override list)", flag="--json"),
    Option("only", None, "glob on run id, label or an override, e.g. 'model.depth=16'"),
    Option("retry_failed", False, "also resubmit failed, cancelled and lost runs"),
    Option(
        "retry_diverged",
        None,
        "start diverged runs afresh with this override (repeatable; it must change the run, e.g. optim.lr=3e-4)",
        kind=list,
        metavar="OVERRIDE",
    ),
    Option("mfu", PLAN_MFU, "model FLOPs utilisation assumed for GPU- and CPU-hours"),
    Option("peak", PLAN_PEAK_FLOPS, "peak FLOP/s per GPU assumed for GPU-hours (H100 bf16 dense)"),
    Option("cpu_peak", PLAN_CPU_FLOPS, "peak FLOP/s per CPU process assumed for CPU-hours (fp32)"),
    Option(
        "extend_tuning",
        False,
        "a tuned sweep (tune:): add one value beyond the grid's end for every group whose best finished run "
        "is at that end (the next log-spaced value)",
    ),
    Option(
        "prior",
        None,
        "with --dry-run: predict from the papers' law (published) instead of the sweep's fit.json "
        "(predictions appear on their own when the sweep has a fit)",
    ),
    Option(
        "then",
        None,
        "when every run has ended: fit,report[,analyze,eval] (dw's own commands, with the arguments of the "
        "sweep file's then: mapping), then runs/NAME/DONE; SLURM: a CPU job after the arrays, which also "
        "retries runs SLURM ended OUT_OF_MEMORY/TIMEOUT/PREEMPTED (none: only that)",
        metavar="ACTIONS",
    ),
    Option(
        "probe",
        False,
        "with --dry-run: time a few real steps of the smallest and largest runs here (process start, set-up, "
        "evaluation, checkpoint, analysis included), record them in runs/NAME/probe.json and plan the hours with them "
        "(later dry runs read the record)",
    ),
    Option(
        "max_days",
        None,
        "with --dry-run: propose the nodes per run (launcher.nodes) that finish every SLURM run within this "
        "many days, requeue restarts, queue waits and checkpoint writes counted",
        kind=float,
    ),
    Option("queue_wait", 1.0, "with --dry-run: hours a requeued SLURM task waits in the queue (an assumption)"),
    Option(
        "target",
        None,
        "with --dry-run predictions: the number a run's value is measured against (dcrit@512, alpha, "
        "W_exponent, optimum@1e21; default the law's claim)",
    ),
)

SUGGEST_OPTIONS = (  # dw suggest's: the keywords of sweep/suggest.py's suggest(), less write (--no-write)
    Option("budget", ..., "device-hours (GPU-hours on GPUs) the next runs may spend", kind=float),
    Option(
        "target",
        None,
        "the number to pin down: dcrit@WIDTH, a parameter (alpha), W_exponent / D_exponent / N_exponent "
        "[@C], optimum@C (the compute-optimal depth at C FLOPs), gap@N (the x vs uniform loss gap at N "
        "parameters, for a law that reads the shape: docs/laws/shape_gap.yaml); default the law's claim",
    ),
    Option(
        "candidates_spec",
        None,
        "values of settings to choose among, in every block: 'model.depth=4,8,16;model.width=512' "
        "(default: the sweep's own depths, widths, shapes ... crossed within each block, at its seeds and one more)",
        flag="--candidates",
    ),
    Option("prior", None, "published: start from the papers' law (what a sweep with no runs yet uses)"),
    Option("law", "depth-delusion", "with --prior: the law whose prior to use"),
    Option(
        "rounds",
        1,
        "spend the budget in this many rounds: choose the first round's runs now (budget / rounds), "
        "the next after refitting on what they measured",
    ),
    Option(
        "cost_power",
        1.0,
        "rank runs by value per GPU-hour^P (1: per GPU-hour; below 1 favours fewer, dearer runs near the "
        "target, as V-optimal designs do; the budget is always in GPU-hours)",
    ),
    Option("out", None, "write the sweep file here (default sweeps/NAME_next.yaml)", kind=Path),
    Option("no_write", False, "print the choice only"),
    Option("as_json", False, "one JSON document", flag="--json"),
)

_D = {o.name: o.default for o in SWEEP_OPTIONS}


@dataclass(frozen=True)
class SweepOptions:
    """What ``dw sweep`` is asked, less ``--json`` (how it answers); names and defaults: ``SWEEP_OPTIONS``."""

    dry_run: bool = False
    no_data_check: bool = False
    only: str | None = None
    retry_failed: bool = False
    retry_diverged: list[str] | None = None
    mfu: float = _D["mfu"]
    peak: float = _D["peak"]
    cpu_peak: float = _D["cpu_peak"]
    extend_tuning: bool = False
    prior: str | None = None
    then: str | None = None
    probe: bool = False
    max_days: float | None = None
    queue_wait: float = _D["queue_wait"]
    target: str | None = None

    def check(self) -> SweepOptions:
        """Refuse what only a dry run takes, and values out of range (one line, exit 2)."""
        from depthwidth.core.errors import bad

        if (self.prior or self.target) and not self.dry_run:
            raise bad("--prior" if self.prior else "--target", self.prior or self.target, "only with --dry-run")
        if self.probe and not self.dry_run:
            raise bad("--probe", True, "only with --dry-run")
        if self.max_days is not None and not (self.dry_run and self.max_days > 0):
            raise bad("--max-days", self.max_days, "days > 0, with --dry-run")
        if not self.queue_wait >= 0:
            raise bad("--queue-wait", self.queue_wait, "hours >= 0")
        if self.no_data_check and not self.dry_run:
            raise bad("--no-data-check", True, "only with --dry-run (the submission always checks the data)")
        return self


def then_actions(name: str, spec: str, flags: Callable[[str], set[str]]) -> tuple[list, dict]:
    """``--then ACTIONS`` and the sweep file's ``then:`` arguments, each option checked against
    ``flags(action)``, the flags of the dw command it is for (one line, exit 2, nothing submitted):
    (the actions, {action: its arguments})."""
    from depthwidth.core.errors import bad
    from depthwidth.launch.followup import parse
    from depthwidth.sweep.file import load_file, then_args

    actions = parse(spec)
    args = then_args(name, load_file(name))
    for action, argv in args.items():
        opts = flags(action)
        for a in argv:
            if a.startswith("-") and a.split("=", 1)[0] not in opts:
                raise bad(f"sweep {name}: then.{action}", a, f"an option of dw {action} ({', '.join(sorted(opts))})")
    if "eval" in actions and not any(a.split("=", 1)[0] == "--tasks" for a in args.get("eval", [])):
        raise bad("--then", "eval", f'eval with its tasks in sweeps/{name}.yaml: then: {{eval: "--tasks TASK[,TASK]"}}')
    return actions, {a: args.get(a, []) for a in actions}
