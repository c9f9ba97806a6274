"""The scheduler's limits on queued jobs (launch/limits.py parses them, launch/slurm.py reads them)
and the waves a larger sweep goes in as.

Pure functions first (sacctmgr/squeue output as SLURM 22.05 prints it, the wave split), then the
dry run against stand-in SLURM commands, then the real test cluster (``slurm`` tests): a QOS
with ``MaxSubmitJobsPerUser=5`` of the test's own, and a 20-run sweep submitted under it.
"""

from __future__ import annotations

import json
import threading
import time
import os
from collections import Counter
from pathlib import Path

import pytest

from depthwidth.core.atomic import read_jsonl
from depthwidth.core.errors import BadInput, WorkFailed
from depthwidth.launch import limits as L
from depthwidth.launch import slurm as S
from tests.helpers import assert_bad_input, at_gate, gate_env, open_gate, run_dw
from tests.test_launch import tiny_env, wait_for

# ---------------------------------------------------------------------------
# sacctmgr / squeue / scontrol output
# ---------------------------------------------------------------------------

ASSOC = """\
physics|alice||7||normal,long|normal|
physics|alice|gpu|3||normal||
chem|alice||||normal,long||
"""


def test_association_rows_are_parsed_and_the_jobs_own_row_is_picked():
    rows = L.parse_assoc(ASSOC)
    assert rows[0] == {
        "account": "physics",
        "user": "alice",
        "partition": "",
        "max_submit": 7,
        "grp_submit": None,
        "qos": ["normal", "long"],
        "default_qos": "normal",
    }
    assert L.pick_row(rows, "alice", "physics", None)["max_submit"] == 7
    assert L.pick_row(rows, "alice", "physics", "gpu")["max_submit"] == 3  # the partition's own row
    assert L.pick_row(rows, "alice", "physics", "cpu")["max_submit"] == 7  # none for cpu: the general one
    assert L.pick_row(rows, "alice", "bio", None) is None
    assert L.parse_assoc("garbage\n\n") == []


def test_the_jobs_qos_is_chosen_as_slurm_chooses_it():
    rows = L.parse_assoc(ASSOC)
    assert L.job_qos("dwtest5", rows[0]) == "dwtest5"  # launcher.qos
    assert L.job_qos(None, rows[0]) == "normal"  # the association's default
    assert L.job_qos(None, {**rows[2], "qos": ["long"]}) == "long"  # its only QOS
    assert L.job_qos(None, rows[2]) == "normal"  # else normal
    assert L.job_qos(None, None) == "normal"


def test_qos_limits_and_their_scopes():
    qos = L.parse_qos("normal||||\ndwtest5|5|||\nshared||20|100|\n")
    assert qos == {
        "normal": {"per_user": None, "per_account": None, "group": None},
        "dwtest5": {"per_user": 5, "per_account": None, "group": None},
        "shared": {"per_user": None, "per_account": 20, "group": 100},
    }
    assert L.qos_limits("normal", qos["normal"], "alice", "physics") == []
    (u,) = L.qos_limits("dwtest5", qos["dwtest5"], "alice", "physics")
    assert u == L.Limit(5, "qos dwtest5 MaxSubmitJobsPerUser", "alice", None, "dwtest5")
    a, g = L.qos_limits("shared", qos["shared"], "alice", "physics")
    assert (a.jobs, a.user, a.account, a.qos) == (20, None, "physics", "shared")
    assert (g.jobs, g.user, g.account, g.qos) == (100, None, None, "shared")


def test_association_limits_and_the_accounts_group_limit():
    row = L.parse_assoc("physics|alice||7|9|normal||\n")[0]
    acct = L.parse_assoc("physics|||||normal||\n")[0] | {"grp_submit": 40}
    m, g, a = L.assoc_limits(row, acct, "alice", "physics")
    assert (m.jobs, m.source, m.user, m.account) == (7, "association physics/alice MaxSubmitJobs", "alice", "physics")
    assert (g.jobs, g.source) == (9, "association physics/alice GrpSubmitJobs")
    assert (a.jobs, a.source, a.user, a.account) == (40, "account physics GrpSubmitJobs", None, "physics")
    assert L.assoc_limits(None, None, "alice", "physics") == []


