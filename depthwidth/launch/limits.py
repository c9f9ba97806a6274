"""The scheduler's limits on queued jobs, and the waves a larger submission goes in as.

SLURM refuses, at sbatch time, a job that would put more jobs in the queue (pending + running;
every array task counts as one job) than a limit allows (when ``AccountingStorageEnforce``
holds ``limits`` or ``safe``).  ``read_limits`` reads the ones that apply to a submission:

- the user's association (``launcher.account``, else the user's default account; the row of
  ``launcher.partition`` if there is one, else the row without a partition): ``MaxSubmitJobs``
  (sacctmgr shows the value the account passes down) and ``GrpSubmitJobs``, both counting the
  user's jobs in that account;
- the account's own association: ``GrpSubmitJobs``, counting every user's jobs in the account;
- the job's QOS (``launcher.qos``, else the association's default QOS, else its only QOS, else
  ``normal``, as SLURM picks it): ``MaxSubmitJobsPerUser`` (the user's jobs in that QOS),
  ``MaxSubmitJobsPerAccount`` and ``GrpSubmitJobs`` (the account's, everyone's jobs in it);
- ``launcher.max_submit``: the user's jobs, any account or QOS.  It caps what sacctmgr shows
  and stands in for it on a cluster without accounting (where SLURM enforces no limit).

Reading them (``read_limits``, ``room``: sacctmgr, ``scontrol show config``, squeue, each with a
timeout) is launch/slurm.py's, like every SLURM command; this module parses what they print and
plans: ``Limits.tightest`` subtracts what ``squeue`` shows queued now; ``wave_sizes`` splits a
submission into waves that each fit (launch/slurm.py submits them, launch/waves.py is the job
that submits the next one).
"""

from __future__ import annotations

import getpass
import os
import re
from dataclasses import dataclass, field

from depthwidth.core.errors import BadInput, WorkFailed

TIMEOUT_S = 30  # per sacctmgr/scontrol/squeue call of a submission
DRY_TIMEOUT_S = 5  # ... of the dry run, which must stay quick
WAVE_JOB = "the wave job"  # one CPU, a few seconds: submits the next wave when the last one has ended


@dataclass(frozen=True)
class Limit:
    """At most ``jobs`` queued jobs among those of ``user`` (None: every user's) in ``account`` and
    ``qos`` (None: any)."""

    jobs: int
    source: str  # "qos dwtest5 MaxSubmitJobsPerUser", "association acct/user MaxSubmitJobs", "launcher.max_submit"
    user: str | None = None
    account: str | None = None
    qos: str | None = None

    def counts(self, job: tuple[str, str, str]) -> bool:
        """Does queued ``job`` (user, account, qos) count against this limit?"""
        u, a, q = job
        return (
            (self.user is None or u == self.user)
            and (self.account is None or a == self.account)
            and (self.qos is None or q == self.qos)
        )


@dataclass
class Limits:
    """Every limit that applies to one submission, and what was read (or why nothing was)."""

    limits: list = field(default_factory=list)
    read: str = ""  # what sacctmgr was asked about: "association root/root, qos normal"
    why: str = ""  # why sacctmgr gave nothing: "no sacctmgr here", "sacctmgr failed: ..."
    user: str = ""
    timeout: float = TIMEOUT_S  # for squeue too

    def tightest(self, queued: list | None) -> tuple[int | None, Limit | None]:
        """(jobs that may still be queued, the limit that says so) given the jobs ``queued`` now
        (None: unknown, taken as none); (None, None) when no limit applies."""
        best: tuple[int | None, Limit | None] = (None, None)
        for lim in self.limits:
            free = lim.jobs - sum(1 for j in queued or () if lim.counts(j))
            if best[0] is None or free < best[0]:
                best = (free, lim)
        return best

    def everyone(self) -> bool:
        """Does a limit count other users' jobs too (so ``squeue`` must list every user's)?"""
        return any(lim.user is None for lim in self.limits)


def user_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or str(os.getuid())


def _int(s: str) -> int | None:
    """A sacctmgr limit: '' (unset) -> None, '5' -> 5."""
    s = (s or "").strip()
    return int(s) if s.isdigit() else None


ASSOC_FORMAT = "Account,User,Partition,MaxSubmit,GrpSubmit,QOS,DefaultQOS"
QOS_FORMAT = "Name,MaxSubmitPU,MaxSubmitPA,GrpSubmit"


