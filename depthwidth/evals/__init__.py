"""``dw eval``: downstream evaluation of dw checkpoints through EleutherAI's lm-evaluation-harness.

Modules: ``tokenizer`` (a run's text tokenizer, from its data group), ``harness``
(``DwLM``, the model class registered with the harness as ``dw``; imports lm_eval
and torch), ``builtin`` (``dw_heldout_cloze``: a multiple-choice task dw writes from
the run's own held-out text, so evaluation works offline), ``run`` (one run or a
sweep -> eval.json, ``train.eval_tasks``; lm_eval and torch imported inside its
functions).  The eval.json format lives in ``track/evaldoc.py``, where the run
table, a stage below, can read it.  docs/evals.md.
"""
