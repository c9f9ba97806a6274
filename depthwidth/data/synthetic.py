"""``synthetic``: a seeded order-k Markov chain whose achievable loss is known.

The chain (``data.seed``): V symbols, order k; for each of the V^k contexts s,
P(.|s) = (1 - EPS) * Dirichlet(alpha * 1_V) + EPS / V.  The uniform floor EPS
makes the chain irreducible and aperiodic (a unique stationary distribution)
and bounds every surprisal by log(V / EPS).  Small alpha = sparse, peaked
transitions = low entropy.

A window (training or validation) is seq_len + 1 consecutive tokens of the
*stationary* chain: its first k tokens are drawn from the stationary
distribution pi_k of k-tuples, the rest from P.  The model predicts token t+1
from tokens 0..t, t = 0..seq_len-1, so the Bayes-optimal expected loss,
averaged over the window's positions as training averages it, is exactly

    bayes_loss(T) = (1/T) * sum_{t=0}^{T-1} c_t,
    c_t = H(X_{t+1} | X_0..X_t) = H_{t+2} - H_{t+1}   if t + 1 < k   (short context)
        = H = sum_s pi_k(s) H(P(.|s))                 otherwise    (entropy rate)

with H_m the entropy of the stationary m-gram marginal (m <= k).  Nothing is
estimated: pi_k comes from power iteration to 1e-14 in L1, everything else is a
finite sum.  ``bayes_loss`` lower-bounds the *expected* loss of any predictor
on these windows; a finite validation set scatters around its expectation
(``true_nll`` gives the exact per-token loss of the Bayes predictor on any
batch, for a paired comparison).

Data never repeats: every batch is fresh draws from the chain (train batches
from the run seed, the fixed validation set from ``data.seed``), so
``n_tokens`` is reported as ``UNBOUNDED``.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from depthwidth.core.errors import BadInput, WorkFailed, bad
from depthwidth.data.base import TokenSource

EPS = 1e-3  # uniform floor mixed into every transition row
MAX_TABLE = 1 << 24  # V^(k+1) entries at most (128 MiB of float64)
UNBOUNDED = 2**62  # n_tokens of a source that never runs out
_FIXED_VAL = 2  # rng tag of val_batches (samplers use 0 = train, 1 = val)


class MarkovChain:
    def __init__(self, V: int, k: int, alpha: float, seed: int):
        self.V, self.k, self.alpha, self.seed = V, k, alpha, seed
        rng = np.random.default_rng([seed, 0x5EED])
        P = rng.dirichlet(np.full(V, alpha), size=V**k)
        P = (1.0 - EPS) * P + EPS / V
        self.P = P / P.sum(axis=1, keepdims=True)  # (V^k, V), row s = context index
        self.cdf = np.cumsum(self.P, axis=1)
        self.cdf[:, -1] = 1.0
        self.pi = self._stationary()  # (V^k,)
        self.pi_cdf = np.cumsum(self.pi)
        self.pi_cdf[-1] = 1.0
        self.H = float(np.sum(self.pi * _entropy_rows(self.P)))
        # H_m, m = 0..k: entropies of the stationary m-gram marginals
        pk = self.pi.reshape((V,) * k)
        self.Hm = [0.0] + [_entropy(pk.sum(axis=tuple(range(m, k))).ravel()) for m in range(1, k + 1)]
        # log p(x_m | x_0..x_{m-1}) tables for short contexts, m = 1..k-1
        self._short = []
        for m in range(1, k):
            joint = pk.sum(axis=tuple(range(m + 1, k))) if m + 1 < k else pk
            ctx = joint.sum(axis=-1, keepdims=True)
            self._short.append(np.log(joint) - np.log(ctx))  # shape (V,)*(m+1)

    def _stationary(self) -> np.ndarray:
        V, k = self.V, self.k
        Pk = self.P.reshape(V, V ** (k - 1), V)  # (first symbol, rest, next)
        pi = np.full(V**k, 1.0 / V**k)
        for _ in range(100_000):
            new = np.einsum("ar,arc->rc", pi.reshape(V, -1), Pk).ravel()
            new /= new.sum()
            if np.abs(new - pi).sum() < 1e-14:
                return new
            pi = new
        raise WorkFailed(f"synthetic chain V={V} k={k}: stationary distribution did not converge")

    # -- exact losses --------------------------------------------------------
    def position_losses(self, seq_len: int) -> np.ndarray:
        """c_t for t = 0..seq_len-1 (nats)."""
        out = np.full(seq_len, self.H)
        for t in range(min(seq_len, self.k - 1)):  # context of t + 1 < k tokens
            out[t] = self.Hm[t + 2] - self.Hm[t + 1]
        return out

    def bayes_loss(self, seq_len: int) -> float:
        return float(self.position_losses(seq_len).mean())

    @property
    def unigram_loss(self) -> float:
        """Loss of the best context-free predictor (the stationary unigram)."""
        return self.Hm[1]

    @property
    def bigram_loss(self) -> float:
        """Loss of the best predictor that sees only the previous token."""
        if self.k == 1:
            return self.H
        return self.Hm[2] - self.Hm[1]

    # -- sampling ------------------------------------------------------------
    def sample(self, rng: np.random.Generator, batch: int, length: int) -> np.ndarray:
        """(batch, length) int64 windows of the stationary chain."""
        V, k = self.V, self.k
        w = np.empty((batch, length), dtype=np.int64)
        s = np.minimum(np.searchsorted(self.pi_cdf, rng.random(batch), side="right"), V**k - 1)
        for j in range(min(k, length)):
            w[:, j] = (s // V ** (k - 1 - j)) % V
        for t in range(k, length):
            u = rng.random(batch)
            c = np.minimum((self.cdf[s] < u[:, None]).sum(axis=1), V - 1)
            w[:, t] = c
            s = (s * V + c) % V**k
        return w

    def true_nll(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """-log p(y_t | x_0..x_t) under the chain, for windows that start at x[:, 0]."""
        x, y = np.asarray(x, dtype=np.int64), np.asarray(y, dtype=np.int64)
        B, T = x.shape
        w = np.concatenate([x[:, :1], y], axis=1)  # the full window, (B, T+1)
        out = np.empty((B, T))
        V, k = self.V, self.k
        for t in range(min(k - 1, T)):  # short contexts: positions t with t + 1 < k
            out[:, t] = -self._short[t][tuple(w[:, i] for i in range(t + 2))]
        if T >= k:
            ctx = np.lib.stride_tricks.sliding_window_view(w[:, :T], k, axis=1)  # (B, T-k+1, k)
            s = ctx @ (V ** np.arange(k - 1, -1, -1, dtype=np.int64))
            out[:, k - 1 :] = -np.log(self.P[s, w[:, k:]])
        return out


class SyntheticSource(TokenSource):
    def __init__(self, chain: MarkovChain, seq_len: int):
        self.chain = chain
        self.name, self.vocab_size = "synthetic", chain.V
        self.seq_len = seq_len
        self.bayes_loss = chain.bayes_loss(seq_len)
        self.meta = {
            "source": "synthetic",
            "process": "order-k Markov chain, Dirichlet transitions + uniform floor",
            "vocab_size": chain.V,
            "order": chain.k,
            "alpha": chain.alpha,
            "seed": chain.seed,
            "eps": EPS,
            "seq_len": seq_len,
            "entropy_rate": chain.H,
            "bayes_loss": self.bayes_loss,
            "bayes_loss_method": "exact (stationary windows; short-context positions use m-gram marginals)",
            "unigram_loss": chain.unigram_loss,
            "bigram_loss": chain.bigram_loss,
            "tokens": {"train": "unbounded", "val": "unbounded"},
        }

    def n_tokens(self, split: str) -> int:
        if split not in ("train", "val"):
            raise bad("split", split, "train, val")
        return UNBOUNDED

    def true_nll(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return self.chain.true_nll(x, y)

    def _random_windows(self, split, rng, batch, seq_len):
        return self.chain.sample(rng, batch, seq_len + 1)

    def _fixed_windows(self, count, seq_len):
        rng = np.random.default_rng([self.chain.seed, _FIXED_VAL, seq_len])
        return self.chain.sample(rng, count, seq_len + 1)


def synthetic_source(cfg: Mapping, seq_len: int) -> SyntheticSource:
    V, k = cfg["vocab_size"], cfg["order"]
    alpha, seed = cfg["alpha"], cfg["seed"]
    if not _is_int(V) or not 2 <= V <= 65536:
        raise bad("data.vocab_size", V, "an integer in [2, 65536] for data=synthetic")
    if not _is_int(k) or not 1 <= k <= 8:
        raise bad("data.order", k, "an integer in [1, 8]")
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.001 <= alpha <= 1000:
        raise bad("data.alpha", alpha, "a number in [0.001, 1000]")
    if not _is_int(seed) or seed < 0:
        raise bad("data.seed", seed, "an integer >= 0")
    if V ** (k + 1) > MAX_TABLE:
        raise BadInput(
            f"data.vocab_size {V} with data.order {k} needs V^(k+1) = {V ** (k + 1)} "
            f"transition entries (allowed: at most {MAX_TABLE})"
        )
    return SyntheticSource(MarkovChain(int(V), int(k), float(alpha), int(seed)), seq_len)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _entropy_rows(P: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of a strictly positive stochastic matrix."""
    return -np.sum(P * np.log(P), axis=1)


def _entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))
