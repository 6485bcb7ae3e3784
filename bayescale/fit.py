"""Fit a law to runs with NUTS: :func:`fit`, :func:`fit_many`, and the :class:`Fit` result.

A :class:`Fit` holds an ArviZ DataTree (posterior, log-likelihood, sample stats, observed data) plus what is needed
to predict again after a save/load: the law, the noise model, the data scales, column names, seed and settings.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path

import arviz_stats as azs
from arviz_base import from_dict
import jax
import numpy as np
import pandas as pd
import xarray as xr

from bayescale import calibration
from bayescale.bands import DEFAULT_LEVELS, bands_from_draws
from bayescale.errors import BayescaleError, FitFileError
from bayescale.laws import Law, Scales, get_law
from bayescale.model import batch_pad_length, build_model, curve_data, pad_length
from bayescale.noise import check_likelihood
from bayescale.posterior import Component, PosteriorDraws, check_tau, thin
from bayescale.runs import RunData, prepare_runs, query_points
from bayescale.sampler import SamplerSettings, run_nuts

__all__ = ["Fit", "FitMany", "fit", "fit_many", "load_fit"]

RHAT_MAX, ESS_MIN = 1.01, 400


class Fit:
    """Posterior of one law fitted to one curve. Use :meth:`predict` for bands, :attr:`ok` for the diagnostics gate."""

    def __init__(self, law: Law, idata, scales: Scales, runs: pd.DataFrame, columns: dict, likelihood: str,
                 df: float, seed: int, settings: SamplerSettings, group=None, map_potential: float = float("nan"),
                 discrepancy: float = 0.0):
        self.law, self.idata, self.scales, self.runs = law, idata, scales, runs
        self.columns, self.likelihood, self.df, self.seed = columns, likelihood, df, seed
        self.settings, self.group, self.map_potential = settings, group, map_potential
        self.discrepancy = float(discrepancy)  # tau: ln-units of extrapolation error per decade beyond the runs
        self.calibration = None
        self.local = None  # localize(): {"targets": DataFrame (law input names), "tau": float}
        self._diag = None

    @property
    def param_names(self) -> list[str]:
        """Sampled parameters: the law's plus the noise scale ``sigma``."""
        return [*self.law.param_names, "sigma"]

    def __repr__(self) -> str:
        d = self.diagnostics
        return (f"<Fit law={self.law.name} likelihood={self.likelihood} runs={len(self.runs)}"
                f"{'' if self.group is None else f' group={self.group!r}'} chains={d['chains']} draws={d['draws']} "
                f"max_rhat={d['max_rhat']:.3f} min_ess_bulk={d['min_ess_bulk']:.0f} divergences={d['divergences']} "
                f"ok={self.ok}>")

    # -- posterior -------------------------------------------------------------------------------------
    @property
    def posterior(self) -> xr.Dataset:
        return self.idata["posterior"].to_dataset()

    def draws(self, max_draws: int | None = None) -> dict:
        """Posterior draws flattened over chains: dict name -> array (S,), at most ``max_draws`` evenly spaced."""
        post = self.posterior
        return thin({k: post[k].values.reshape(-1, *post[k].shape[2:]) for k in self.param_names}, max_draws)

    def posterior_draws(self, max_draws: int | None = 4000, seed: int = 0, discrepancy=None) -> PosteriorDraws:
        """This fit's :class:`~bayescale.posterior.PosteriorDraws`, predicting with extrapolation error
        ``discrepancy`` (default: the fit's ``tau``, 0 unless calibrated; see :meth:`calibrate`)."""
        tau = self.discrepancy if discrepancy is None else check_tau(discrepancy)
        comp = Component(self.law, self.draws(max_draws), self.scales, self.likelihood, self.df, tau)
        return PosteriorDraws([comp], source=self.law.name)

    def natural(self) -> xr.Dataset:
        """Posterior of the parameters in their published form (e.g. A, alpha, B, beta, E)."""
        post = self.posterior
        p = {k: post[k].values for k in self.law.param_names}
        nat = self.law.natural_params(p, self.scales)
        return xr.Dataset({k: (("chain", "draw"), np.asarray(v)) for k, v in nat.items()},
                          coords={"chain": post.chain, "draw": post.draw})

    # -- diagnostics -----------------------------------------------------------------------------------
    @property
    def diagnostics(self) -> dict:
        """r-hat (rank-normalised), bulk/tail ESS, divergences and E-BFMI, computed with ArviZ."""
        if self._diag is None:
            names = self.param_names
            rhat = azs.rhat(self.idata, var_names=names)
            ess_b = azs.ess(self.idata, var_names=names, method="bulk")
            ess_t = azs.ess(self.idata, var_names=names, method="tail")
            bfmi = np.asarray(azs.bfmi(self.idata)["energy"].values).reshape(-1)
            stats = self.idata["sample_stats"]
            table = pd.DataFrame({
                "r_hat": [float(rhat[n]) for n in names],
                "ess_bulk": [float(ess_b[n]) for n in names],
                "ess_tail": [float(ess_t[n]) for n in names],
            }, index=names)
            self._diag = {
                "table": table,
                "max_rhat": float(np.nanmax(table["r_hat"])) if table["r_hat"].notna().any() else float("nan"),
                "min_ess_bulk": float(np.nanmin(table["ess_bulk"])),
                "min_ess_tail": float(np.nanmin(table["ess_tail"])),
                "divergences": int(stats["diverging"].values.sum()),
                "bfmi": [float(b) for b in bfmi],
                "chains": int(self.posterior.sizes["chain"]),
                "draws": int(self.posterior.sizes["draw"]),
                "mean_steps": float(stats["n_steps"].values.mean()),
            }
        return self._diag

    @property
    def warnings(self) -> list[str]:
        """Readable reasons the fit should not be trusted yet (empty when :attr:`ok`)."""
        d, out = self.diagnostics, []
        if not np.isfinite(d["max_rhat"]) or d["max_rhat"] > RHAT_MAX:
            worst = d["table"]["r_hat"].idxmax()
            out.append(f"r-hat {d['max_rhat']:.3f} > {RHAT_MAX} (worst: {worst}): chains disagree; "
                       "run more warm-up/draws or check for several modes")
        min_ess = ESS_MIN * d["chains"] / 4
        if d["min_ess_bulk"] < min_ess or d["min_ess_tail"] < min_ess:
            out.append(f"effective sample size {min(d['min_ess_bulk'], d['min_ess_tail']):.0f} < {min_ess:.0f}: "
                       "intervals are noisy; draw more samples")
        if d["divergences"]:
            out.append(f"{d['divergences']} divergent transitions: the posterior has regions NUTS cannot explore; "
                       "raise target_accept or use a simpler law")
        low = [b for b in d["bfmi"] if b < 0.3]
        if low:
            out.append(f"E-BFMI {min(low):.2f} < 0.3 in {len(low)} chain(s): poor energy exploration")
        return out

    @property
    def ok(self) -> bool:
        """True when r-hat <= 1.01, ESS >= 100 per chain, no divergences and E-BFMI >= 0.3."""
        return not self.warnings

    def summary(self, natural: bool = True) -> pd.DataFrame:
        """Posterior mean, sd, 5%/95% quantiles and diagnostics of every parameter."""
        rows = {}
        d = self.diagnostics["table"]
        for name in self.param_names:
            v = self.posterior[name].values.reshape(-1)
            rows[name] = {"mean": v.mean(), "sd": v.std(), "q5": np.quantile(v, 0.05), "q95": np.quantile(v, 0.95),
                          **d.loc[name].to_dict()}
        if natural and self.law.natural is not None:
            nat = self.natural()
            for name in nat.data_vars:
                v = nat[name].values.reshape(-1)
                rows[f"{name} (published form)"] = {"mean": v.mean(), "sd": v.std(), "q5": np.quantile(v, 0.05),
                                                    "q95": np.quantile(v, 0.95)}
        return pd.DataFrame(rows).T

    def loo(self):
        """PSIS-LOO of the fitted runs (ArviZ ``loo``)."""
        return azs.loo(self.idata)

    # -- extrapolation error (bayescale.calibration) --------------------------------------------------
    def with_discrepancy(self, tau: float) -> "Fit":
        """The same posterior, predicting with extrapolation error ``tau`` (ln-units per decade beyond the runs)."""
        new = copy.copy(self)
        new.discrepancy = check_tau(tau)
        return new

    def refit(self, runs: pd.DataFrame, seed: int | None = None, **over) -> "Fit":
        """This fit's law, noise model and sampler settings (updated with ``over``) fitted to other ``runs`` (law
        input columns, ``y``, optional ``se``); the result keeps this fit's column names and group."""
        st = self.settings
        kw = dict(chains=st.num_chains, warmup=st.num_warmup, samples=st.num_samples, target_accept=st.target_accept,
                  max_tree_depth=st.max_tree_depth, dense_mass=st.dense_mass, n_starts=st.n_starts,
                  opt_steps=st.opt_steps, progress=False)
        kw.update(over)
        new = fit(runs, self.law, y="y", inputs={n: n for n in self.law.input_names},
                  se="se" if "se" in runs else None, likelihood=self.likelihood, df=self.df,
                  seed=self.seed if seed is None else seed, **kw)
        new.columns, new.group = dict(self.columns), self.group
        return new

    @staticmethod
    def _refit_with(refit_kw: dict):
        """A ``refit`` callable for :mod:`bayescale.calibration` passing ``refit_kw`` on (None: the default)."""
        return (lambda f, runs, seed: f.refit(runs, seed=seed, **refit_kw)) if refit_kw else None

    def calibrate(self, holdout: float = 0.25, toward: str = "max", seed: int | None = None, **refit_kw) -> "Fit":
        """This fit with its extrapolation error calibrated by leave-future-out on its own runs.

        Refits without the largest ``holdout`` share of the runs, predicts them, and sets ``tau`` by maximum
        likelihood (:func:`bayescale.calibration.calibrate`); the result's ``calibration`` holds the held-out
        errors. Extra keywords go to the refit (e.g. fewer ``samples``).
        """
        cal = calibration.calibrate(self, holdout=holdout, toward=toward, seed=seed, refit=self._refit_with(refit_kw))
        new = self.with_discrepancy(cal.tau)
        new.calibration = cal
        return new

    def localize(self, target, tau: float | None = None, seed: int | None = None, recalibrate: bool | None = None,
                 **refit_kw) -> "Fit":
        """The law refitted as a local approximation around ``target`` (points or a curve, as for :meth:`predict`).

        Each run gets an extra error ``tau * d`` (ln units, in quadrature with its noise), ``d`` its distance in
        decades from the target points' range (:func:`bayescale.calibration.distance_from`): the law's error grows
        ``tau`` per decade away from where it is used, so runs far from the target count little. ``tau``
        defaults to this fit's calibrated extrapolation error (:meth:`calibrate`), which the result keeps for
        predictions beyond its runs (the runs' extra errors are independent, so many far runs would otherwise
        look more telling than they are). ``recalibrate`` (default: when tau comes from :meth:`calibrate`)
        re-estimates that extrapolation error by leave-future-out on the local fit itself and keeps the larger of
        the two: its noise scale no longer absorbs the law's misfit far away, so the global fit's tau can be too
        small for it. :func:`bayescale.next_runs` gives candidates the same extra error. Extra keywords go to the
        refit.
        """
        if recalibrate is None:
            recalibrate = tau is None and self.calibration is not None
        tau = self.discrepancy if tau is None else tau
        if not (np.isfinite(tau) and tau > 0):
            raise BayescaleError("localize needs tau > 0 (ln-units per decade): calibrate the fit first "
                                 f"(fit.calibrate()) or pass tau=, got {tau!r}")
        targets = query_points(self.law, target, self.columns)
        return calibration.localize(self, targets, tau, seed=seed, recalibrate=recalibrate,
                                    refit=self._refit_with(refit_kw))

    # -- prediction ------------------------------------------------------------------------------------
    def predictive_draws(self, at, seed: int | None = None, max_draws: int | None = 4000, discrepancy=None):
        """Draws of the mean curve and of a new observed run at ``at``: (query frame, two arrays (S, points)).

        Beyond the runs the mean curve includes the extrapolation error ``discrepancy`` (default: the fit's
        ``tau``, 0 unless calibrated; see :meth:`calibrate`).
        """
        frame = query_points(self.law, at, self.columns)
        seed = self._seed(seed)
        mu, obs = self.posterior_draws(max_draws, seed, discrepancy).predictive(frame, seed)
        return frame, mu, obs

    def _seed(self, seed):
        return self.seed + 1 if seed is None else seed

    def log_predictive_density(self, at, observed, se=None, max_draws: int | None = 4000, discrepancy=None,
                               seed: int | None = None) -> np.ndarray:
        """Log posterior predictive density of ``observed`` runs at ``at``, one value per point, in y units.

        ``log mean_s p(y | theta_s, sigma_s)`` under the fit's noise model, exact given the draws (no kernel
        estimate), the extrapolation error included. ``se``: known measurement error of the new runs (y units).
        For other y units ``y' = y / c`` add ``log c`` (:func:`bayescale.scoring.rescale_log_density`).
        """
        frame = query_points(self.law, at, self.columns)
        y = np.asarray(observed, float).reshape(-1)
        if y.shape != (len(frame),) or not np.isfinite(y).all():
            raise ValueError(f"observed must be {len(frame)} finite values, one per query point; got shape {y.shape}")
        seed = self._seed(seed)
        return self.posterior_draws(max_draws, seed, discrepancy).log_density(frame, y, se=se, seed=seed)

    def predict(self, at, levels=DEFAULT_LEVELS, seed: int | None = None, max_draws: int | None = 4000,
                discrepancy=None):
        """Posterior predictive bands at ``at`` (see :class:`bayescale.bands.Bands`)."""
        seed = self._seed(seed)
        return bands_from_draws(self.posterior_draws(max_draws, seed, discrepancy),
                                query_points(self.law, at, self.columns), levels, seed, method="nuts",
                                columns=self.columns)

    def plot(self, at=None, levels=(0.5, 0.9), ax=None, path=None, **kw):
        """Data, median and shaded bands on log axes; ``at`` defaults to a grid spanning data and 10x beyond."""
        from bayescale.plots import plot_fit  # defers matplotlib to the first plot

        return plot_fit(self, at=at, levels=levels, ax=ax, path=path, **kw)

    # -- persistence -----------------------------------------------------------------------------------
    def _meta(self) -> dict:
        return {
            "bayescale_version": __import__("bayescale").__version__,
            "law": self.law.name, "likelihood": self.likelihood, "df": self.df, "seed": self.seed,
            "columns": self.columns, "group": None if self.group is None else str(self.group),
            "settings": asdict(self.settings), "scales": {k: getattr(self.scales, k) for k in Scales._fields},
            "map_potential": self.map_potential, "discrepancy": self.discrepancy,
            "local": None if self.local is None else {"tau": self.local["tau"],
                                                      "targets": self.local["targets"].to_dict(orient="list")},
        }

    def save(self, path) -> Path:
        """Write the fit (posterior, stats, runs and metadata) to a netCDF file."""
        path = Path(path)
        tree = self.idata.copy()
        tree["runs"] = xr.Dataset.from_dataframe(self.runs.reset_index(drop=True).rename_axis("run"))
        tree.attrs["bayescale"] = json.dumps(self._meta(), default=float)
        tree.to_netcdf(path, engine="h5netcdf")
        return path


