"""The PFN: an Equinox transformer encoder over context and query tokens, with a Riemann ("bar") output.

Tokens. A context point is embedded from ``(u, z)`` (normalised ln x and ln y, see :func:`prior.normalize`), a
query point from ``u`` alone (plus a learned "query" offset). Every token attends to the context tokens only
(keys/values are masked to the context), so queries never see each other and a query's prediction does not depend
on which other points are asked about at the same time.

Output. Each token's head gives logits over ``n_bins`` bins whose borders are quantiles of normalised targets drawn
from the prior (computed once before training and stored with the weights): a full-support bar distribution with
half-normal tails (:class:`bayescale.pfn.bar.BarDistribution`, Müller et al. 2022).

The network computes in float32 (training speed); the bar distribution is evaluated in float64 at prediction
time (:mod:`bayescale.pfn.infer`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import equinox as eqx
import jax
import jax.numpy as jnp

__all__ = ["CONFIGS", "PFN", "PFNConfig", "n_params"]

F32 = jnp.float32


@dataclass(frozen=True)
class PFNConfig:
    """Sizes of the network and of the training run."""

    d_model: int = 128
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 256
    n_bins: int = 256
    n_points: int = 48  # positions per training curve (context + targets)
    batch: int = 32
    lr: float = 1e-3
    warmup: int = 500
    steps: int = 30000
    weight_decay: float = 1e-2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PFNConfig":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


CONFIGS = {
    "tiny": PFNConfig(d_model=32, n_layers=1, n_heads=2, d_ff=64, n_bins=64, n_points=24, batch=8, lr=3e-3,
                      warmup=5, steps=60),
    "small": PFNConfig(),
    # sized for a GPU: ~4.3M parameters (under a fifth of NSL-PFN's 26.8M), longer curves, big batches
    "base": PFNConfig(d_model=256, n_layers=6, n_heads=8, d_ff=768, n_bins=1000, n_points=64, batch=256, lr=3e-4,
                      warmup=2000, steps=100000),
}


class _Block(eqx.Module):
    ln1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    ln2: eqx.nn.LayerNorm
    ff1: eqx.nn.Linear
    ff2: eqx.nn.Linear

    def __init__(self, cfg: PFNConfig, key):
        k1, k2, k3 = jax.random.split(key, 3)
        self.ln1 = eqx.nn.LayerNorm(cfg.d_model, dtype=F32)
        self.attn = eqx.nn.MultiheadAttention(cfg.n_heads, cfg.d_model, key=k1, dtype=F32)
        self.ln2 = eqx.nn.LayerNorm(cfg.d_model, dtype=F32)
        self.ff1 = eqx.nn.Linear(cfg.d_model, cfg.d_ff, key=k2, dtype=F32)
        self.ff2 = eqx.nn.Linear(cfg.d_ff, cfg.d_model, key=k3, dtype=F32)

    def __call__(self, h, mask, n_keys):
        a = jax.vmap(self.ln1)(h)
        h = h + self.attn(a, a[:n_keys], a[:n_keys], mask=mask)
        b = jax.vmap(self.ln2)(h)
        return h + jax.vmap(self.ff2)(jax.nn.gelu(jax.vmap(self.ff1)(b)))


class PFN(eqx.Module):
    """``model(u, z, ctx, n_keys=None)`` -> logits (L, n_bins) for one curve of L tokens (vmap for batches).

    ``n_keys``: when every context token lies among the first ``n_keys`` positions, attention reads keys and values
    from those positions only; the result is the same (the others are masked out of the keys) at a cost linear in L
    instead of quadratic, so a long run of queries costs little more than the queries themselves."""

    ctx_in: eqx.nn.Linear
    qry_in: eqx.nn.Linear
    emb_out: eqx.nn.Linear
    blocks: list
    ln_out: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(self, cfg: PFNConfig, key):
        ks = jax.random.split(key, cfg.n_layers + 4)
        d = cfg.d_model
        self.ctx_in = eqx.nn.Linear(2, d, key=ks[0], dtype=F32)
        self.qry_in = eqx.nn.Linear(1, d, key=ks[1], dtype=F32)
        self.emb_out = eqx.nn.Linear(d, d, key=ks[2], dtype=F32)
        self.blocks = [_Block(cfg, k) for k in ks[4:]]
        self.ln_out = eqx.nn.LayerNorm(d, dtype=F32)
        self.head = eqx.nn.Linear(d, cfg.n_bins, key=ks[3], dtype=F32)

    def __call__(self, u, z, ctx, n_keys: int | None = None):
        n_keys = u.shape[0] if n_keys is None else n_keys
        u, z = u.astype(F32), jnp.where(ctx, z, 0.0).astype(F32)
        hc = jax.vmap(self.ctx_in)(jnp.stack([u, z], -1))
        hq = jax.vmap(self.qry_in)(u[:, None])
        h = jax.vmap(self.emb_out)(jax.nn.gelu(jnp.where(ctx[:, None], hc, hq)))
        mask = jnp.broadcast_to(ctx[None, :n_keys], (u.shape[0], n_keys))
        for blk in self.blocks:
            h = blk(h, mask, n_keys)
        return jax.vmap(self.head)(jax.vmap(self.ln_out)(h))


def n_params(model) -> int:
    """Number of trainable scalars (array leaves) of a model."""
    return int(sum(x.size for x in jax.tree_util.tree_leaves(eqx.filter(model, eqx.is_array))))