def test_the_tightest_limit_counts_only_the_jobs_in_its_scope():
    queued = L.parse_squeue("alice|physics|normal\nalice|physics|dwtest5\nbob|physics|dwtest5\nalice|chem|dwtest5\n")
    assert queued[1] == ("alice", "physics", "dwtest5")
    per_user_qos = L.Limit(5, "qos dwtest5 MaxSubmitJobsPerUser", "alice", None, "dwtest5")
    assoc = L.Limit(3, "association physics/alice MaxSubmitJobs", "alice", "physics")
    everyone = L.Limit(3, "qos dwtest5 GrpSubmitJobs", None, None, "dwtest5")
    lims = L.Limits([per_user_qos, assoc, everyone], user="alice")
    assert lims.tightest(queued) == (0, everyone)  # 3 - 3 (bob's counts too)
    assert L.Limits([per_user_qos, assoc], user="alice").tightest(queued) == (1, assoc)  # 3 - 2
    assert L.Limits([per_user_qos], user="alice").tightest(queued) == (3, per_user_qos)  # 5 - 2
    assert L.Limits([per_user_qos], user="alice").tightest(None) == (5, per_user_qos)  # squeue unknown
    assert L.Limits([], user="alice").tightest(queued) == (None, None)
    assert lims.everyone() and not L.Limits([per_user_qos, assoc]).everyone()


def test_limits_are_read_only_where_slurm_enforces_them():
    assert L.enforced("AccountingStorageEnforce = associations,limits\n")
    assert L.enforced("AccountingStorageEnforce = associations,limits,qos,safe\n")
    assert L.enforced("AccountingStorageEnforce = safe\n")
    assert not L.enforced("AccountingStorageEnforce = associations\n")
    assert not L.enforced("AccountingStorageEnforce = none\n")
    assert L.enforced(None)  # unknown: as if it did


def fake_slurm(answers: dict):
    """A stand-in for ``slurm._run`` (where SLURM's commands run): the answer of the first key that
    is a part of the command."""

    def run(cmd, timeout=L.TIMEOUT_S):
        text = " ".join(cmd)
        for key, out in answers.items():
            if key in text:
                return (out, "") if isinstance(out, str) else (None, out[0])
        return None, f"no {cmd[0]} here"

    return run


SLURM = {
    "scontrol show config": "ClusterName = dwtest\nAccountingStorageEnforce = associations,limits\n",
    "show assoc where user=alice cluster=dwtest": "physics|alice||7||normal,dwtest5|normal|\n",
    "show user alice": "physics\n",
    "show assoc where account=physics user=": "physics|||||normal||\n",
    "show qos where name=dwtest5": "dwtest5|5|||\n",
    "show qos where name=normal": "normal||||\n",
    "squeue": "alice|physics|normal\nalice|physics|normal\n",
}


def test_read_limits_takes_every_applicable_one_and_max_submit_caps_them(monkeypatch):
    monkeypatch.setattr(S, "_run", fake_slurm(SLURM))
    lims = S.read_limits({"qos": "dwtest5"}, user="alice")
    assert [(x.jobs, x.source) for x in lims.limits] == [
        (7, "association physics/alice MaxSubmitJobs"),
        (5, "qos dwtest5 MaxSubmitJobsPerUser"),
    ]
    assert lims.read == "association physics/alice, qos dwtest5" and not lims.why
    # squeue: two of alice's jobs, in qos normal: 7 - 2 = 5 under the association, 5 - 0 under the QOS
    assert S.room(lims) == (5, lims.limits[0], 2)
    lims = S.read_limits({"qos": None, "max_submit": 4}, user="alice")  # default QOS normal: no limit
    assert [(x.jobs, x.source) for x in lims.limits] == [
        (7, "association physics/alice MaxSubmitJobs"),
        (4, "launcher.max_submit"),
    ]
    assert S.room(lims)[:2] == (2, lims.limits[1])


