"""The model card (README.md) of an exported folder: which run, which checkpoint, what it measured.

Everything in it is read from the run directory (``config.yaml``, ``summary.json``,
``metrics.jsonl``) or from config.json's ``dw`` block; nothing is recomputed, so the card
states the losses dw measured while training, and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from depthwidth.core.atomic import read_jsonl


def _summary(run_dir: Path) -> dict:
    try:
        s = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return s if isinstance(s, dict) else {}


def _f(v, fmt: str = ".4f") -> str:
    return "—" if not isinstance(v, (int, float)) or isinstance(v, bool) else format(v, fmt)


def losses(run_dir: Path, step: int) -> list[str]:
    """Markdown lines: the run's final losses (summary.json) and those logged up to ``step`` (metrics.jsonl)."""
    s = _summary(run_dir)
    lines = []
    if s:
        lines += [
            "| run status | steps | tokens | final val loss | last train loss | Bayes loss |",
            "|---|---|---|---|---|---|",
            f"| {s.get('status')} | {s.get('steps')} | {_f(s.get('tokens'), ',')} | {_f(s.get('final_val_loss'))} "
            f"| {_f(s.get('last_loss'))} | {_f(s.get('bayes_loss'))} |",
            "",
        ]
        budgets = [b for b in s.get("budgets") or [] if isinstance(b, dict)]
        if budgets:
            lines += ["Validation loss at each token budget:", "", "| tokens | step | val loss |", "|---|---|---|"]
            lines += [f"| {_f(b.get('tokens'), ',')} | {b.get('step')} | {_f(b.get('val_loss'))} |" for b in budgets]
            lines.append("")
    else:
        lines += ["The run directory holds no summary.json (the run has not finished).", ""]
    rows = [r for r in read_jsonl(run_dir / "metrics.jsonl") if isinstance(r.get("step"), int) and r["step"] <= step]
    train = next((r for r in reversed(rows) if "loss" in r), None)
    val = next((r for r in reversed(rows) if "val_loss" in r), None)
    if train:
        lines.append(
            f"Logged at or before the exported step {step}: train loss {_f(train['loss'])} (step {train['step']})"
        )
        if val:
            lines[-1] += f", val loss {_f(val['val_loss'])} (step {val['step']})"
        lines.append("")
    return lines


def render(run_dir: Path, cfg, dw: dict, config: dict) -> str:
    """README.md for the folder written from run ``run_dir``."""
    spec = dw["spec"]
    run_id, step = dw["run_id"], dw["checkpoint_step"]
    shape = cfg.model.get("shape") if not cfg.model.get("widths") else "custom"
    git = dw["git"]
    commit = (git.get("commit") or "unknown")[:12] + (" (dirty tree)" if git.get("dirty") else "")
    trained = dw["trained_with"]
    remote = "" if dw["stock_class"] else ", trust_remote_code=True"
    if dw["stock_class"]:
        how = f"a stock `transformers` class, no custom code ({dw['why']})"
    else:
        how = (
            "dw's own inference code, `modeling_dw.py` + `configuration_dw.py` in this folder "
            f"(`trust_remote_code=True`), because no stock class computes it: {dw['why']}"
        )
    tok = dw["tokenizer"]
    path = '"path/to/this/folder"'
    load = [f"model = AutoModelForCausalLM.from_pretrained({path}{remote})"]
    if tok["kind"] == "none":
        tok_text = f"No tokenizer files: {tok['note']}."
        load = ["from transformers import AutoModelForCausalLM", "", *load]
    else:
        eos = f" End of text: `{tok['eos_token']}` (id {tok['eos_token_id']})." if tok["eos_token"] else ""
        tok_text = f"`tokenizer.json` ({tok['kind']}): {tok['note']}.{eos}"
        load = ["from transformers import AutoModelForCausalLM, AutoTokenizer", "", *load]
        load.append(f"tokenizer = AutoTokenizer.from_pretrained({path})")
    config_yaml = (run_dir / "config.yaml").read_text().rstrip("\n")
    lines = [
        "---",
        "library_name: transformers",
        "tags:",
        "- dw",
        f"- {dw['class']}",
        "---",
        "",
        f"# dw run {run_id}",
        "",
        f"A {cfg.model.get('preset')} model, shape {shape}, {len(spec['widths'])} layers, h = {spec['embed_width']}, "
        f"widths {spec['widths']}, trained on sequences of {config['max_position_embeddings']} tokens; "
        f"checkpoint step {step}, weights in {dw['dtype']}.",
        "",
        f"Loads as `{dw['class']}`: {how}.",
        "",
        "## Losses measured by dw",
        "",
        *losses(run_dir, step),
        "## Tokenizer",
        "",
        tok_text,
        "",
        "## How to load",
        "",
        "```python",
        *load,
        "```",
        "",
        "## Provenance",
        "",
        f"- run id: `{run_id}` (run directory `{dw['run_dir']}`), checkpoint step {step}",
        f"- exported by dw {dw['version']}, commit {commit}, at {dw['exported_at']}, in {dw['dtype']}",
        f"- trained by dw {trained.get('version')}, commit {(trained.get('commit') or 'unknown')[:12]}"
        + (" (dirty tree)" if trained.get("dirty") else "")
        + f", precision {trained.get('precision')}",
        "",
        "## Run configuration (the run's config.yaml)",
        "",
        "```yaml",
        config_yaml,
        "```",
        "",
    ]
    return "\n".join(lines)
