"""Train the PFN on curves drawn on the fly from the prior (:mod:`bayescale.pfn.prior`).

``bayescale pfn train --config small|base [--steps N] [--max-minutes M] [--out DIR] [--resume] [--seed S]
[--families M2,... --bump-share B --wide-noise-share W]`` (the last three restrict the prior, e.g. to one family)

Each step draws a fresh batch of prior curves (float64), normalises them on their context points, and takes an
AdamW step (optax: global-norm clipping at 1, linear warm-up then cosine decay) on the mean negative log density
of the target points under the bar distribution. The network itself runs in float32. Every ``val_every`` steps
the NLL on held-out prior draws (seeds disjoint from training) is measured; the best weights so far are written to
``DIR/pfn_<config>.npz`` + ``.json`` (config, step, validation NLL and its history, training time and hardware,
sha256 of the ``.npz``; the bin borders are in the ``.npz``), and a resumable checkpoint (weights, optimizer state,
step) to ``DIR/train_state/pfn_<config>.ckpt.npz``. ``--resume`` continues from that checkpoint. Training stops at
``--steps`` or after ``--max-minutes`` of this run's wall clock, whichever comes first (the learning-rate schedule is
set by ``--steps``).
At the end, the recalibration map of the best weights is fitted on fresh prior draws and added to their JSON
(:mod:`bayescale.pfn.calibrate`; ``calibration_curves=0`` skips it). The weights' file format:
:mod:`bayescale.pfn.weights`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from tqdm.auto import tqdm

from bayescale.config import cpu_model
from bayescale.pfn.bar import BarDistribution
from bayescale.pfn.calibrate import fit_recalibration
from bayescale.pfn.network import CONFIGS, PFN, PFNConfig, n_params
from bayescale.pfn.prior import (BUMP_SHARE, FAMILIES, WIDE_NOISE_SHARE, Z_CLIP, check_families, normalize,
                                 sample_batch)
from bayescale.pfn.weights import replace_arrays, save_weights, tree_arrays

__all__ = ["compute_borders", "hardware", "nll", "train", "validation_batches"]

BORDER_SEED = 987_654
VAL_SEED = 10_000_000  # validation draws use seeds from here on; training uses fold_in(seed key, step)


def compute_borders(n_bins: int, n_points: int, *, n_curves: int = 32768, seed: int = BORDER_SEED,
                    families=FAMILIES, bump_share: float = BUMP_SHARE,
                    wide_noise_share: float = WIDE_NOISE_SHARE) -> np.ndarray:
    """Bin borders: quantiles of normalised target values of ``n_curves`` prior curves (clipped to +-Z_CLIP)."""
    zs = []
    per = min(2048, n_curves)
    for i in range(max(1, n_curves // per)):
        d = sample_batch(jax.random.PRNGKey(seed + i), per, n_points, "mixed", families, bump_share, wide_noise_share)
        _, z, _ = normalize(d["t"], d["y"], d["ctx"])
        zs.append(np.clip(np.asarray(z)[np.asarray(d["target"])], -Z_CLIP, Z_CLIP))
    z = np.concatenate(zs)
    b = np.quantile(z, np.linspace(0.0, 1.0, n_bins + 1))
    # strictly increasing (ties where many targets coincide would give zero-width bins)
    for i in range(1, len(b)):
        b[i] = max(b[i], b[i - 1] + 1e-4)
    return b


def validation_batches(n_points: int, n_batches: int = 4, batch: int = 256, split: str = "mixed", families=FAMILIES,
                       bump_share: float = BUMP_SHARE, wide_noise_share: float = WIDE_NOISE_SHARE):
    return [sample_batch(jax.random.PRNGKey(VAL_SEED + i), batch, n_points, split, families, bump_share,
                         wide_noise_share) for i in range(n_batches)]


def _prep(d):
    u, z, _ = normalize(d["t"], d["y"], d["ctx"])
    return u, jnp.clip(z, -Z_CLIP, Z_CLIP), d["ctx"], d["target"]


def nll(model, borders, u, z, ctx, target):
    """Training loss: mean of ``-BarDistribution(borders).logpdf`` over the target points of a normalised batch."""
    logits = jax.vmap(model)(u, z, ctx)
    lp = BarDistribution(borders).logpdf(jax.nn.log_softmax(logits, axis=-1), z.astype(jnp.float32))
    w = target.astype(jnp.float32)
    return -jnp.sum(lp * w) / jnp.maximum(jnp.sum(w), 1.0)


@eqx.filter_jit
def _eval(model, borders, u, z, ctx, target):
    return nll(model, borders, u, z, ctx, target), jnp.sum(target)


def _optimizer(cfg: PFNConfig, steps: int):
    sched = optax.warmup_cosine_decay_schedule(0.0, cfg.lr, min(cfg.warmup, max(steps // 10, 1)), max(steps, 2),
                                               end_value=cfg.lr * 0.02)
    return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(sched, weight_decay=cfg.weight_decay))


def hardware() -> str:
    """Where training runs, for the weights' JSON: the device (or CPU model) and the visible cores."""
    cpu = cpu_model()
    dev = jax.devices()[0]
    where = f"{dev.platform}: {getattr(dev, 'device_kind', '')}" if dev.platform != "cpu" else f"cpu: {cpu}"
    return f"{where}, {os.cpu_count()} logical cores visible"