def load_fit(path) -> Fit:
    """Read a fit written by :meth:`Fit.save`; its law must be registered (built-ins always are)."""
    path = Path(path)
    if not path.exists():
        raise FitFileError(f"fit file {str(path)!r} does not exist")
    try:
        tree = xr.open_datatree(path, engine="h5netcdf").load()
        meta = json.loads(tree.attrs["bayescale"])
    except Exception as exc:
        raise FitFileError(f"{str(path)!r} is not a bayescale fit file or is corrupt ({type(exc).__name__}: {exc}); "
                           "refit and save it again") from exc
    law = get_law(meta["law"])
    runs = tree["runs"].to_dataset().to_dataframe().reset_index(drop=True)
    idata = tree.copy()
    del idata["runs"]
    idata.attrs.pop("bayescale", None)
    s = meta["scales"]
    out = Fit(law, idata, Scales(**s), runs, meta["columns"], meta["likelihood"], meta["df"], meta["seed"],
              SamplerSettings(**meta["settings"]), group=meta["group"], map_potential=meta.get("map_potential", float("nan")),
              discrepancy=meta.get("discrepancy", 0.0))
    if meta.get("local"):
        out.local = {"tau": float(meta["local"]["tau"]), "targets": pd.DataFrame(meta["local"]["targets"])}
    return out