def test_without_accounting_only_launcher_max_submit_limits(monkeypatch):
    monkeypatch.setattr(S, "_run", fake_slurm({}))  # no scontrol, no sacctmgr, no squeue here
    lims = S.read_limits({}, user="alice")
    assert lims.limits == [] and lims.why == "no sacctmgr here"
    assert S.room(lims) == (None, None, None)
    assert L.plan_line(S.wave_plan({}, 20)) == (
        "queue limit: none known (no sacctmgr here); launcher.max_submit sets one: all 20 array tasks queued at once"
    )
    lims = S.read_limits({"max_submit": 6}, user="alice")
    assert [(x.jobs, x.source, x.user) for x in lims.limits] == [(6, "launcher.max_submit", "alice")]
    assert S.room(lims) == (6, lims.limits[0], None)  # squeue did not answer: taken as nothing queued
    failing = {"scontrol": ("scontrol failed: boom",), "sacctmgr": ("sacctmgr failed: accounting off",)}
    monkeypatch.setattr(S, "_run", fake_slurm(failing))
    assert S.read_limits({}, user="alice").why == "sacctmgr failed: accounting off"
    monkeypatch.setattr(S, "_run", fake_slurm({"scontrol": "AccountingStorageEnforce = associations\n"}))
    assert "enforces none" in S.read_limits({}, user="alice").why


# ---------------------------------------------------------------------------
# the wave split
# ---------------------------------------------------------------------------


def test_wave_sizes():
    assert L.wave_sizes(20, None) == [20]  # no limit
    assert L.wave_sizes(5, 5) == [5]  # fits: no wave job
    assert L.wave_sizes(0, 5) == []
    # limit 5, nothing queued: 4 + the wave job; each wave job then has 4 of room (it counts itself):
    # 3 + the next wave job, and the last wave fills all 4
    assert L.wave_sizes(20, 5) == [4, 3, 3, 3, 3, 4]
    assert L.wave_sizes(6, 5) == [4, 2]
    assert L.wave_sizes(20, 10) == [9, 8, 3]
    assert L.wave_sizes(10, 3) == [2, 1, 1, 1, 1, 1, 1, 2]  # limit 3: the least that makes progress
    assert L.wave_sizes(3, 2) == []  # one task + the wave job, which could then never go on
    assert L.wave_sizes(3, 1) == []
    for n in range(1, 60):
        for free in range(3, 12):
            sizes = L.wave_sizes(n, free)
            assert sum(sizes) == n and all(s >= 1 for s in sizes)
            assert sizes[0] <= free and all(s <= free - 1 for s in sizes[1:])  # the wave job counts itself
            assert all(s + 1 <= free - 1 for s in sizes[1:-1])  # ... and its successor fits too


def test_check_room_says_why_nothing_fits():
    lim = L.Limit(5, "qos dwtest5 MaxSubmitJobsPerUser", "alice", None, "dwtest5")
    assert L.check_room(20, 5, lim, 0) == [4, 3, 3, 3, 3, 4]
    assert L.check_room(20, 3, lim, 2) == [2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2]  # if they stay
    # room for 2: one task and the wave job now; the later waves once the 3 other jobs have ended
    assert L.check_room(20, 2, lim, 3) == [1, 3, 3, 3, 3, 3, 4]
    # room for one job: the wave job alone goes in and submits the tasks as room frees
    assert L.check_room(20, 1, lim, 4) == [0, 3, 3, 3, 3, 3, 3, 2]
    with pytest.raises(WorkFailed, match="no room in the queue now: 5 of the 5 jobs qos dwtest5"):
        L.check_room(20, 0, lim, 5)
    tiny = L.Limit(2, "launcher.max_submit", "alice")
    assert L.check_room(2, 2, tiny, 0) == [2]
    with pytest.raises(BadInput, match="20 array tasks exceed the limit of 2 queued jobs .launcher.max_submit."):
        L.check_room(20, 2, tiny, 0)


def test_the_plan_line_names_the_limit_its_source_and_the_waves():
    w = {"tasks": 20, "limit": 5, "source": "qos dwtest5 MaxSubmitJobsPerUser", "in_use": 0, "problem": None}
    line = L.plan_line({**w, "waves": [4, 3, 3, 3, 3, 4]})
    assert line.startswith(
        "queue limit: 5 jobs (qos dwtest5 MaxSubmitJobsPerUser; 0 queued now): 20 array tasks in 6 waves "
        "(4, 3, 3, 3, 3, 4 tasks); each later wave is submitted by the wave job"
    )
    assert "in about 19 waves" in L.plan_line({**w, "in_use": 3, "waves": [1] * 18 + [2]})
    assert L.plan_line({**w, "tasks": 5, "waves": [5]}).endswith("all 5 array tasks in one wave")
    assert "no room for a wave now" in L.plan_line({**w, "in_use": 4, "waves": [0, 4, 4]})
    none = {"tasks": 3, "limit": None, "read": "association root/root, qos normal", "why": "", "waves": [3]}
    assert L.plan_line(none) == (
        "queue limit: none (sacctmgr shows none for association root/root, qos normal); "
        "launcher.max_submit sets one: all 3 array tasks queued at once"
    )


