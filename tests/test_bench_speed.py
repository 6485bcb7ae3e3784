"""The public pieces the speed benchmark builds on (bayescale.model, bayescale.sampler): the log posterior it hands
to emcee is the one NUTS sampled, padding does not change it, and prior draws start a gradient. The benchmark's own
smoke test: ``python -m benchmarks.speed --self-check``."""

import jax
import numpy as np
from numpyro.infer.util import potential_energy, unconstrain_fn

from bayescale.model import batch_pad_length, build_model, curve_data, pad_length
from bayescale.runs import prepare_runs
from bayescale.sampler import prior_draw


def test_nuts_log_density_is_the_public_models_and_padding_is_masked(chinchilla_runs, chinchilla_fit):
    rd = prepare_runs(chinchilla_runs, "chinchilla", y="loss", inputs={"N": "params", "D": "tokens"})
    frame = rd.curve(None).reset_index(drop=True)
    model = build_model(rd.law)
    draws = chinchilla_fit.draws()
    names = [*rd.law.param_names, "sigma"]
    recorded = chinchilla_fit.idata["sample_stats"]["lp"].values.reshape(-1)
    n = len(frame)
    assert pad_length(n) >= max(n, 8) and batch_pad_length(n) % 8 == 0 and batch_pad_length(n) >= n
    for n_pad in {n, pad_length(n), batch_pad_length(n)}:
        data, _ = curve_data(rd.law, frame, n_pad)
        assert len(data["y"]) == n_pad and data["mask"].sum() == n
        z = jax.vmap(lambda p: unconstrain_fn(model, (data,), {}, p))({k: draws[k] for k in names})
        lp = -jax.vmap(lambda v: potential_energy(model, (data,), {}, v))(z)
        np.testing.assert_allclose(np.asarray(lp), recorded, atol=1e-6)
    z0 = prior_draw(model, jax.random.PRNGKey(0), data)
    assert set(z0) == set(names)
    grad = jax.grad(lambda v: potential_energy(model, (data,), {}, v))(z0)
    assert all(np.isfinite(np.asarray(g)).all() for g in grad.values())
