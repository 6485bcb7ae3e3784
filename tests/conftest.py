"""Test configuration: JAX on the CPU (even where a GPU exists), headless matplotlib, shared small fits."""

import os

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ.setdefault("MPLBACKEND", "Agg")
# Under pytest-xdist (`make test`) each worker process takes its share of the cores as JAX CPU devices, not all of them
_workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _workers > 1:
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    os.environ.setdefault("BAYESCALE_CPU_DEVICES", str(max(1, _cores // _workers)))

import contextlib  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import bayescale as bs  # noqa: E402

FAST = dict(chains=2, warmup=300, samples=300, progress=False)


@contextlib.contextmanager
def traces():
    """The JAX traces made inside the block (their durations, a list filled as they happen): a jitted function
    traced again is compiled again, so a test that a program is shared asks for none."""
    seen = []

    def count(event, duration, **_):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            seen.append(duration)

    jax.monitoring.register_event_duration_secs_listener(count)
    try:
        yield seen
    finally:
        jax.monitoring.unregister_event_duration_listener(count)


def chinchilla_truth(N, D):
    return 1.69 + 406.4 / N**0.34 + 410.7 / D**0.28


@pytest.fixture(scope="session")
def chinchilla_runs():
    """30 runs simulated from Hoffmann et al.'s published law with 1% multiplicative noise (seeded)."""
    rng = np.random.default_rng(0)
    N, D = np.meshgrid(np.geomspace(1e7, 1e9, 6), np.geomspace(1e9, 1e11, 5))
    N, D = N.ravel(), D.ravel()
    loss = chinchilla_truth(N, D) * np.exp(rng.normal(0, 0.01, N.size))
    return pd.DataFrame({"params": N, "tokens": D, "loss": loss})


@pytest.fixture(scope="session")
def chinchilla_fit(chinchilla_runs):
    return bs.fit(chinchilla_runs, "chinchilla", inputs={"N": "params", "D": "tokens"}, y="loss", seed=0, **FAST)


def pytest_collection_modifyitems(items):
    """The notebooks' executions first: minutes each, the longest tests. Under pytest-xdist's work stealing
    (`make test`) one worker starts on them while the others take the short tests, instead of one worker ending the
    run alone on them; the notebook test files keep their order, so a check of an executed notebook follows its run."""
    items.sort(key=lambda item: item.path.name != "test_notebooks.py")