# ---------------------------------------------------------------------------
# the dry run and bad input (stand-in SLURM commands on PATH; no cluster)
# ---------------------------------------------------------------------------


def fake_bin(tmp_path: Path, squeue: str = "") -> dict:
    """scontrol, sacctmgr and squeue that answer as a cluster where alice's QOS dwtest5 allows 5 jobs."""
    b = tmp_path / "bin"
    b.mkdir()
    (b / "scontrol").write_text("#!/bin/sh\nprintf 'ClusterName = fake\\nAccountingStorageEnforce = limits\\n'\n")
    (b / "sacctmgr").write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        "  *'assoc where user='*) echo 'physics|alice||50||normal,dwtest5|normal|' ;;\n"
        "  *'show user'*) echo physics ;;\n"
        "  *'name=dwtest5'*) echo 'dwtest5|5|||' ;;\n"
        "  *'name=normal'*) echo 'normal||||' ;;\n"
        "esac\n"
    )
    (b / "squeue").write_text(f"#!/bin/sh\nprintf '{squeue}'\n")
    for f in b.iterdir():
        f.chmod(0o755)
    return {"PATH": f"{b}{os.pathsep}{os.environ['PATH']}", "USER": "alice", "LOGNAME": "alice"}


TWENTY = "[" + ", ".join(str(d) for d in range(1, 21)) + "]"


def test_the_dry_run_says_how_many_waves_and_which_limit(tmp_path):
    env = {**tiny_env(tmp_path, steps=4, depths=TWENTY), **fake_bin(tmp_path)}
    p = run_dw("sweep", "tiny", "launcher=slurm", "launcher.qos=dwtest5", "--dry-run", env=env)
    assert p.returncode == 0, p.stderr
    assert (
        "queue limit: 5 jobs (qos dwtest5 MaxSubmitJobsPerUser; 0 queued now): 20 array tasks in 6 waves "
        "(4, 3, 3, 3, 3, 4 tasks)"
    ) in p.stdout
    p = run_dw("sweep", "tiny", "launcher=slurm", "--dry-run", "--json", env=env)  # QOS normal: the association's 50
    (w,) = json.loads(p.stdout)["waves"]
    assert (w["limit"], w["source"], w["waves"]) == (50, "association physics/alice MaxSubmitJobs", [20])
    p = run_dw("sweep", "tiny", "launcher=slurm", "launcher.max_submit=8", "pack=2", "--dry-run", "--json", env=env)
    (w,) = json.loads(p.stdout)["waves"]
    assert (w["tasks"], w["limit"], w["source"], w["waves"]) == (10, 8, "launcher.max_submit", [7, 3])
    p = run_dw("sweep", "tiny", "launcher=local", "--dry-run", env=env)
    assert p.returncode == 0 and "queue limit" not in p.stdout  # only SLURM has one


def test_the_dry_run_counts_the_users_queued_jobs(tmp_path):
    env = {**tiny_env(tmp_path, steps=4, depths=TWENTY), **fake_bin(tmp_path, squeue="alice|physics|dwtest5\\n" * 4)}
    p = run_dw("sweep", "tiny", "launcher=slurm", "launcher.qos=dwtest5", "--dry-run", env=env)
    assert p.returncode == 0, p.stderr
    assert "queue limit: 5 jobs (qos dwtest5 MaxSubmitJobsPerUser; 4 queued now): no room for a wave now" in p.stdout


@pytest.mark.parametrize("value", ["0", "-3", "abc", "2.5", "true"])
def test_a_bad_max_submit_is_one_line_and_exit_2_with_nothing_submitted(tmp_path, value):
    env = {**tiny_env(tmp_path, steps=4), **fake_bin(tmp_path)}
    for dry in (["--dry-run"], []):
        line = assert_bad_input(
            run_dw("sweep", "tiny", "launcher=slurm", f"launcher.max_submit={value}", *dry, env=env)
        )
        assert line.startswith("dw: error: bad value for launcher.max_submit:") and value.strip("-") in line.lower()
        assert "allowed: an integer >= 1, or null" in line
    assert not (tmp_path / "runs").exists()


