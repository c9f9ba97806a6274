"""``dw export``: a run's checkpoint as a Hugging Face folder (transformers, lm-eval, vLLM, the Hub)."""

from __future__ import annotations

import sys

import typer

from depthwidth.report.render import emit_json


def export_cmd(
    run_dir: str = typer.Argument(..., help="a run directory (holding config.yaml and ckpt/)"),
    out: str = typer.Argument(..., help="the folder to write (new or empty; --force replaces one)"),
    ckpt: str = typer.Option("final", "--checkpoint", help="final (the newest valid checkpoint) or a step"),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32 | bf16: the weights' dtype in model.safetensors"),
    force: bool = typer.Option(False, "--force", help="replace OUT if it already holds files"),
    as_json: bool = typer.Option(False, "--json", help="print what was written as JSON"),
) -> None:
    """Write a run's checkpoint as a Hugging Face folder: config.json, model.safetensors, tokenizer files,
    generation_config.json and a model card README.md naming the run.

    Example: dw export runs/demo/3f2a1c0b9d8e hf/demo-3f2a --dtype bf16

    A uniform model is written for a stock transformers class (Llama, Granite, GPT-NeoX) where one computes it exactly.

    Any other dw model (variable widths, stabilisers, MoE, ...) ships dw's own modeling_dw.py: trust_remote_code=True.

    Exit codes: 0 ok; 2 bad input (no such run or checkpoint, bad --dtype, OUT not empty).
    """
    from depthwidth.export.hf import export_run

    doc = export_run(run_dir, out, ckpt, dtype, force=force)
    for w in doc["warnings"]:
        sys.stderr.write(f"dw: warning: {w}\n")  # one line, never wrapped
    if as_json:
        emit_json(doc)
        return
    code = "stock class" if doc["stock_class"] else "custom code: trust_remote_code=True"
    tok = doc["tokenizer"]["kind"]
    sys.stdout.write(
        f"dw export: wrote {doc['out']} ({doc['class']}, {code}; run {doc['run_id']} step {doc['checkpoint_step']}, "
        f"{doc['dtype']}; tokenizer: {tok})\n"
    )
