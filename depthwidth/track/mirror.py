"""``tracker=wandb``: the W&B mirror of a run directory (tracker.py holds the local files).

``WandbMirror`` (``tracker=wandb``) copies the same rows to one W&B run per dw
run: id = run id, group = sweep, job_type = shape family, ``resume="allow"``
so every restart continues the same W&B run.  Its files live in
``RUN_DIR/wandb/`` (``offline-run-*`` segments, one per start, for ``dw sync``).

No step is sent twice and none is left out: at each start the mirror asks the
destination what it already holds (online: the server's last step; offline:
the newest history step in this run's earlier ``.wandb`` segments, read by
W&B's own reader: wandb_log.py), sends the
local rows between that step and the resume step again (backfill), and skips
replayed rows it already holds.  Rows of one step (metrics + probes) go out as
one W&B history row, in step order.

Any W&B failure (import, service start, init time-out, lost connection,
disk) is logged once through ``log`` and the mirror turns itself off; the run
goes on with its local files.  ``wandb`` is imported only here, lazily.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

from depthwidth.config.schema import complete
from depthwidth.core.atomic import read_jsonl
from depthwidth.model.shapes import ALIASES
from depthwidth.track.wandb_log import WandbLogError, finished, last_history_step

FLUSH_S = 2.0  # W&B writes its .wandb file this often (its default, 15 s, loses more on a kill)
OFFLINE_WAIT_S = 60.0  # the least an offline start waits for the local W&B service


SYMBOLS = {"x": "×", "increasing": "<", "decreasing": ">", "diamond": "◇"}


def setting(node, key, default=None):
    try:
        v = node.get(key, default) if hasattr(node, "get") else getattr(node, key, default)
    except Exception:
        return default
    return default if v is None else v


def shape_family(model: dict) -> str:
    model = complete("model", model)  # a config written before a key existed: the schema's default
    if model["widths"]:
        return "custom"
    s = str(model["shape"])
    return ALIASES.get(s, s)


def run_name(config: dict, seed_in_name: bool = False) -> str:
    """``16L×512W`` (uniform), ``×-960h-24L`` (shapes), ``-s{seed}`` when asked."""
    m = config.get("model", {})
    depth, width, family = m.get("depth"), m.get("width"), shape_family(m)
    if family == "uniform":
        name = f"{depth}L×{width}W"
    else:
        name = f"{SYMBOLS.get(family, family)}-{width}h-{depth}L"
    if seed_in_name:
        name += f"-s{config.get('run', {}).get('seed')}"
    return name


def offline_segments(run_dir: Path, run_id: str) -> list[Path]:
    """This run's offline .wandb files under RUN_DIR/wandb, oldest first."""
    d = Path(run_dir) / "wandb"
    return sorted(d.glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")) if d.is_dir() else []


def _settle(segs: list[Path], quiet_s: float = FLUSH_S + 1.0) -> None:
    """A killed run's W&B service may still be writing its last segment: wait
    (at most ~2 quiet periods) until that file has not changed for ``quiet_s``."""
    if not segs:
        return
    for _ in range(2):
        try:
            age = time.time() - segs[-1].stat().st_mtime
        except OSError:
            return
        try:
            if age >= quiet_s or finished(segs[-1]):
                return
        except WandbLogError:
            return  # start() reads the segments again and reports it
        time.sleep(quiet_s - age)


def _new_second(segs: list[Path]) -> None:
    """W&B names a segment offline-run-YYYYmmdd_HHMMSS-ID: a restart within the
    same second would reuse the previous segment's directory, so wait it out."""
    names = {p.parent.name.split("-")[2] for p in segs if p.parent.name.count("-") >= 3}
    for _ in range(3):
        now = time.time()
        stamps = {time.strftime("%Y%m%d_%H%M%S", f(now)) for f in (time.localtime, time.gmtime)}
        if not names & stamps:
            return
        time.sleep(1.0 - now % 1.0 + 0.01)


def credentials_configured(base_url: str | None = None) -> bool:
    """An API key or login for W&B exists (env, netrc); never touches the network."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    try:
        from wandb.sdk.lib.wbauth import wbnetrc

        host = base_url or os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai"
        return bool(wbnetrc.read_netrc_auth(host=host))
    except Exception:
        return False


def _scrub(msg: str) -> str:
    msg = " ".join(str(msg).split())
    key = os.environ.get("WANDB_API_KEY")
    if key:
        msg = msg.replace(key, "***")
    return msg[:300]


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


class WandbMirror:
    def __init__(self, tcfg, run_dir: Path, run_id: str, config: dict, log=print):
        self.t, self.dir, self.run_id, self.config, self.log = tcfg, run_dir, run_id, config, log
        self.run = None
        self.alive = True
        self.floor = -1  # steps <= floor are already in W&B
        self.mode = None
        self._rows: dict[int, dict] = {}

    # failures -----------------------------------------------------------------
    def _fail(self, what: str, e: BaseException) -> None:
        if not self.alive:
            return
        self.alive = False
        self.log(
            f"warning: W&B {what} failed ({type(e).__name__}: {_scrub(e)}); "
            f"continuing without W&B, the run directory {self.dir} is complete"
        )
        self.run, self._rows = None, {}
        try:  # drop the broken service so a later run in this process starts afresh
            import wandb

            wandb.teardown()
        except Exception:
            pass

    # start / resume -------------------------------------------------------------
    def _settings(self, wandb, mode: str):
        t = self.t
        # init_timeout bounds waiting for the server; offline there is none, only W&B's local
        # service to start, which on a busy machine can take longer than a short server timeout.
        wait = float(setting(t, "init_timeout", 30))
        wait = wait if mode == "online" else max(wait, OFFLINE_WAIT_S)
        kw = dict(
            init_timeout=wait,
            x_service_wait=wait,
            finish_timeout=float(setting(t, "finish_timeout", 120)),
            console="off",
            silent=True,
            quiet=True,
            show_info=False,
            x_disable_stats=True,
            x_disable_meta=True,
            disable_git=True,
            save_code=False,
            disable_job_creation=True,
            x_transaction_log_flush_interval=FLUSH_S,
        )
        known = getattr(wandb.Settings, "model_fields", None)  # older wandb lacks some of these
        return wandb.Settings(**({k: v for k, v in kw.items() if k in known} if known else kw))

    def _init(self, wandb, mode: str):
        t, cfg = self.t, self.config
        model = cfg.get("model", {})
        return wandb.init(
            project=setting(t, "project", "depthwidth"),
            entity=setting(t, "entity"),
            id=self.run_id,
            resume="allow",
            mode=mode,
            dir=str(self.dir),
            group=(cfg.get("run") or {}).get("sweep") or None,
            job_type=shape_family(model),
            name=run_name(cfg, bool(setting(t, "seed_in_name", False))),
            tags=list(setting(t, "tags", []) or []),
            config=cfg,
            settings=self._settings(wandb, mode),
        )

    def start(self, resume_step: int) -> None:
        try:
            import wandb
        except Exception as e:
            return self._fail("import", e)
        mode = setting(self.t, "mode", "auto")
        if mode == "auto":
            env = os.environ.get("WANDB_MODE", "")
            mode = env if env in ("online", "offline") else ("online" if credentials_configured() else "offline")
        segs = offline_segments(self.dir, self.run_id)
        _settle(segs)
        try:
            offline_last = last_history_step(segs)  # what earlier starts already hold
        except WandbLogError as e:
            return self._fail("read of the earlier offline segments", e)
        _new_second(segs)
        try:
            try:
                self.run = self._init(wandb, mode)
            except Exception as e:
                if mode != "online":
                    raise
                self.log(
                    f"warning: W&B online start failed ({type(e).__name__}: {_scrub(e)}); "
                    f"logging offline to {self.dir}/wandb, upload later with `dw sync`"
                )
                try:
                    wandb.teardown()
                except Exception:
                    pass
                mode = "offline"
                self.run = self._init(wandb, mode)
            self.mode = mode
            if mode == "online":
                start = int(getattr(self.run, "starting_step", 0) or 0)
                self.floor = start - 1 if self.run.resumed and start > 0 else -1
            else:
                self.floor = offline_last
            self._backfill(resume_step)
        except Exception as e:
            self._fail("start", e)

    def _backfill(self, resume_step: int) -> None:
        """Local rows in (floor, resume_step] that W&B does not hold yet."""
        if resume_step <= self.floor:
            return
        for name, probe in (("metrics.jsonl", False), ("probes.jsonl", True)):
            for r in read_jsonl(self.dir / name):
                if self.floor < int(r.get("step", 0)) <= resume_step:
                    self.add(r, probe=probe)
        self.flush()

    # rows ---------------------------------------------------------------------------
    def add(self, row: dict, probe: bool = False) -> None:
        if not self.alive:
            return
        try:
            step = int(row["step"])
            if step <= self.floor:
                return
            out = self._rows.setdefault(step, {})
            if probe:
                out.update(self._probe_payload(row))
            else:
                out.update({k: _clean(v) for k, v in row.items() if k != "step" and v is not None})
        except Exception as e:
            self._fail("log", e)

    def _probe_payload(self, row: dict) -> dict:
        import wandb

        vectors: dict[str, list] = {}
        for k, v in row.items():
            if isinstance(v, dict):
                vectors.update({f"{k}/{kk}": vv for kk, vv in v.items() if isinstance(vv, list)})
            elif isinstance(v, list):
                vectors[k] = v
        out = {"tokens": row["tokens"]} if "tokens" in row else {}
        form = setting(self.t, "probes", "histogram")
        if form in ("table", "both") and vectors:
            n = max(len(v) for v in vectors.values())
            data = [
                [i, *(_clean(float(v[i])) if i < len(v) and v[i] is not None else None for v in vectors.values())]
                for i in range(n)
            ]
            out["probes/layers"] = wandb.Table(columns=["layer", *vectors], data=data)
        if form in ("histogram", "both"):
            for name, vec in vectors.items():
                vals = [x if isinstance(x, (int, float)) and math.isfinite(x) else 0.0 for x in vec]
                out[f"probes/{name}"] = wandb.Histogram(np_histogram=(vals, list(range(len(vals) + 1))))
        return out

    def flush(self) -> None:
        if not self.alive:
            self._rows = {}
            return
        if self.run is None or not self._rows:
            return
        try:
            for step in sorted(self._rows):
                if step > self.floor:
                    self.run.log(self._rows[step], step=step, commit=True)
                    self.floor = step
            self._rows = {}
        except Exception as e:
            self._fail("log", e)

    def finish(self, summary: dict) -> None:
        self.flush()
        if not self.alive or self.run is None:
            return
        try:
            status = summary.get("status")
            self.run.summary.update({k: v for k, v in summary.items() if v is not None})
            if status == "preempted":
                self.run.mark_preempting()
            self.run.finish(exit_code=0 if status in ("done", "diverged") else 1)
            self.run = None
        except Exception as e:
            self._fail("finish", e)