def _to_idata(law, samples, ll, stats, frame: pd.DataFrame):
    n = len(frame)
    post = {k: np.asarray(samples[k]) for k in (*law.param_names, "sigma")}
    data = {
        "posterior": post,
        "log_likelihood": {"y": np.asarray(ll)[..., :n]},
        "sample_stats": {k: np.asarray(v) for k, v in stats.items()},
        "observed_data": {"y": frame["y"].to_numpy(float)},
        "constant_data": {k: frame[k].to_numpy(float) for k in law.input_names},
    }
    dims = {"y": ["run"], **{k: ["run"] for k in law.input_names}}
    return from_dict(data, dims=dims, coords={"run": np.arange(n)})


def fit(runs, law="chinchilla", *, y: str = "loss", x=None, inputs=None, group: str | None = None, se=None,
        lower=None, upper=None, likelihood: str = "lognormal", df: float = 4.0, chains: int = 4, warmup: int = 1000,
        samples: int = 1000, seed: int = 0, progress: bool | None = None, **sampler) -> Fit:
    """Fit ``law`` to ``runs`` with NUTS (float64, seeded) and return a :class:`Fit`.

    ``runs``: DataFrame or CSV/Parquet path; ``x``/``inputs`` map the law's inputs to columns, ``y`` names the
    outcome. ``se`` (standard error) or ``lower``/``upper`` (95% interval) give known measurement error.
    ``likelihood``: ``"lognormal"`` (multiplicative noise, default), ``"normal"`` or ``"studentt"``.
    Extra keywords (``target_accept``, ``max_tree_depth``, ``dense_mass``, ``n_starts``, ``opt_steps``) tune NUTS;
    ``target_accept`` defaults to the law's (``Law.target_accept``).
    With ``group=``, each group is a curve and the result is :func:`fit_many`'s.
    """
    if group is not None:
        return fit_many(runs, law, y=y, x=x, inputs=inputs, group=group, se=se, lower=lower, upper=upper,
                        likelihood=likelihood, df=df, chains=chains, warmup=warmup, samples=samples, seed=seed,
                        progress=progress, **sampler)
    rd = prepare_runs(runs, law, y=y, x=x, inputs=inputs, se=se, lower=lower, upper=upper,
                      likelihood=check_likelihood(likelihood))
    return _fit_prepared(rd, df, SamplerSettings.for_law(rd.law, chains, warmup, samples, **sampler), seed, progress)


