"""dw's model class for EleutherAI's lm-evaluation-harness: a run's checkpoint and its text tokenizer.

    lm = DwLM("runs/demo/3f2a1c0b9d8e", checkpoint="final", device="cpu", batch_size=8)
    lm_eval.simple_evaluate(model=lm, tasks=["hellaswag"])

Registered as ``dw`` when imported, so the harness's own command line takes it too
(``--model dw --model_args run_dir=RUN_DIR,checkpoint=final``).  This module
imports lm_eval (and torch through it): only ``dw eval`` imports it.

Scoring is batched: the requests are sorted by length, a batch of them is
right-padded into one (B, T) tensor and run in one forward, and the targets'
log-probabilities are gathered from the logits (gather minus logsumexp), never
token by token.  Right padding is exact for a causal model: no real position
attends to a pad, so a request's score does not depend on its batch (up to
float rounding).  No window is longer than the run's ``train.seq_len`` (the
model's context; its RoPE tables stop there): a longer context is cut on the
left, and rolling windows are the harness's own (``get_rolling_token_windows``
with one token of context, as its HF model does).  Generation is greedy, a
batch of prompts at a time, each new token from one forward of the whole
window (dw's model keeps no KV cache).  fp32 throughout (``load_model``).
"""

from __future__ import annotations

import torch
from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model
from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

from depthwidth.core.errors import BadInput, bad
from depthwidth.evals.tokenizer import text_tokenizer

MAX_GEN_TOKS = 256  # the harness's default for generate_until tasks that set none