def parse_assoc(text: str) -> list[dict]:
    """``sacctmgr -n -P show assoc format=ASSOC_FORMAT`` -> one dict per row."""
    out = []
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 7:
            continue
        out.append(
            {
                "account": f[0].strip(),
                "user": f[1].strip(),
                "partition": f[2].strip(),
                "max_submit": _int(f[3]),
                "grp_submit": _int(f[4]),
                "qos": [q.strip() for q in f[5].split(",") if q.strip()],
                "default_qos": f[6].strip() or None,
            }
        )
    return out


def parse_qos(text: str) -> dict[str, dict]:
    """``sacctmgr -n -P show qos format=QOS_FORMAT`` -> name -> its submit limits."""
    out = {}
    for line in text.splitlines():
        f = line.split("|")
        if len(f) < 4 or not f[0].strip():
            continue
        out[f[0].strip()] = {"per_user": _int(f[1]), "per_account": _int(f[2]), "group": _int(f[3])}
    return out


def pick_row(rows: list[dict], user: str, account: str, partition: str | None) -> dict | None:
    """The association a job of ``user`` in ``account`` (and ``partition``) runs under."""
    mine = [r for r in rows if r["user"] == user and r["account"] == account]
    return next((r for r in mine if partition and r["partition"] == partition), None) or next(
        (r for r in mine if not r["partition"]), None
    )


def job_qos(cfg_qos: str | None, row: dict | None) -> str:
    """The QOS SLURM gives the job: the one asked for, else the association's default, else its
    only QOS, else ``normal``."""
    if cfg_qos:
        return str(cfg_qos)
    if row and row["default_qos"]:
        return row["default_qos"]
    if row and len(row["qos"]) == 1:
        return row["qos"][0]
    return "normal"


def assoc_limits(row: dict | None, account_row: dict | None, user: str, account: str) -> list[Limit]:
    out = []
    if row is not None:
        where = f"association {account}/{user}" + (f" partition {row['partition']}" if row["partition"] else "")
        if row["max_submit"] is not None:
            out.append(Limit(row["max_submit"], f"{where} MaxSubmitJobs", user, account))
        if row["grp_submit"] is not None:
            out.append(Limit(row["grp_submit"], f"{where} GrpSubmitJobs", user, account))
    if account_row is not None and account_row["grp_submit"] is not None:
        out.append(Limit(account_row["grp_submit"], f"account {account} GrpSubmitJobs", None, account))
    return out


def qos_limits(name: str, q: dict | None, user: str, account: str | None) -> list[Limit]:
    if not q:
        return []
    out = []
    if q["per_user"] is not None:
        out.append(Limit(q["per_user"], f"qos {name} MaxSubmitJobsPerUser", user, None, name))
    if q["per_account"] is not None and account:
        out.append(Limit(q["per_account"], f"qos {name} MaxSubmitJobsPerAccount", None, account, name))
    if q["group"] is not None:
        out.append(Limit(q["group"], f"qos {name} GrpSubmitJobs", None, None, name))
    return out


def enforced(config_text: str | None) -> bool:
    """Does SLURM enforce association/QOS limits (``AccountingStorageEnforce`` with limits or safe)?
    Unknown (no ``scontrol show config``): assume it does."""
    if not config_text:
        return True
    m = re.search(r"^AccountingStorageEnforce\s*=\s*(\S*)", config_text, re.M)
    return m is None or bool({"limits", "safe"} & set(m.group(1).lower().split(",")))


def parse_squeue(text: str) -> list[tuple[str, str, str]]:
    """``squeue -h -r -o %u|%a|%q`` -> one (user, account, qos) per queued job (array tasks apart)."""
    out = []
    for line in text.splitlines():
        f = line.strip().split("|")
        if len(f) == 3 and f[0]:
            out.append((f[0], f[1], f[2]))
    return out


def wave_sizes(n_tasks: int, room_now: int | None, room_later: int | None = None) -> list[int]:
    """Array tasks per wave for ``n_tasks`` tasks when ``room_now`` more jobs may be queued now
    and ``room_later`` when each later wave is submitted (its wave job counting itself; default
    ``room_now - 1``: the other jobs queued now still there).  A wave that is not the last leaves
    one job of room for the wave job that submits the next.  [] when nothing fits."""
    if n_tasks <= 0:
        return []
    if room_now is None or n_tasks <= room_now:
        return [n_tasks]
    later = room_now - 1 if room_later is None else room_later
    if room_now < 2 or (later < 2 and n_tasks - (room_now - 1) > later):
        return []
    sizes, left, free = [], n_tasks, room_now
    while left:
        w = left if left <= free else free - 1
        sizes.append(w)
        left -= w
        free = later
    return sizes