def _fit_prepared(rd: RunData, df, settings, seed, progress, group=None) -> Fit:
    law = rd.law
    frame = rd.curve(group).drop(columns=["group"], errors="ignore").reset_index(drop=True)
    data, scales = curve_data(law, frame, pad_length(len(frame)))
    model = build_model(law, rd.likelihood, df)
    samples, ll, stats, vbest = run_nuts(model, data, jax.random.PRNGKey(seed), settings, len(law.params) + 1,
                                         progress=progress, label=f"NUTS {law.name}")
    idata = _to_idata(law, samples, ll, stats, frame)
    return Fit(law, idata, scales, frame, rd.columns, rd.likelihood, df, seed, settings, group=group,
               map_potential=float(vbest))


class FitMany(dict):
    """Fits of one law to many curves: a dict group -> :class:`Fit` with a diagnostics table."""

    def __init__(self, fits: dict, law: Law, refitted: list):
        super().__init__(fits)
        self.law, self.refitted = law, refitted

    def summary(self) -> pd.DataFrame:
        rows = []
        for g, f in self.items():
            d = f.diagnostics
            rows.append({"group": g, "runs": len(f.runs), "max_rhat": d["max_rhat"], "min_ess_bulk": d["min_ess_bulk"],
                         "divergences": d["divergences"], "ok": f.ok, "refitted": g in self.refitted})
        return pd.DataFrame(rows).set_index("group")

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.values())

    def calibrate(self, holdout: float = 0.25, toward: str = "max", pooled: bool = True, seed: int | None = None,
                  **refit_kw) -> "FitMany":
        """These fits with their extrapolation error calibrated (see :meth:`Fit.calibrate`).

        ``pooled=True`` gives every curve one ``tau`` from all curves' held-out runs (steadier when the curves
        come from one domain); ``pooled=False`` calibrates each curve on its own runs.
        """
        if not pooled:
            return FitMany({g: f.calibrate(holdout, toward, seed, **refit_kw) for g, f in self.items()}, self.law,
                           self.refitted)
        cal = calibration.calibrate_many(self, holdout=holdout, toward=toward, seed=seed,
                                         refit=Fit._refit_with(refit_kw))
        out = {}
        for g, f in self.items():
            out[g] = f.with_discrepancy(cal.tau)
            out[g].calibration = cal
        return FitMany(out, self.law, self.refitted)