def test_a_limit_too_small_for_waves_is_bad_input(tmp_path):
    env = {**tiny_env(tmp_path, steps=4, depths=TWENTY), **fake_bin(tmp_path)}
    line = assert_bad_input(run_dw("sweep", "tiny", "launcher=slurm", "launcher.max_submit=2", "--dry-run", env=env))
    assert "20 array tasks exceed the limit of 2 queued jobs (launcher.max_submit)" in line and "pack=N" in line


# ---------------------------------------------------------------------------
# the real test cluster
# ---------------------------------------------------------------------------

QOS = "dwtest5"


class QueueSampler:
    """Counts the user's queued jobs in QOS ``qos`` (array tasks apart) every 0.25 s while in the block."""

    def __init__(self, cluster, qos: str):
        self.cluster, self.qos, self.seen, self._stop = cluster, qos, [], threading.Event()

    def _loop(self):
        while not self._stop.is_set():
            p = self.cluster.sh("squeue", "-h", "-r", "-u", L.user_name(), f"--qos={self.qos}", "-o", "%i", check=False)
            if p.returncode == 0:
                self.seen.append(len(p.stdout.split()))
            self._stop.wait(0.25)

    def __enter__(self):
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(10)


@pytest.fixture
def qos5(slurm_cluster):
    """QOS dwtest5 (MaxSubmitJobsPerUser=5), the test's own; removed after, with any job left in it."""
    if not L.enforced(slurm_cluster.sh("scontrol", "show", "config").stdout):
        pytest.fail(
            "the test cluster enforces no limits (started before AccountingStorageEnforce=limits was in "
            "scripts/slurm_cluster.sh?): scripts/slurm_cluster.sh stop, then start",
            pytrace=False,
        )
    slurm_cluster.sh("sacctmgr", "-i", "delete", "qos", QOS, check=False)
    slurm_cluster.sh("sacctmgr", "-i", "add", "qos", QOS, "MaxSubmitJobsPerUser=5")
    try:
        yield QOS
    finally:
        slurm_cluster.sh("scancel", f"--qos={QOS}", check=False)
        wait_for(
            lambda: not slurm_cluster.sh("squeue", "-h", f"--qos={QOS}", check=False).stdout.strip(), 60, "no job left"
        )
        slurm_cluster.sh("sacctmgr", "-i", "delete", "qos", QOS, check=False)


