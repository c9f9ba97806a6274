"""``dw analyze``'s library: a run directory's checkpoint -> analysis.json; a sweep's finished runs.

    doc = analyse_run("runs/demo/3f2a...", checkpoint="final", tokens=8192)
    docs = analyse_sweep("demo", progress=lambda done, total, run: ...)

The model is rebuilt from the run's ``config.yaml`` and loaded, unsharded on
the CPU, from its checkpoint (``checkpoint.read_model``, after the manifest
check); the measures are ``measure/``'s, on the fixed evaluation set of the
run's data and seq_len (``measure.inside.eval_set``).  ``train.analyze_at_end``
calls ``analyse_run`` on the finished run's final checkpoint, so the numbers
are those ``dw analyze`` gives.  Documents are written atomically with a
provenance block; format in measure/doc.py.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.config.node import run_config
from depthwidth.core import provenance
from depthwidth.core.atomic import write_json
from depthwidth.core.errors import BadInput, bad
from depthwidth.core.store import run_status, runs_root, store_runs
from depthwidth.measure import doc as adoc
from depthwidth.measure.inside import DEFAULT_TOKENS, analyse, eval_set
from depthwidth.measure.stats import CETT_TARGET
from depthwidth.train import checkpoint


def _config(run_dir: Path):
    from omegaconf import OmegaConf

    p = run_dir / "config.yaml"
    if not p.is_file():
        raise bad("RUN_DIR", str(run_dir), "a run directory holding config.yaml, or a sweep name")
    try:
        return run_config(OmegaConf.to_container(OmegaConf.load(p), resolve=True))  # as the composer gives it
    except Exception as e:
        raise BadInput(f"unreadable {p} ({type(e).__name__})") from None


def find_checkpoint(run_dir: Path, which="final") -> tuple[int, Path]:
    """(step, path) of the newest valid checkpoint (``final``) or of step ``which``; BadInput if absent."""
    ckpt = Path(run_dir) / "ckpt"
    steps = checkpoint.list_steps(ckpt)
    if which in (None, "final"):
        path = checkpoint.latest(ckpt, warn=lambda m: None)
        if path is None:
            raise BadInput(f"no valid checkpoint in {ckpt} (train the run first)")
        return int(path.name.split("_")[1]), path
    try:
        step = int(which)
    except (TypeError, ValueError):
        raise bad("--checkpoint", which, "final or a checkpoint step") from None
    if step not in steps:
        raise bad(
            "--checkpoint",
            which,
            f"final or one of the checkpoints in {ckpt}: " + (", ".join(map(str, steps)) or "none"),
        )
    path = ckpt / f"step_{step:08d}"
    why = checkpoint.verify(path)
    if why is not None:
        raise BadInput(f"checkpoint {path} is corrupt ({why})")
    return step, path


def load_model(run_dir, which="final", device="cpu"):
    """(model on ``device`` in eval mode, config, step) of a run directory's checkpoint."""
    import torch

    from depthwidth.model.gpt import VariableWidthGPT
    from depthwidth.model.resolve import from_config

    device = str(device)  # the trainer passes a torch.device
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise bad("--device", device, "cpu|cuda")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise bad("--device", device, "cpu (no CUDA device is visible)")
    run_dir = Path(run_dir)
    cfg = _config(run_dir)
    step, path = find_checkpoint(run_dir, which)
    model = VariableWidthGPT(from_config(cfg.model), int(cfg.train.seq_len))
    model.load_state_dict(checkpoint.read_model(path))
    model.to(torch.device(device)).eval()
    return model, cfg, step


def analyse_run(
    run_dir,
    checkpoint: str | int = "final",
    tokens: int = DEFAULT_TOKENS,
    *,
    centre: bool = False,
    threshold: float | None = None,
    cett_target: float = CETT_TARGET,
    write: bool = True,
    device="cpu",
) -> dict:
    """Every measure of one run's checkpoint (fp32, on ``device``); written to analysis.json
    (or analysis_step_N.json).  SwiGLU units: active when |a| >= the layer's CETT threshold at
    ``cett_target`` (``measure.inside``), or >= ``threshold`` in every layer when one is given."""
    from depthwidth.data.source import make_source

    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise bad("--tokens", tokens, "an integer >= 1")
    run_dir = Path(run_dir)
    model, cfg, step = load_model(run_dir, checkpoint, device)
    T = int(cfg.train.seq_len)
    source = make_source(cfg.data, T)
    x, y = eval_set(source, T, tokens)
    body = analyse(model, x, y, centre=centre, threshold=threshold, cett_target=cett_target)
    spec = model.spec
    status = run_status(run_dir)
    out = {
        "schema": adoc.SCHEMA,
        "run_id": cfg.get("run_id"),
        "run_dir": str(run_dir),
        "step": step,
        "checkpoint": f"ckpt/step_{step:08d}",
        "run_status": status,
        "shape": str(cfg.model.shape) if not cfg.model.get("widths") else "custom",
        "depth": spec.depth,
        "width": int(cfg.model.width),
        "widths": list(spec.widths),
        **body,
    }
    out["eval"] = {"source": source.name, "split": "val", **body["eval"]}
    out["provenance"] = provenance.record(device=str(device), precision="fp32", data=source.fingerprint)
    if write:
        write_json(adoc.path_for(run_dir, None if checkpoint in (None, "final") else step), out)
    return out


def at_end(run_dir, log, device="cpu") -> None:
    """train.analyze_at_end: analyse the finished run; a failure is a warning, never the run's."""
    try:
        d = analyse_run(run_dir, device=device)
        low = min(d["layers"], key=lambda r: r["entropy_prefix"])
        log(f"analysis: {adoc.path_for(run_dir)} (min entropy {low['entropy_prefix']:.3f} at layer {low['layer']})")
    except Exception as e:
        log(
            f"warning: analysis failed ({type(e).__name__}: {' '.join(str(e).split())[:200]}); "
            f"rerun it with dw analyze {run_dir}"
        )


def pending(name: str, root=None, checkpoint: str | int = "final") -> list[Path]:
    """The finished (status done) run directories of sweep ``name`` with no analysis of ``checkpoint`` yet
    (or only one of an older schema, measured with older definitions: ``measure.doc.current``)."""
    sweep = runs_root(root) / name
    if not sweep.is_dir():
        raise bad("RUN_DIR|SWEEP", name, f"a run directory or a sweep under {runs_root(root)} (set --root or DW_RUNS)")
    step = None if checkpoint in (None, "final") else int(checkpoint)
    # the manifest's runs only: never a copy of one, nor a folder it does not know (nor one outside the store)
    dirs, _ = store_runs(sweep, writing=True)
    return [d for d in sorted(dirs.values()) if run_status(d) == "done" and not adoc.current(d, step)]


def analyse_sweep(
    name: str,
    root=None,
    checkpoint: str | int = "final",
    tokens: int = DEFAULT_TOKENS,
    *,
    centre: bool = False,
    threshold: float | None = None,
    cett_target: float = CETT_TARGET,
    progress=None,
    device="cpu",
) -> list[dict]:
    """Analyse every finished run of a sweep that has none yet, or only an older schema's (rerun: only the rest).
    ``progress(done, total, run_dir)`` is called after each run."""
    todo = pending(name, root, checkpoint)
    out = []
    for i, d in enumerate(todo):
        out.append(
            analyse_run(
                d, checkpoint, tokens, centre=centre, threshold=threshold, cett_target=cett_target, device=device
            )
        )
        if progress is not None:
            progress(i + 1, len(todo), d)
    return out