def train(config: str | PFNConfig = "small", *, steps: int | None = None, max_minutes: float | None = None,
          out="pfn_out", resume: bool = False, seed: int = 0, val_every: int = 250, n_val_batches: int = 4,
          val_batch: int = 256, border_curves: int = 32768, families=None, bump_share: float = BUMP_SHARE,
          wide_noise_share: float = WIDE_NOISE_SHARE, progress: bool = True, calibration_curves: int = 4096,
          log=print) -> dict:
    """Train (or resume) and return the metadata of the best weights written (see the module docstring).

    ``families``, ``bump_share`` and ``wide_noise_share`` restrict the prior (:func:`bayescale.pfn.prior.sample_prior`),
    e.g. to one family without bumps for a PFN to compare with that family's NUTS posterior; they are saved with
    the weights and a resume must use the same ones.
    """
    name = config if isinstance(config, str) else "custom"
    fams = check_families(families)
    if not (0.0 <= bump_share <= 1.0 and 0.0 <= wide_noise_share <= 1.0):
        raise ValueError(f"bump_share and wide_noise_share must be in [0, 1], got {bump_share}, {wide_noise_share}")
    prior = {"families": list(fams), "bump_share": float(bump_share), "wide_noise_share": float(wide_noise_share)}
    if isinstance(config, str):
        if config not in CONFIGS:
            raise ValueError(f"unknown PFN config {config!r}; choose one of {sorted(CONFIGS)}")
        cfg = CONFIGS[config]
    else:
        cfg = config
    total = int(steps if steps is not None else cfg.steps)
    if total < 1:
        raise ValueError(f"--steps must be >= 1, got {total}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    best_path, ckpt_path = out / f"pfn_{name}.npz", out / "train_state" / f"pfn_{name}.ckpt.npz"
    ckpt_path.parent.mkdir(exist_ok=True)

    key = jax.random.PRNGKey(seed)
    model = PFN(cfg, jax.random.fold_in(key, 1))
    start, elapsed, best, history, meta = 0, 0.0, float("inf"), [], None
    if resume:
        if not ckpt_path.exists():
            raise FileNotFoundError(f"--resume: no checkpoint {ckpt_path}; start without --resume")
        with np.load(ckpt_path, allow_pickle=False) as ck:
            meta = json.loads(str(ck["meta"]))
        total = int(steps if steps is not None else meta["total"])
    # the schedule follows the (possibly changed) total; the optimizer's step count carries over on resume
    opt = _optimizer(cfg, total)
    opt_state = opt.init(eqx.filter(model, eqx.is_array))
    if resume:
        with np.load(ckpt_path, allow_pickle=False) as ck:
            if meta["config"] != cfg.to_dict():
                raise ValueError(f"checkpoint {ckpt_path} was made with another config: {meta['config']}")
            if meta.get("prior", prior) != prior:  # checkpoints from before this field used the default prior
                raise ValueError(f"checkpoint {ckpt_path} was trained on another prior: {meta['prior']}; "
                                 f"resume with those families/shares or start afresh in another --out")
            n_m = meta["n_model"]
            arrs = [ck[f"a{i:04d}"] for i in range(meta["n_arrays"])]
            borders = ck["borders"]
        model = replace_arrays(model, arrs[:n_m])
        opt_state = replace_arrays(opt_state, arrs[n_m:])
        start, elapsed, best, history = meta["step"], meta["elapsed"], meta["best"], meta["history"]
        log(f"resumed from {ckpt_path} at step {start} (best validation NLL {best:.4f})")
    else:
        borders = compute_borders(cfg.n_bins, cfg.n_points, n_curves=border_curves, families=fams,
                                  bump_share=bump_share, wide_noise_share=wide_noise_share)
    b32 = jnp.asarray(borders, jnp.float32)
    val = [_prep(d) for d in validation_batches(cfg.n_points, n_val_batches, val_batch, families=fams,
                                                bump_share=bump_share, wide_noise_share=wide_noise_share)]
    log(f"PFN config {name}: {n_params(model):,} parameters; {total} steps of {cfg.batch} curves x {cfg.n_points} points")

    @eqx.filter_jit
    def step_fn(model, opt_state, k):
        d = sample_batch(k, cfg.batch, cfg.n_points, "mixed", fams, bump_share, wide_noise_share)
        u, z, ctx, target = _prep(d)
        loss, grads = eqx.filter_value_and_grad(nll)(model, b32, u, z, ctx, target)
        updates, opt_state = opt.update(grads, opt_state, eqx.filter(model, eqx.is_array))
        return eqx.apply_updates(model, updates), opt_state, loss

    def validate(model):
        tot, cnt = 0.0, 0.0
        for u, z, ctx, target in val:
            loss, n = _eval(model, b32, u, z, ctx, target)
            tot, cnt = tot + float(loss) * float(n), cnt + float(n)
        return tot / cnt

    def checkpoint(step):
        arrs = tree_arrays(model) + tree_arrays(opt_state)
        meta = {"config": cfg.to_dict(), "n_model": len(tree_arrays(model)), "n_arrays": len(arrs), "step": step,
                "elapsed": elapsed, "best": best, "history": history, "total": total, "seed": seed, "prior": prior}
        tmp = ckpt_path.with_suffix(".tmp.npz")
        np.savez(tmp, meta=np.array(json.dumps(meta)), borders=np.asarray(borders),
                 **{f"a{i:04d}": a for i, a in enumerate(arrs)})
        os.replace(tmp, ckpt_path)

    bar = None
    if progress:
        bar = tqdm(total=total, initial=start, desc=f"PFN {name}", unit="step", mininterval=5.0)
    t_run = time.time()  # --max-minutes counts this invocation's wall clock, not time before a resume
    t0, info, step, ema = t_run - elapsed, None, start, None
    if start == 0:
        history.append([0, 0.0, None, validate(model)])
        log(f"step 0/{total}  val NLL {history[-1][3]:.4f} (untrained)")
    else:  # the prior (hence the validation draws) may have changed since the checkpoint: re-measure
        best = validate(model)
        history.append([start, round(elapsed, 1), None, best])
        log(f"step {start}/{total}  val NLL {best:.4f} (restored weights, current validation draws)")
    while step < total:
        model, opt_state, loss = step_fn(model, opt_state, jax.random.fold_in(key, 1_000_000 + step))
        step += 1
        if bar is not None:
            bar.update(1)
        if step % 25 == 0 or step == total:
            lv = float(loss)
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
            if bar is not None:
                bar.set_postfix(loss=f"{ema:.3f}", best_val=f"{best:.3f}")
        elapsed = time.time() - t0
        over = max_minutes is not None and time.time() - t_run > 60.0 * max_minutes
        if step % val_every == 0 or step == total or over:
            v = validate(model)
            history.append([step, round(elapsed, 1), float(ema if ema is not None else float(loss)), v])
            if v < best:
                best = v
                info = save_weights(model, cfg, borders, best_path, {
                    "config_name": name, "step": step, "total_steps": total, "val_nll": v,
                    "train_seconds": round(elapsed, 1), "hardware": hardware(), "seed": seed,
                    "families": list(fams), "prior": prior,
                    "val_draws": f"{n_val_batches} x {val_batch} prior curves (seeds {VAL_SEED}+), normalised-z NLL per target",
                    "history": "[step, seconds, train NLL (EMA), validation NLL]", "history_rows": history})
            checkpoint(step)
            log(f"step {step}/{total}  train {history[-1][2]:.4f}  val NLL {v:.4f}  best {best:.4f}  "
                f"{elapsed / 60:.1f} min")
        if over:
            log(f"stopped at the {max_minutes} min wall-clock cap (step {step})")
            break
    if bar is not None:
        bar.close()
    if best_path.exists() and calibration_curves > 0:
        fit_recalibration(best_path, n_curves=calibration_curves, families=fams, log=log)
        info = None
    if info is None and best_path.exists():
        info = json.loads(best_path.with_suffix(".json").read_text())
    hist = {"history": history}
    (ckpt_path.parent / f"pfn_{name}.history.json").write_text(json.dumps(hist) + "\n")
    return info