def fit_many(runs, law="M4", *, group: str, y: str = "loss", x=None, inputs=None, se=None, lower=None, upper=None,
             likelihood: str = "lognormal", df: float = 4.0, chains: int = 4, warmup: int = 1000, samples: int = 1000,
             seed: int = 0, progress: bool | None = None, refit_flagged: bool = True, batch_size: int | None = None,
             joint: bool = False, **sampler) -> FitMany:
    """Fit ``law`` to every group of ``runs`` with vectorised NUTS (CPU, or GPU when JAX sees one).

    Curves are padded to a common length, so one compiled program serves them all, and sampled ``batch_size`` at a
    time (vmapped), each with its own step size and mass matrix. A vectorised NUTS step costs as much as the longest
    trajectory in the batch, and on a CPU the arithmetic of a few lanes already fills the cores: there batches of
    one curve (its chains vectorised) were fastest (``benchmarks/batching.py``), so that is the CPU default; on a
    GPU the default is all curves at once. With ``refit_flagged``, a curve whose diagnostics fail is refitted alone
    with twice the warm-up. ``joint=True`` instead samples each batch in one NUTS run over all its curves, each
    whitened by its Laplace approximation (``joint`` of :func:`bayescale.sampler.run_nuts`): no lock step, but a shared step size,
    and a divergence counts against every curve of the batch.
    Each curve's random key depends on ``seed`` and its position only, not on the batching.
    """
    rd = prepare_runs(runs, law, y=y, x=x, inputs=inputs, group=group, se=se, lower=lower, upper=upper,
                      likelihood=check_likelihood(likelihood))
    law = rd.law
    settings = SamplerSettings.for_law(law, chains, warmup, samples, **sampler)
    groups = rd.groups
    frames = [rd.curve(g).drop(columns=["group"]).reset_index(drop=True) for g in groups]
    n_pad = batch_pad_length(max(len(f) for f in frames))
    built = [curve_data(law, f, n_pad) for f in frames]
    model = build_model(law, rd.likelihood, df)
    if batch_size is None:
        batch_size = 1 if jax.default_backend() == "cpu" else len(groups)
    size = max(1, min(int(batch_size), len(groups)))
    order = sorted(range(len(groups)), key=lambda i: len(frames[i]))
    root = jax.random.PRNGKey(seed)
    per_curve = [None] * len(groups)
    n_batches = -(-len(groups) // size)
    for b in range(n_batches):
        idx = order[b * size:(b + 1) * size]
        padded = idx + [idx[-1]] * (size - len(idx))  # same shapes for the last batch: no recompilation
        batch = jax.tree.map(lambda *a: np.stack(a), *[built[i][0] for i in padded])
        keys = np.stack([np.asarray(jax.random.fold_in(root, i)) for i in padded])
        out = run_nuts(model, batch, keys, settings, len(law.params) + 1, batched=True, progress=progress,
                       label=f"NUTS {law.name} batch {b + 1}/{n_batches}", joint=joint)
        for j, i in enumerate(idx):
            per_curve[i] = jax.tree.map(lambda a: a[j], out)
    fits, refitted = {}, []
    for i, (g, frame) in enumerate(zip(groups, frames)):
        samples_, ll, stats, vbest = per_curve[i]
        idata = _to_idata(law, samples_, ll, stats, frame)
        f = Fit(law, idata, built[i][1], frame, rd.columns, rd.likelihood, df, seed, settings, group=g,
                map_potential=float(vbest))
        if refit_flagged and not f.ok:
            retry = SamplerSettings.for_law(law, chains, 2 * warmup, samples, **sampler)
            f2 = _fit_prepared(rd, df, retry, seed + 1000 + i, progress=False, group=g)
            refitted.append(g)
            if len(f2.warnings) <= len(f.warnings):
                f = f2
        fits[g] = f
    return FitMany(fits, law, refitted)
