"""Generic checks over the family table (:data:`bayescale.simulate.EXAMPLES`: one row per registered law, with
true parameters and a design). For every family we simulate several curves with multiplicative
noise, fit them all at once with ``fit_many``, and check that (a) the true parameters are recovered and (b) nominal
90% bands of a new run cover held-out simulated runs at close to 90%. The fast check fits three curves: a curve's
parameters err together, so one noisy curve of three can put a third of the pairs outside their 95% intervals;
there "recovered" means within four posterior sds of the truth, which a wrong law fails. The ``slow``
variant fits many more curves and asks the central 95% interval to hold the truth in most curve-parameter pairs
(``make bench-tests``).
"""

import jax
import numpy as np
import pandas as pd
import pytest

import bayescale as bs
from bayescale.noise import LIKELIHOODS
from bayescale.simulate import EXAMPLES, simulate

def test_table_covers_every_registered_law():
    assert set(EXAMPLES) == {law.name for law in bs.list_laws()}


def check_family(name, n_curves, seed, cover_range, recover_min, rhat_max=1.05, within_sds=None, **settings):
    """``within_sds``: a parameter is recovered within that many posterior sds of the truth; None: inside its
    central 95% interval."""
    law = bs.get_law(name)
    runs, truth = simulate(name, n_curves, seed)
    fits = bs.fit_many(runs[~runs.held_out], law, group="curve", inputs={k: k for k in law.input_names}, y="y",
                       seed=seed, refit_flagged=False, **settings)
    assert set(fits) == set(runs.curve)
    recovered, covered, rhats = [], [], []
    for g, f in fits.items():
        rhats.append(f.diagnostics["max_rhat"])
        post = f.posterior
        for p, v in truth.items():
            d = post[p].values
            if within_sds is None:
                lo, hi = np.quantile(d, [0.025, 0.975])
                recovered.append(lo <= v <= hi)
            else:
                recovered.append(abs(v - d.mean()) <= within_sds * d.std())
        test = runs[(runs.curve == g) & runs.held_out]
        bands = f.predict(test[list(law.input_names)], levels=(0.9,), seed=seed)
        assert bool(bands["extrapolation"].any()) is False  # interleaved hold-out lies inside the data
        covered.extend(bands.covers(test["y"].to_numpy(), 0.9))
    assert np.median(rhats) < rhat_max, f"{name}: chains disagree (r-hats {np.round(rhats, 3)})"
    assert np.mean(recovered) >= recover_min, f"{name}: true parameters recovered in {np.mean(recovered):.0%} of cases"
    cov = float(np.mean(covered))
    print(f"\n{name}: 90% band coverage {cov:.3f} of {len(covered)} held-out runs; parameters recovered "
          f"{np.mean(recovered):.3f}; median max r-hat {np.median(rhats):.3f}")
    assert cover_range[0] <= cov <= cover_range[1], f"{name}: 90% bands covered {cov:.0%} of held-out runs"
    return cov


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_family_recovery_and_coverage(name):
    settings = dict(chains=2, warmup=300, samples=300, progress=False)
    settings.update(EXAMPLES[name].fit_settings)  # harder families need longer warm-up
    check_family(name, n_curves=3, seed=1, cover_range=(0.72, 1.0), recover_min=0.75,
                 rhat_max=EXAMPLES[name].rhat_max, within_sds=4.0, **settings)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_model_density_and_its_gradient_hold_no_ln_gamma(name):
    """A fit's compiled programs hold no ``lgamma``/``digamma``: in a saved program (``bayescale/programs.py``) XLA
    expands each into hundreds of operations, seconds of every first fit (Kaplan's, twice as long: cold_fit.py),
    so priors and noise models compute their normalising constants on the host (``bayescale/noise.py``)."""
    from numpyro.infer.util import potential_energy

    from bayescale.model import build_model, curve_data, pad_length
    from bayescale.sampler import prior_draw

    law = bs.get_law(name)
    runs, _ = simulate(name, 1, 0)
    for likelihood in LIKELIHOODS:
        model = build_model(law, likelihood)
        data, _ = curve_data(law, runs, pad_length(len(runs)))
        z = prior_draw(model, jax.random.PRNGKey(0), data)
        jaxpr = str(jax.make_jaxpr(jax.grad(lambda z: potential_energy(model, (data,), {}, z)))(z))
        assert "lgamma" not in jaxpr and "digamma" not in jaxpr, f"{name} with {likelihood} noise"


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_family_coverage_full(name):
    settings = dict(chains=4, warmup=500, samples=500, progress=False)
    settings.update(EXAMPLES[name].fit_settings)
    check_family(name, n_curves=24, seed=2, cover_range=(0.84, 0.96), recover_min=0.85,
                 rhat_max=EXAMPLES[name].rhat_max, **settings)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_registry_entry_is_complete(name):
    law = bs.get_law(name)
    assert law.formula and law.description and law.reference
    assert law.needs_points == len(law.params) + 1
    assert all(p.description for p in law.params)
    assert 0.5 <= law.target_accept < 1
    truth = EXAMPLES[name].truth
    assert set(truth) == set(law.param_names)


