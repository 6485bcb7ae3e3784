"""``fit_many`` on an executor's workers (a Dask cluster, a process pool) gives the local run's fits, draw for draw."""

import dataclasses
import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

import bayescale as bs

KW = dict(group="curve", x="x", y="y", chains=2, warmup=200, samples=200, seed=7, progress=False)


@pytest.fixture(scope="module")
def runs():
    """Three noisy M2 curves of different lengths (padded and masked in one program)."""
    rng = np.random.default_rng(11)
    frames = []
    for i, (s, c, n) in enumerate([(20.0, 0.3, 12), (40.0, 0.25, 10), (8.0, 0.2, 9)]):
        x = np.geomspace(1e6, 1e9, n)
        frames.append(pd.DataFrame({"x": x, "y": (0.3 + s * x**-c) * np.exp(rng.normal(0, 0.02, n)),
                                    "curve": f"c{i}"}))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def local(runs):
    return bs.fit_many(runs, "M2", **KW)


def assert_same_fits(remote, local):
    assert list(remote) == list(local) and remote.refitted == local.refitted
    pd.testing.assert_frame_equal(remote.summary(), local.summary())
    for g, f in local.items():
        r = remote[g]
        assert (r.seed, r.settings, r.group, r.map_potential) == (f.seed, f.settings, f.group, f.map_potential)
        for k in f.param_names:
            np.testing.assert_array_equal(r.posterior[k].values, f.posterior[k].values, err_msg=f"{g} {k}")
        for k, v in f.idata["sample_stats"].to_dataset().items():
            np.testing.assert_array_equal(r.idata["sample_stats"][k].values, v.values, err_msg=f"{g} {k}")


def worker_setup():
    import jax

    return os.environ.get("XLA_FLAGS", ""), len(jax.devices("cpu"))


def test_dask_cluster_gives_the_local_fits(runs, local):
    distributed = pytest.importorskip("dask.distributed")
    import jax

    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        remote = bs.fit_many(runs, "M2", executor=client, **KW)
        setups = client.run(worker_setup)
    assert local.refitted, "no curve was refitted: the refit path went untested"
    assert_same_fits(remote, local)
    assert len(setups) == 2
    for flags, devices in setups.values():  # single-threaded XLA, this process's device count (its chain split)
        assert "--xla_cpu_multi_thread_eigen=false" in flags and devices == len(jax.devices("cpu"))


def test_process_pool_gives_the_local_fits(runs, local):
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = bs.fit_many(runs, "M2", executor=pool, **KW)
    assert_same_fits(remote, local)


def test_an_executor_without_submit_or_forking_is_refused(runs):
    with pytest.raises(bs.SettingError, match=r"submit\(fn, \*args\)"):
        bs.fit_many(runs, "M2", executor=object(), **KW)
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(bs.SettingError, match="spawn"):
            bs.fit_many(runs, "M2", executor=pool, **KW)
    # a law of lambdas cannot travel by value, and workers cannot look up an unregistered one by name
    unregistered = dataclasses.replace(bs.get_law("M2"), name="M2-unregistered")
    with ThreadPoolExecutor(1) as pool, pytest.raises(bs.SettingError, match="register it"):
        bs.fit_many(runs, unregistered, executor=pool, **KW)