def halving_groups(tasks: list[list[dict]]) -> list[str | None]:
    """Each task's successive-halving group (launch/halving.py; None: none).  A wave never splits a
    group: a member parked at its first budget is held in the queue until its siblings report, and
    a sibling in the next wave would wait for the held one's wave to end, for ever."""
    return [(t[0].get("halving") or {}).get("group") if len(t) == 1 else None for t in tasks]


def cut(groups: list[str | None], w: int) -> int:
    """The largest wave of at most ``w`` of these tasks (in order) that ends where a halving group
    does (0: the first group is larger than ``w``)."""
    k = min(w, len(groups))
    while 0 < k < len(groups) and groups[k] is not None and groups[k] == groups[k - 1]:
        k -= 1
    return k


def largest_group(groups: list[str | None]) -> int:
    """The most tasks of one halving group, consecutive as a submission orders them."""
    best = run = 0
    for i, g in enumerate(groups):
        run = run + 1 if g is not None and i and groups[i - 1] == g else 1
        best = max(best, run)
    return best


def check_room(n_tasks: int, free: int | None, lim: Limit | None, in_use: int | None) -> list[int]:
    """The waves for ``n_tasks`` array tasks with ``free`` room under ``lim``, or why none: BadInput
    when the limit itself is too small for waves (nothing would ever change that), WorkFailed when
    the user's other queued jobs leave no room at all now.  Where the jobs queued now leave too
    little room for the later waves, those are planned as if they had ended by then (a wave job
    waits for room); with room for one job only, the first wave is empty (``[0, ...]``): the wave
    job alone goes in, and submits the tasks as room frees."""
    sizes = wave_sizes(n_tasks, free)
    if sizes:
        return sizes
    assert lim is not None and free is not None
    if not wave_sizes(n_tasks, lim.jobs, lim.jobs - 1):
        raise BadInput(
            f"{n_tasks} array tasks exceed the limit of {lim.jobs} queued jobs ({lim.source}), and waves need "
            f"a limit of at least 3 (a wave leaves room for {WAVE_JOB} behind it, which needs room for the next "
            f"wave's job behind that): pack=N puts N runs in one task; at most {lim.jobs} tasks go in without waves"
        )
    if free >= 2:  # a first wave now; the later ones have room only as the other jobs end
        return [free - 1, *wave_sizes(n_tasks - (free - 1), lim.jobs - 1, lim.jobs - 1)]
    if free == 1:
        return [0, *wave_sizes(n_tasks, lim.jobs - 1, lim.jobs - 1)]
    raise WorkFailed(
        f"no room in the queue now: {in_use if in_use is not None else '?'} of the {lim.jobs} jobs "
        f"{lim.source} allows are queued (squeue -u {lim.user or user_name()}); nothing submitted: "
        "try again once one has ended"
    )


def plan_line(w: dict) -> str:
    """The dry run's line about the queue limit and the waves."""
    n, sizes = w["tasks"], w["waves"]
    if w["limit"] is None:
        said = f"none (sacctmgr shows none for {w['read']})" if w["read"] else f"none known ({w['why']})"
        return f"queue limit: {said}; launcher.max_submit sets one: all {n} array task{'s' * (n != 1)} queued at once"
    used = "?" if w["in_use"] is None else w["in_use"]
    head = f"queue limit: {w['limit']} jobs ({w['source']}; {used} queued now)"
    if w["problem"]:
        return f"{head}: {w['problem']}"
    if len(sizes) == 1:
        return f"{head}: all {n} array task{'s' * (n != 1)} in one wave"
    if sizes[0] == 0:
        shown = ", ".join(map(str, sizes[1:9])) + (", …" if len(sizes) > 9 else "")
        return (
            f"{head}: no room for a wave now; {WAVE_JOB} alone would go in, wait for room and submit the {n} "
            f"array tasks in {len(sizes) - 1} waves ({shown} tasks, once your other jobs have ended)"
        )
    shown = ", ".join(map(str, sizes[:8])) + (", …" if len(sizes) > 8 else "")
    return (
        f"{head}: {n} array tasks in {how_many(len(sizes), w['in_use'])} waves ({shown} tasks); each later "
        f"wave is submitted by {WAVE_JOB} (1 CPU, afterany: the previous wave) when the previous wave has ended"
    )


def how_many(waves: int, in_use: int | None) -> str:
    """'6', or 'about 6' when jobs queued at the time make the later waves' room a guess."""
    return f"about {waves}" if in_use else str(waves)
