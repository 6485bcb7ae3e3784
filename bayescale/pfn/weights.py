"""PFN weights on disk: ``<name>.npz`` with ``<name>.json`` beside it, sha256-checked before use.

``.npz`` (no pickle): the network's arrays ``p000``, ``p001``, ... (float32, in the order of the Equinox model's
array leaves) and the bin ``borders`` (float64). ``.json``: ``format`` (:data:`FORMAT`), ``config``
(:class:`~bayescale.pfn.network.PFNConfig`), ``sha256`` of the ``.npz``, ``n_params``, the training record (step,
validation NLL and its history, hardware, prior) and, when fitted, the ``recalibration`` map
(:class:`~bayescale.pfn.recalibration.Recalibration`).

Nothing is downloaded: the bundled weights are ``pfn_small`` in :data:`WEIGHTS_DIR` (its ``MODEL_CARD.md`` is
their training record).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bayescale.errors import BayescaleError
from bayescale.pfn.network import PFN, PFNConfig, n_params
from bayescale.pfn.recalibration import Recalibration

__all__ = ["DEFAULT_WEIGHTS", "FORMAT", "PFNWeights", "PFNWeightsError", "WEIGHTS_DIR", "read_weights",
           "replace_arrays", "save_weights", "sha256", "tree_arrays", "weights_path"]

FORMAT = "bayescale-pfn/1"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
DEFAULT_WEIGHTS = "pfn_small"
RETRAIN = f"bayescale pfn train --config small --out {WEIGHTS_DIR}"


class PFNWeightsError(BayescaleError, OSError):
    """The PFN weights are missing, corrupt, or do not match their config."""


class PFNWeights(NamedTuple):
    """Verified weights: the network, its config, bin borders (K + 1,), the JSON metadata, the ``.npz`` path and the
    recalibration map (None when the JSON has no ``recalibration`` entry)."""

    model: PFN
    cfg: PFNConfig
    borders: np.ndarray
    info: dict
    path: Path
    recal: Recalibration | None


def weights_path(name_or_path=None) -> Path:
    """The ``.npz`` of the weights: bundled ``pfn_small`` by default, or a name in the weights folder, or a path."""
    if name_or_path is None:
        return WEIGHTS_DIR / f"{DEFAULT_WEIGHTS}.npz"
    p = Path(name_or_path)
    if p.suffix == ".json":
        p = p.with_suffix(".npz")
    if p.suffix != ".npz" and not p.exists():
        p = WEIGHTS_DIR / f"{p.name}.npz"
    return p


def sha256(path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tree_arrays(tree) -> list[np.ndarray]:
    """The array leaves of an Equinox/JAX pytree (a model or an optimizer state), in leaf order, as NumPy."""
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array))]


def replace_arrays(tree, arrays):
    """``tree`` with its array leaves replaced by ``arrays`` (the order of :func:`tree_arrays`; shapes checked,
    the tree's dtypes kept); raises ValueError on a count or shape mismatch."""
    params, static = eqx.partition(tree, eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(params)
    if len(leaves) != len(arrays):
        raise ValueError(f"expected {len(leaves)} arrays, found {len(arrays)}")
    new = []
    for i, (a, b) in enumerate(zip(leaves, arrays)):
        if tuple(a.shape) != tuple(b.shape):
            raise ValueError(f"array {i} has shape {tuple(b.shape)}, the config expects {tuple(a.shape)}")
        new.append(jnp.asarray(b, dtype=a.dtype))
    return eqx.combine(jax.tree_util.tree_unflatten(treedef, new), static)


def save_weights(model, cfg: PFNConfig, borders, path_npz: Path, meta: dict) -> dict:
    """Write weights (.npz, no pickle) and the JSON beside it (format, config, the .npz's sha256, ``meta``)."""
    path_npz = Path(path_npz)
    path_npz.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"p{i:03d}": a.astype(np.float32) for i, a in enumerate(tree_arrays(model))}
    arrays["borders"] = np.asarray(borders, np.float64)
    tmp = path_npz.with_suffix(".tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path_npz)
    info = {"format": FORMAT, "config": cfg.to_dict(), "weights": path_npz.name, "sha256": sha256(path_npz),
            "n_params": n_params(model), "dtype": "float32 network, float64 prior", **meta}
    path_npz.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def read_weights(path=None) -> PFNWeights:
    """Read and verify weights (:func:`weights_path` of ``path``): format, sha256, config, array shapes, borders,
    recalibration entry; raises :class:`PFNWeightsError` saying what is wrong and how to fix it."""
    p = weights_path(path)
    meta_p = p.with_suffix(".json")
    fix = f"Reinstall bayescale, or retrain the weights: `{RETRAIN}`."
    if not p.exists() or not meta_p.exists():
        missing = [str(q) for q in (p, meta_p) if not q.exists()]
        raise PFNWeightsError(f"PFN weights not found: {', '.join(missing)} missing. {fix}")
    try:
        info = json.loads(meta_p.read_text())
        cfg = PFNConfig.from_dict(info["config"])
        expected = info["sha256"]
    except (ValueError, KeyError, TypeError) as exc:
        raise PFNWeightsError(f"PFN weights metadata {meta_p} is unreadable or incomplete ({exc}). {fix}") from None
    if info.get("format") != FORMAT:
        raise PFNWeightsError(f"PFN weights {meta_p} have format {info.get('format')!r}, this bayescale reads {FORMAT!r}. {fix}")
    got = sha256(p)
    if got != expected:
        raise PFNWeightsError(f"PFN weights {p} are corrupt: sha256 {got[:16]}... does not match {expected[:16]}... "
                              f"recorded in {meta_p.name}. {fix}")
    try:  # the hash matches, but the file may still not be an .npz of weights (its JSON rewritten to match)
        if not zipfile.is_zipfile(p):  # np.load would try it as .npy or pickle and say so
            raise ValueError("it is not a zip archive")
        with np.load(p, allow_pickle=False) as f:
            borders = np.asarray(f["borders"], np.float64)
            n = len([k for k in f.files if k.startswith("p")])
            arrays = [f[f"p{i:03d}"] for i in range(n)]
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError, TypeError) as exc:
        raise PFNWeightsError(f"PFN weights {p} are not a readable weights archive (.npz with 'borders' and "
                              f"'p000', ...): {exc}. {fix} Or give the path of valid weights "
                              f"(.npz written by `bayescale pfn train`, with its .json beside it).") from None
    try:
        model = replace_arrays(PFN(cfg, jax.random.PRNGKey(0)), arrays)
    except (ValueError, KeyError, OSError) as exc:
        raise PFNWeightsError(f"PFN weights {p} do not match their config {meta_p.name}: {exc}. {fix}") from None
    if borders.shape != (cfg.n_bins + 1,) or not np.all(np.diff(borders) > 0):
        raise PFNWeightsError(f"PFN weights {p}: bin borders are malformed. {fix}")
    recal = None
    if "recalibration" in info:
        try:
            recal = Recalibration.from_dict(info["recalibration"])
        except ValueError as exc:
            raise PFNWeightsError(f"PFN weights metadata {meta_p}: the 'recalibration' entry is malformed ({exc}). "
                                  f"Refit it: `bayescale pfn calibrate --weights {p}`, or delete the entry to use the "
                                  "raw network.") from None
    return PFNWeights(model, cfg, borders, info, p, recal)
