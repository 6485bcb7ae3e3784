"""Traced programs kept on disk (``jax.export``), so that a new process skips tracing them.

XLA's persistent cache (:mod:`bayescale.config`) keeps compiled code, but every new process still traces and
lowers the NUTS program of a fit (model, multi-start optimisation, sampler) before it can look the code up: about
1.5 s of a first fit (``benchmarks/first_answer.py``), and again for the noise models' sampling and density
programs of a first prediction (:mod:`bayescale.noise`). :func:`call` saves the lowered program after its first use,
beside the compilation cache (``<cache.dir>/programs``), and later processes load it instead of tracing.

A saved program is found by a digest of everything it was traced from: the caller's ``tag`` (law, likelihood,
sampler settings), the arguments' structure, shapes and dtypes, the device count, the versions of JAX, jaxlib and
NumPyro, and bayescale's own source files. Callers pass a tag only for programs that depend on nothing else (one
of the package's own laws, no progress bar: a host callback cannot be saved). A file that cannot be read or
called is ignored and traced again; with the cache off (``BAYESCALE_JAX_CACHE=off``) nothing is read or written,
but the program still runs as the exported one it would have saved: a program traced straight into XLA can round
differently across several CPU devices (Student-t noise, 2 devices), so the same seed gives the same draws
whether the cache is on or off.

``jax.export`` lowers for older runtimes too: ``lax.lgamma`` and ``lax.digamma`` become hundreds of operations each
rather than calls to the CPU's kernels, which a saved sampler would take seconds more to compile; the fits' noise
models keep them out of their densities (:mod:`bayescale.noise`).

Loading a saved NUTS program's compiled code costs most of a second (XLA links a few hundred kernels). A load
frees most of what it allocates; the C heap then gives those pages back to the system (glibc), so each loaded
program stays resident at its own size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import hashlib
import os
import tempfile
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from bayescale import config

__all__ = ["call", "forget"]

_LOADED: dict = {}  # (tag, arguments' structure and shapes, devices, cache) -> the call of its program, this process


@functools.cache
def _source_digest() -> str:
    """sha256 of bayescale's Python sources and the versions of what traces them."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    for dist in ("jax", "jaxlib", "numpyro"):
        try:
            h.update(f"{dist}={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{dist}=?".encode())
    return h.hexdigest()


def _path(tag: str, shapes, treedef, n_dev: int) -> Path:
    key = repr((tag, str(treedef), list(shapes), n_dev, jax.default_backend(), jax.config.jax_enable_x64,
                _source_digest()))
    return Path(config.settings["cache.dir"]) / "programs" / (hashlib.sha256(key.encode()).hexdigest()[:40] + ".bin")


def _caller(exported, n_dev: int):
    """``exported.call`` compiled (under ``jax.jit``); a program traced over several devices is called on as many
    (its inputs and outputs whole on each: the program splits the chains itself)."""
    if n_dev <= 1:
        run = jax.jit(exported.call)
    else:
        whole = NamedSharding(Mesh(np.array(jax.local_devices()[:n_dev]), ("chain",)), PartitionSpec())
        run = jax.jit(exported.call, in_shardings=whole, out_shardings=whole)
    compiled = run.lower(*(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.in_avals)).compile()
    _release_heap()
    return compiled


@functools.cache
def _malloc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim
    except (OSError, AttributeError, TypeError):  # not glibc (macOS, musl): nothing to release
        return None


def _release_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's ``malloc_trim``). Loading a compiled program frees
    most of what it allocates, but glibc keeps those pages resident: about 100 MiB for a NUTS sampler, which the
    next load then stacks on. Elsewhere a no-op."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _save(path: Path, blob: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)  # whole or absent: a concurrent process never reads half a file
    except OSError:  # a read-only or full disk: the program is simply traced again next time
        pass


def call(fn, tag: str | None, *args, n_dev: int = 1):
    """``fn(*args)`` (``fn`` a JAX-traceable function of array pytrees), through the saved program of ``tag`` when
    there is one (the cache off: exported in memory, never saved); ``tag=None``: ``fn(*args)`` as it is."""
    if tag is None:
        return fn(*args)
    leaves, treedef = jax.tree.flatten(args)
    shapes = tuple((np.shape(v), str(v.dtype if hasattr(v, "dtype") else np.result_type(v))) for v in leaves)
    keep = config.settings["cache.enabled"]
    # found again without hashing a file name: a noise model's program is called many times
    sig = tag, treedef, shapes, n_dev, config.settings["cache.dir"], keep
    if sig not in _LOADED:
        path = _path(tag, shapes, treedef, n_dev)
        _LOADED[sig] = (keep and _load(path, n_dev)) or _export(fn, treedef, leaves, path if keep else None, n_dev)
    run = _LOADED[sig]
    return fn(*args) if run is None else run(*leaves)


def forget() -> None:
    """Forget the programs this process has loaded or exported, as a new process would not have them."""
    _LOADED.clear()


def _load(path: Path, n_dev: int):
    if not path.exists():
        return None
    try:
        return _caller(jax.export.deserialize(bytearray(path.read_bytes())), n_dev)
    except Exception:  # noqa: BLE001 (a truncated or foreign file, or no flatbuffers: trace again)
        return None


def _export(fn, treedef, leaves, path: Path | None, n_dev: int):
    """Trace ``fn`` once into an exported program, save it at ``path`` (None: keep it in memory only) and return
    its call; None where it cannot be exported or saved (then the caller runs ``fn`` itself, and an error in ``fn``
    surfaces there as it would without this module)."""
    try:
        exported = jax.export.export(jax.jit(lambda *xs: fn(*jax.tree.unflatten(treedef, xs))))(*leaves)
        blob = exported.serialize()
    except Exception:  # noqa: BLE001
        return None
    if path is not None:
        _save(path, blob)
    return _caller(exported, n_dev)