@register_model("dw")
class DwLM(TemplateLM):
    def __init__(self, run_dir, checkpoint="final", device="cpu", batch_size=8, max_gen_toks=MAX_GEN_TOKS):
        from depthwidth.train.analysis import load_model

        super().__init__()
        self.batch_size = _positive("--batch-size", batch_size)
        self.max_gen_toks = _positive("max_gen_toks", max_gen_toks)
        self.model, self.run_cfg, self.step = load_model(run_dir, checkpoint, device)
        self.text = text_tokenizer(self.run_cfg.data, run_dir)
        self.max_length = int(self.run_cfg.train.seq_len)
        self._device = next(self.model.parameters()).device

    # -- what TemplateLM asks for -------------------------------------------
    @property
    def eot_token_id(self) -> int:
        """The id documents are conditioned on (``TemplateLM.prefix_token_id`` reads it)."""
        return self.text.prefix

    def tok_encode(self, string: str, add_special_tokens=None, **kwargs) -> list[int]:
        return self.text.encode(string)

    def tok_decode(self, ids: list[int]) -> str:
        return self.text.decode([i for i in ids if i != self.text.eot])

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """((context, continuation), context ids, continuation ids) -> (log p(continuation), greedy?)."""
        items = []
        for _, ctx, cont in requests:
            if len(cont) > self.max_length:
                raise BadInput(
                    f"a continuation of {len(cont)} tokens is longer than the model's context "
                    f"(train.seq_len {self.max_length}): it cannot be scored in one window"
                )
            items.append(((ctx + cont)[-(self.max_length + 1) :], len(cont)))
        return self._score(items)

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Each document's whole log-likelihood, conditioned on ``prefix``, every token predicted once."""
        items, owner = [], []
        for i, req in enumerate(requests):
            windows = get_rolling_token_windows(self.tok_encode(req.args[0]), self.prefix_token_id, self.max_length, 1)
            for ctx, pred in map(make_disjoint_window, windows):
                items.append((ctx + pred, len(pred)))
                owner.append(i)
        sums = [0.0] * len(requests)
        for i, (ll, _) in zip(owner, self._score(items)):
            sums[i] += ll
        return sums

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations, each cut before the first of its ``until`` strings."""
        asks = [
            (self.tok_encode(ctx) or [self.prefix_token_id], *self._gen_options(kw))
            for ctx, kw in (r.args for r in requests)
        ]
        out: list[str] = [""] * len(asks)
        for idx in self._batches([len(a[0]) for a in asks]):
            for i, text in zip(idx, self._generate([asks[i] for i in idx])):
                out[i] = text
        return out

    # -- the batched work -----------------------------------------------------
    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices in batches of ``batch_size``, longest first (little padding; the order is restored)."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def _score(self, items: list[tuple[list[int], int]]) -> list[tuple[float, bool]]:
        """(window ids, n): log-probability of the window's last n ids given the ids before each,
        and whether each of them is the argmax there.  Items that feed the model the same ids (a
        question's one-token choices " A" ... " D" share their context) are scored from one
        forward row, as the harness's own hf model does with its logits cache."""
        out: list[tuple[float, bool]] = [(0.0, True)] * len(items)
        readers: dict[tuple, list[int]] = {}  # each distinct model input -> the items that read it
        for i, (ids, _) in enumerate(items):
            readers.setdefault(tuple(ids[:-1]), []).append(i)
        inputs = list(readers)
        for idx in self._batches([len(w) for w in inputs]):
            rows = [inputs[j] for j in idx]
            mine = [[(i, items[i]) for i in readers[w]] for w in rows]
            for i, r in self._forward_scores(rows, mine):
                out[i] = r
        return out

    @torch.no_grad()
    def _forward_scores(self, rows: list[tuple], readers: list[list]) -> list[tuple[int, tuple[float, bool]]]:
        """One forward of the distinct inputs ``rows`` (right-padded); each reader (item index,
        (ids, n)) of a row gathers its n targets there."""
        x = torch.zeros(len(rows), max(len(w) for w in rows), dtype=torch.long)
        for r, w in enumerate(rows):
            x[r, : len(w)] = torch.tensor(w, dtype=torch.long)
        logits = self.model(x.to(self._device))[0].float()
        lse, best = torch.logsumexp(logits, dim=-1), logits.argmax(-1)  # once per row, not per reader
        who, at_row, at_pos, target, order = [], [], [], [], []
        for r, group in enumerate(readers):
            for i, (ids, k) in group:
                m = len(ids) - 1  # the input's length: targets are the ids after positions m-k .. m-1
                who += [len(order)] * k
                at_row += [r] * k
                at_pos += range(m - k, m)
                target += ids[-k:]
                order.append(i)
        dev = self._device
        rr, pp, tt = (torch.tensor(v, dtype=torch.long, device=dev) for v in (at_row, at_pos, target))
        ww = torch.tensor(who, dtype=torch.long, device=dev)
        logp = (logits[rr, pp, tt] - lse[rr, pp]).double()
        total = torch.zeros(len(order), dtype=torch.float64, device=dev).index_add_(0, ww, logp)
        missed = torch.zeros(len(order), dtype=torch.long, device=dev).index_add_(0, ww, (best[rr, pp] != tt).long())
        return list(zip(order, zip(total.tolist(), (missed == 0).tolist())))

    def _gen_options(self, kw: dict) -> tuple[list[str], int]:
        """(until strings, max new tokens) of one request's generation kwargs."""
        kw = dict(kw or {})
        if kw.get("do_sample"):
            raise BadInput("a task asks for sampling (do_sample: true); dw's model class decodes greedily")
        until = kw.get("until")
        until = [u for u in ([until] if isinstance(until, str) else list(until or [])) if u]  # "" would stop at once
        return until, _positive("max_gen_toks", kw.get("max_gen_toks", self.max_gen_toks))

    @torch.no_grad()
    def _generate(self, batch: list[tuple[list[int], list[str], int]]) -> list[str]:
        """Greedy decoding of a batch: every step one forward over each live row's last
        ``max_length`` ids (right-padded), the next id read at each row's last position."""
        gen: list[list[int]] = [[] for _ in batch]
        live = list(range(len(batch)))
        while live:
            windows = [(batch[r][0] + gen[r])[-self.max_length :] for r in live]
            lengths = torch.tensor([len(w) for w in windows], device=self._device)
            x = torch.zeros(len(windows), int(lengths.max()), dtype=torch.long)
            for row, w in enumerate(windows):
                x[row, : len(w)] = torch.tensor(w, dtype=torch.long)
            logits = self.model(x.to(self._device))[0]
            nxt = logits[torch.arange(len(windows), device=self._device), lengths - 1].argmax(-1).tolist()
            still = []
            for r, t in zip(live, nxt):
                gen[r].append(t)
                _, until, most = batch[r]
                text = self.tok_decode(gen[r])
                if not (t == self.text.eot or len(gen[r]) >= most or any(u in text for u in until)):
                    still.append(r)
            live = still
        return [_cut(self.tok_decode(g), until) for g, (_, until, _) in zip(gen, batch)]


def _cut(text: str, until: list[str]) -> str:
    """``text`` up to the first of the ``until`` strings in it."""
    for u in until:
        text = text.split(u, 1)[0]
    return text


def _positive(name: str, v) -> int:
    """An integer >= 1, also from the harness's ``--model_args`` strings."""
    if isinstance(v, bool) or not str(v).strip().isdigit() or int(v) < 1:
        raise bad(name, v, "an integer >= 1")
    return int(v)