def test_unknown_law_names_the_registered_ones():
    with pytest.raises(bs.UnknownLawError, match="chinchilla"):
        bs.get_law("chinchila")


def test_user_registered_law_gets_fit_and_bands():
    import jax.numpy as jnp
    import numpyro.distributions as dist

    law = bs.Law(
        name="test_exp_decay", formula="y = E + a * exp(-x / s)",
        inputs=(bs.Input("x", "steps", scale="linear"),),
        params=(bs.Param("E", lambda s: dist.Uniform(0.0, s.y_min), "floor"),
                bs.Param("la", lambda s: dist.Normal(0.0, 2.0), "log amplitude at the centre"),
                bs.Param("s", lambda s: dist.LogNormal(0.0, 1.5), "decay length")),
        mean=lambda p, t: p["E"] + jnp.exp(p["la"] - t["x"] / p["s"]),
        description="test law", reference="none")
    bs.register_law(law, overwrite=True)
    try:
        x = np.linspace(-2, 2, 15)
        y = (0.5 + np.exp(0.3 - x / 1.2)) * np.exp(np.random.default_rng(3).normal(0, 0.01, x.size))
        f = bs.fit(pd.DataFrame({"x": x, "y": y}), "test_exp_decay", x="x", y="y",
                   chains=2, warmup=200, samples=200, progress=False)
        b = f.predict({"x": [0.0, 3.0]}, levels=(0.9,))
        assert list(b["extrapolation"].values) == [False, True]
        lo, hi = b.interval(0.9, kind="curve")
        truth = 0.5 + np.exp(0.3 - np.array([0.0, 3.0]) / 1.2)
        assert lo[0] <= truth[0] <= hi[0]
    finally:
        bs.laws.LAWS.pop("test_exp_decay")


def test_m4_implicit_solve_is_exact_with_implicit_gradients():
    """M4's mean solves ln s - alpha ln(1 - s) = k numerically: the root and its gradients must be right over the
    prior's range of alpha and far into both tails of k."""
    import jax
    import jax.numpy as jnp

    from bayescale.laws import solve_m4

    rng = np.random.default_rng(3)
    k = jnp.asarray(rng.normal(0.0, 8.0, 20000))
    alpha = jnp.asarray(np.exp(rng.normal(0.0, 1.5, 20000)))
    u = np.asarray(solve_m4(k, alpha))
    s = 1.0 / (1.0 + np.exp(-u))
    # residual in a form that stays accurate where s is near 0 or 1
    h = -np.logaddexp(0.0, -u) - np.asarray(alpha) * -np.logaddexp(0.0, u)
    assert np.all(np.isfinite(u)) and np.all((s >= 0) & (s <= 1))
    assert np.max(np.abs(h - np.asarray(k))) < 1e-9
    dk, da = jax.grad(lambda kk, aa: solve_m4(kk, aa).sum(), argnums=(0, 1))(k, alpha)
    slope = 1.0 + (np.asarray(alpha) - 1.0) / (1.0 + np.exp(-u))  # dh/du
    np.testing.assert_allclose(np.asarray(dk), 1.0 / slope, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(da), -np.logaddexp(0.0, u) / slope, rtol=1e-8, atol=1e-12)


def test_law_target_accept_is_the_default_and_the_caller_overrides_it():
    import dataclasses

    from bayescale.sampler import SamplerSettings

    law = dataclasses.replace(bs.get_law("M2"), name="M2_curved", target_accept=0.97)
    assert SamplerSettings.for_law(law, 4, 10, 10).target_accept == 0.97
    assert SamplerSettings.for_law(law, 4, 10, 10, target_accept=0.8).target_accept == 0.8
    assert SamplerSettings.for_law(None, 4, 10, 10).target_accept == SamplerSettings().target_accept