def _status(env):
    p = run_dw("status", "tiny", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _submit(env, *args):
    p = run_dw("sweep", "tiny", "launcher=slurm", f"launcher.qos={QOS}", *args, "--json", env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def _done(tmp_path) -> int:
    """Runs whose summary.json says done (read here: cheaper than ``dw status`` while jobs train)."""
    n = 0
    for p in (tmp_path / "runs" / "tiny").glob("*/summary.json"):
        try:
            n += json.loads(p.read_text()).get("status") == "done"
        except (OSError, ValueError):
            pass
    return n


def _each_run_once(tmp_path, n):
    """One manifest: every run started exactly once, by the array task its last submit event names."""
    ev = read_jsonl(tmp_path / "runs" / "tiny" / "manifest")
    starts = Counter(e["run_id"] for e in ev if e["event"] == "start")
    assert len(starts) == n and set(starts.values()) == {1}, starts
    last = {e["run_id"]: e["job_id"] for e in ev if e["event"] == "submit"}
    started_by = {e["run_id"]: e["job_id"] for e in ev if e["event"] == "start"}
    assert last == started_by and len(set(last.values())) == n
    return ev


@pytest.mark.slurm
def test_a_sweep_over_the_qos_limit_goes_in_waves_and_never_queues_more_than_it(slurm_cluster, qos5, tmp_path, ledger):
    env = tiny_env(tmp_path, steps=4, depths=TWENTY)
    t0 = time.monotonic()
    with QueueSampler(slurm_cluster, QOS) as q:
        dry = run_dw("sweep", "tiny", "launcher=slurm", f"launcher.qos={QOS}", "--dry-run", env=env)
        assert (
            "queue limit: 5 jobs (qos dwtest5 MaxSubmitJobsPerUser; 0 queued now): 20 array tasks in 6 waves "
            "(4, 3, 3, 3, 3, 4 tasks)"
        ) in dry.stdout, dry.stdout + dry.stderr
        out = _submit(env)
        (w,) = out["waves"]
        assert (w["limit"], w["source"], w["planned"]) == (5, "qos dwtest5 MaxSubmitJobsPerUser", [4, 3, 3, 3, 3, 4])
        assert len(out["submitted"]) == 20 and w["first"]["tasks"] == 4
        st = _status(env)  # the 16 runs of later waves wait, pending, on the wave job
        assert st["total"] == 20 and st["counts"]["pending"] + st["counts"]["running"] + st["counts"]["done"] == 20
        assert sum(r["job_id"] == w["first"]["wave_job"] for r in st["runs"]) == 16
        wait_for(lambda: _done(tmp_path) == 20, 300, "20 runs done")
    took = time.monotonic() - t0
    assert len(q.seen) >= 20 and max(q.seen) <= 5, q.seen  # squeue never showed more than 5 of the user's jobs
    assert max(q.seen) >= 4  # ... and the waves did fill the limit
    st = _status(env)
    starts = Counter(e["run_id"] for e in read_jsonl(tmp_path / "runs" / "tiny" / "manifest") if e["event"] == "start")
    over = sum(1 for n in q.seen if n > 5)  # a sample over the limit: a job sbatch would have refused
    ledger(
        faults=over,
        recovered=st["counts"]["done"],
        lost=20 - len(starts),
        duplicates=sum(starts.values()) - len(starts),
    )
    assert st["counts"]["done"] == 20 and all(r["attempts"] == 1 and r["progress"] == 1.0 for r in st["runs"])
    ev = _each_run_once(tmp_path, 20)
    arrays = Counter(e["job_id"].split("_")[0] for e in ev if e["event"] == "start")
    assert sorted(arrays.values()) == [3, 3, 3, 3, 4, 4]  # six waves, one array each
    (sub,) = (tmp_path / "runs" / "tiny" / "jobs").iterdir()  # one submission, one manifest
    waves = json.loads((sub / "waves.json").read_text())["waves"]
    assert [x["tasks"] for x in waves] == [4, 3, 3, 3, 3, 4] and waves[-1]["wave_job"] is None
    assert len(list(sub.glob("wave-*.out"))) == 5
    print(f"20 runs in 6 waves under MaxSubmitJobsPerUser=5: {took:.1f} s, {len(q.seen)} squeue samples")


@pytest.mark.slurm
def test_a_cancelled_wave_job_breaks_the_chain_and_retry_failed_submits_the_rest(slurm_cluster, qos5, tmp_path):
    """The wave job is cancelled while wave 1 still trains (held at a gate): its 4 runs are
    cancelled, ``--retry-failed`` submits them while wave 1 fills 4 of the 5 jobs (room for the
    wave job only: it goes in alone and submits them once room frees), and every run ends done,
    each trained once."""
    env = tiny_env(tmp_path, steps=8, depths="[1, 2, 3, 4, 5, 6, 7, 8]")
    gate = tmp_path / "gate"
    genv = {**env, **gate_env(gate, 4)}
    with QueueSampler(slurm_cluster, QOS) as q:
        out = _submit(genv)
        (w,) = out["waves"]
        assert w["planned"] == [4, 4] and w["first"]["tasks"] == 4
        wait_for(lambda: at_gate(gate, 4) >= 1, 120, "wave 1 training, held at step 4")
        slurm_cluster.sh("scancel", w["first"]["wave_job"])
        wait_for(lambda: _status(env)["counts"]["cancelled"] == 4, 120, "the 4 runs of wave 2 cancelled")
        p = run_dw("sweep", "tiny", "launcher=slurm", f"launcher.qos={QOS}", "--retry-failed", env=genv)
        assert p.returncode == 0, p.stderr
        assert "submitted 4 runs as waves (none yet)" in p.stdout and "no room for a wave now" in p.stdout
        st = _status(env)
        assert st["counts"]["cancelled"] == 0 and st["counts"]["done"] == 0
        open_gate(gate)
        wait_for(lambda: _done(tmp_path) == 8, 300, "8 runs done")
    assert max(q.seen) <= 5, q.seen
    assert _status(env)["counts"]["done"] == 8
    _each_run_once(tmp_path, 8)
