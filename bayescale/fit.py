"""Fit a law to runs with NUTS: :func:`fit`, :func:`fit_many`, and the :class:`Fit` result.

A :class:`Fit` holds an ArviZ DataTree (posterior, log-likelihood, sample stats, observed data) plus what is needed
to predict again after a save/load: the law, the noise model, the data scales, column names, seed and settings.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import os
import pickle
import sys
import warnings
from dataclasses import asdict, replace
from pathlib import Path

from arviz_base import from_dict
import jax
import numpy as np
import pandas as pd
import xarray as xr
from tqdm.auto import tqdm

from bayescale import calibration, config
from bayescale.bands import DEFAULT_LEVELS, bands_from_draws
from bayescale.error_model import (ErrorModel, ExtrapolationError, check_error, default_error_model, heldout_errors,
                                   noise_level)
from bayescale.errors import BayescaleError, FitFileError, SettingError, UnknownLawError
from bayescale.laws import Law, Scales, get_law, is_builtin
from bayescale.model import batch_pad_length, build_model, curve_data, pad_length
from bayescale.noise import DEFAULT as DEFAULT_LIKELIHOOD
from bayescale.noise import ROBUST_ALTERNATIVE, check_likelihood, log_sd
from bayescale.posterior import Component, PosteriorDraws, check_tau, thin
from bayescale.runs import RunData, fitted_span, prepare_runs, query_points, run_size
from bayescale.sampler import SamplerSettings, run_nuts

__all__ = ["Fit", "FitMany", "fit", "fit_many", "load_fit"]

RHAT_MAX, ESS_MIN = 1.01, 400
TARGET_ACCEPT_STEPS = (0.9, 0.95, 0.99)  # the next target_accept advised after divergences; 0.99 is the ceiling


class Fit:
    """Posterior of one law fitted to one curve. Use :meth:`predict` for bands, :attr:`ok` for the diagnostics gate."""

    def __init__(self, law: Law, idata, scales: Scales, runs: pd.DataFrame, columns: dict, likelihood: str,
                 df: float, seed: int, settings: SamplerSettings, group=None, map_potential: float = float("nan"),
                 discrepancy: float | None = None, error="default"):
        self.law, self.idata, self.scales, self.runs = law, idata, scales, runs
        self.columns, self.likelihood, self.df, self.seed = columns, likelihood, df, seed
        self.settings, self.group, self.map_potential = settings, group, map_potential
        self.error_model = check_error(error)  # where the extrapolation error comes from (see `error`)
        self._error = None if discrepancy is None else ExtrapolationError.fixed(check_tau(discrepancy))
        self.calibration = None
        self.local = None  # localize(): {"targets": DataFrame (law input names), "tau": float}
        self._diag = None
        self.padded = None  # the runs' length in its compiled sampler (padded), where it was sampled here

    refittable = True  # :meth:`refit` works (leave-future-out calibration and comparison use it)

    @property
    def param_names(self) -> list[str]:
        """Sampled parameters: the law's plus the noise scale ``sigma``."""
        return [*self.law.param_names, "sigma"]

    def __repr__(self) -> str:
        d = self.diagnostics
        rhat = "n/a" if d["chains"] < 2 else f"{d['max_rhat']:.3f}"
        return (f"<Fit law={self.law.name} likelihood={self.likelihood} runs={len(self.runs)}"
                f"{'' if self.group is None else f' group={self.group!r}'} chains={d['chains']} draws={d['draws']} "
                f"max_rhat={rhat} min_ess_bulk={d['min_ess_bulk']:.0f} divergences={d['divergences']} "
                f"ok={self.ok}>")

    # -- posterior -------------------------------------------------------------------------------------
    @property
    def posterior(self) -> xr.Dataset:
        return self.idata["posterior"].to_dataset()

    def draws(self, max_draws: int | None = None) -> dict:
        """Posterior draws flattened over chains: dict name -> array (S,), at most ``max_draws`` evenly spaced.
        A NaN or infinite draw is an error naming the parameter (it would give meaningless bands)."""
        post = self.posterior
        out = {k: post[k].values.reshape(-1, *post[k].shape[2:]) for k in self.param_names}
        for k, v in out.items():
            bad = int(np.size(v) - np.isfinite(v).sum())
            if bad:
                raise BayescaleError(f"the posterior of parameter {k!r} has {bad} NaN/inf draw(s) of {np.size(v)}: "
                                     "this fit cannot predict; refit it")
        return thin(out, max_draws)

    def posterior_draws(self, max_draws: int | None = 4000, seed: int = 0, discrepancy=None) -> PosteriorDraws:
        """This fit's :class:`~bayescale.posterior.PosteriorDraws`, predicting with its extrapolation error
        (:attr:`error`), or a fixed ``tau`` = ``discrepancy`` (0: the raw posterior)."""
        params = self.draws(max_draws)
        comp = Component(self.law, params, self.scales, self.likelihood, self.df,
                         **self.error_draws(len(next(iter(params.values()))), seed, discrepancy))
        return PosteriorDraws([comp], source=self.law.name)

    def error_draws(self, n: int, seed: int, discrepancy=None) -> dict:
        """The extrapolation error of ``n`` posterior draws, as a :class:`~bayescale.posterior.Component` takes
        it: ``tau`` (n,), ``gamma`` and ``error_note``; ``discrepancy``: a fixed tau instead of :attr:`error`."""
        err = self.error if discrepancy is None else ExtrapolationError.fixed(check_tau(discrepancy))
        return {"tau": err.draws(n, seed + 7), "gamma": err.gamma,
                "error_note": err.describe() if not err.is_zero else "none (raw posterior)"}

    # -- extrapolation error (bayescale.error_model, bayescale.calibration) ------------------------------
    @property
    def error(self) -> ExtrapolationError:
        """The extrapolation error this fit predicts with: fixed by :meth:`with_discrepancy`/:meth:`calibrate`,
        else from :attr:`error_model` (by default the corpus prior, :func:`bayescale.error_model.default_error_model`,
        updated with this fit's own leave-future-out errors,
        :func:`bayescale.calibration.own_errors`); none when ``error_model`` is None."""
        if self._error is None:
            model = self.error_model
            if model is None:
                self._error = ExtrapolationError.fixed(0.0, method="none (raw posterior)")
            else:
                self._error = self._error_model_used().posterior(
                    self.law.name, fitted_span(self.law, self.scales), self.noise_level, *self.own_errors())
        return self._error

    def _error_model_used(self) -> ErrorModel:
        """:attr:`error_model` itself, or for ``"default"`` the shipped one for this fit's likelihood."""
        model = self.error_model
        return default_error_model(self.likelihood) if isinstance(model, str) else model

    @property
    def discrepancy(self) -> float:
        """Median extrapolation error ``tau`` (ln-units per decade^gamma beyond the runs; see :attr:`error`)."""
        return self.error.tau

    @property
    def noise_level(self) -> float:
        """Typical noise sd of ``ln y`` (posterior median sigma, in ln units: :func:`bayescale.noise.log_sd`)."""
        return noise_level(self.likelihood, self.runs["y"].to_numpy(float), self.draws(1000)["sigma"], self.df)

    def own_errors(self, holdout: float = 0.25) -> tuple[pd.DataFrame, str]:
        """This fit's leave-future-out errors (:func:`bayescale.calibration.own_errors`: up to 4 refits without its
        furthest runs, each with ``config.settings["lfo.refit_draws"]`` warm-up steps and draws per chain and
        ``config.settings["lfo.refit_chains"]`` chains at most); kept, as the error and the risk report both read
        them."""
        cache = self.__dict__.setdefault("_own_errors", {})
        if holdout not in cache:
            st = _own_refit_settings(self.settings)
            kw = dict(warmup=st.num_warmup, samples=st.num_samples, chains=st.num_chains)
            cache[holdout] = calibration.own_errors(
                self.law, self.runs, lambda runs, seed: self.refit(runs, seed=seed, **kw), holdout,
                seed=self.seed + 7919)
        return cache[holdout]

    def heldout_errors(self, at, observed, curve=None) -> pd.DataFrame:
        """This fit's errors at runs it did not see, with its own leave-future-out errors: the rows
        :func:`bayescale.error_model.learn` takes, so that an error model can be learned from one's own past
        curves (fit each on its early runs, collect the rows, ``learn(rows, domain=None)``, then
        ``fit.with_error(model)``).

        Parameters
        ----------
        at : points (as for :meth:`predict`)
            The runs held out.
        observed : array
            Their outcomes, one per point.
        curve : str, optional
            The curve's id in the corpus (default: the fit's group, else ``"curve"``).

        Returns
        -------
        DataFrame
            ``kind="target"`` rows for the held-out runs and ``kind="own"`` rows (with ``block``) for
            :meth:`own_errors`: ``r`` (ln y minus the raw predicted mean of ln y), ``s`` (its sd), ``beyond``
            (decades), and per curve ``curve``, ``family``, ``span`` (decades of runs) and ``noise`` (ln units).
        """
        frame = query_points(self.law, at, self.columns)
        y = np.asarray(observed, float).reshape(-1)
        if y.shape != (len(frame),) or not (np.isfinite(y) & (y > 0)).all():
            raise ValueError(f"observed must be {len(frame)} positive finite values, one per point; got {y}")
        draws = self.posterior_draws(2000, seed=0, discrepancy=0.0)
        mu = draws.mean(frame)
        target = heldout_errors(y, np.log(mu), log_sd(self.likelihood, mu, draws.sigma[:, None], self.df),
                                draws.beyond(frame)).assign(kind="target", block=0)
        own = self.own_errors()[0][["r", "s", "beyond", "block"]].astype(float).assign(kind="own")
        tag = dict(curve=str(curve if curve is not None else "curve" if self.group is None else self.group),
                   family=self.law.name, span=fitted_span(self.law, self.scales), noise=self.noise_level)
        return pd.concat([t for t in (target, own) if len(t)], ignore_index=True).assign(**tag)

    def with_error(self, error) -> "Fit":
        """The same posterior predicting with another extrapolation error: an :class:`ExtrapolationError`, an
        :class:`~bayescale.error_model.ErrorModel` (its posterior for this fit), ``"default"`` or None (raw)."""
        new = copy.copy(self)
        if isinstance(error, ExtrapolationError):
            new._error = error
        else:
            new.error_model, new._error = check_error(error), None
        return new

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
            import arviz_stats as azs  # slow to import (SciPy's statistics): see _sample

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

    def _checks(self) -> list[tuple[str, bool]]:
        """(message, fails the gate) for every diagnostic that needs the user's attention."""
        d, out = self.diagnostics, []
        rhat = d["table"]["r_hat"]
        if d["chains"] < 2:
            out.append(("r-hat is not available with one chain, so convergence was not checked; refit with "
                        "chains=2 or more (CLI: --chains 2) to check it", False))
        elif not np.isfinite(d["max_rhat"]) or d["max_rhat"] > RHAT_MAX:
            worst = rhat.index[rhat.isna()][0] if rhat.isna().any() else rhat.idxmax()
            out.append((f"r-hat {rhat[worst]:.3f} > {RHAT_MAX} (worst: {worst}): chains disagree; "
                        "run more warm-up/draws or check for several modes", True))
        min_ess = ESS_MIN * d["chains"] / 4
        if d["min_ess_bulk"] < min_ess or d["min_ess_tail"] < min_ess:
            out.append((f"effective sample size {min(d['min_ess_bulk'], d['min_ess_tail']):.0f} < {min_ess:.0f}: "
                        "intervals are noisy; draw more samples", True))
        if d["divergences"]:
            out.append(self._divergence_check(d["divergences"], d["chains"] * d["draws"]))
        low = [b for b in d["bfmi"] if b < 0.3]
        if low:
            out.append((f"E-BFMI {min(low):.2f} < 0.3 in {len(low)} chain(s): poor energy exploration", True))
        return out + [(msg, False) for msg in self.data_warnings]

    @property
    def data_warnings(self) -> list[str]:
        """Runs the law cannot explain: an input :data:`ISOLATED_DECADES` from every other run's, residuals beyond
        :data:`RESIDUAL_MAX` noise sds (each run named, and the robust likelihood named once:
        :data:`bayescale.noise.ROBUST_ALTERNATIVE`), y that rises with scale where the fitted law falls (or the
        reverse), every y the same. Notes, not failures."""
        if getattr(self, "_data_warnings", None) is None:
            self._data_warnings = _data_checks(self)
        return self._data_warnings

    def _divergence_check(self, n: int, total: int) -> tuple[str, bool]:
        """Divergences: tolerated up to 1 per 1000 draws (at least 1); advice that depends on target_accept."""
        tolerated = max(1, total // 1000)
        accept = self.settings.target_accept
        higher = [a for a in TARGET_ACCEPT_STEPS if a > accept + 1e-9]
        if n <= tolerated:
            advice = (f"to remove them, refit with target_accept={higher[0]} (CLI: --target-accept {higher[0]})"
                      if higher else "if the bands matter, look for an outlying run (fit.loo(): Pareto k > 0.7)")
            return (f"{n} divergent transition(s) in {total} draws (up to {tolerated} tolerated, 1 per 1000): "
                    f"the fit passes; {advice}", False)
        head = f"{n} divergent transitions in {total} draws (more than {tolerated} tolerated, 1 per 1000)"
        if higher:
            return (f"{head}: the posterior has regions NUTS cannot explore, so the bands may be off; refit with "
                    f"target_accept={higher[0]} (CLI: --target-accept {higher[0]})", True)
        return (f"{head} even at target_accept={accept:g}: these runs do not pin the law down; use a simpler law "
                "(compare laws with bs.compare or `bayescale compare`), add runs where the bands are widest, or look "
                "for an outlying run (fit.loo(): Pareto k > 0.7) and check it", True)

    @property
    def warnings(self) -> list[str]:
        """Readable reasons to be careful with the fit: those that fail :attr:`ok`, and notes that do not (one
        chain, so no r-hat; a few divergences, at most 1 per 1000 draws). Empty when nothing needs attention."""
        return [msg for msg, _ in self._checks()]

    @property
    def ok(self) -> bool:
        """The diagnostics gate: r-hat <= 1.01 (with 2 or more chains; one chain passes with a warning that r-hat
        is not available), bulk and tail ESS >= 100 per chain, at most 1 divergence per 1000 post-warm-up draws (at
        least 1 tolerated) and E-BFMI >= 0.3 in every chain. :attr:`warnings` says why it fails."""
        return not any(fails for _, fails in self._checks())

    def summary(self, natural: bool = True) -> pd.DataFrame:
        """Posterior mean, sd, 5%/95% quantiles and diagnostics of every parameter."""
        def moments(da) -> dict:
            v = da.values.reshape(-1)
            return {"mean": v.mean(), "sd": v.std(), "q5": np.quantile(v, 0.05), "q95": np.quantile(v, 0.95)}

        d = self.diagnostics["table"]
        rows = {name: {**moments(self.posterior[name]), **d.loc[name].to_dict()} for name in self.param_names}
        if natural and self.law.natural is not None:
            nat = self.natural()
            rows.update({f"{name} (published form)": moments(nat[name]) for name in nat.data_vars})
        return pd.DataFrame(rows).T

    def loo(self):
        """PSIS-LOO of the fitted runs (ArviZ ``loo``)."""
        import arviz_stats as azs

        return azs.loo(self.idata)

    def with_discrepancy(self, tau: float) -> "Fit":
        """The same posterior, predicting with a fixed extrapolation error ``tau`` (ln-units per decade beyond the
        runs; 0: the raw posterior)."""
        return self.with_error(ExtrapolationError.fixed(check_tau(tau)))

    def refit(self, runs: pd.DataFrame, seed: int | None = None, law=None, **over) -> "Fit":
        """This fit's law (or ``law``), noise model and sampler settings (updated with ``over``: :func:`fit`'s
        ``chains``, ``warmup``, ``samples``, ``progress`` and NUTS keywords) fitted to other ``runs`` (law input
        columns, ``y``, optional ``se``); the result keeps this fit's column names and group. Its data are padded
        to this fit's padded length when they are no more, so that refits to fewer runs (its own leave-future-out
        refits) run in the fit's compiled program."""
        st = self.settings
        kw = dict(chains=st.num_chains, warmup=st.num_warmup, samples=st.num_samples, target_accept=st.target_accept,
                  max_tree_depth=st.max_tree_depth, dense_mass=st.dense_mass, n_starts=st.n_starts,
                  opt_steps=st.opt_steps, laplace_mass=st.laplace_mass, progress=False)
        kw.update(over)
        law = self.law if law is None else get_law(law)
        if law is not self.law:
            kw["target_accept"] = law.target_accept if "target_accept" not in over else over["target_accept"]
        rd = prepare_runs(runs, law, y="y", inputs={n: n for n in law.input_names}, se="se" if "se" in runs else None,
                          likelihood=self.likelihood)
        progress = kw.pop("progress")
        settings = SamplerSettings.for_law(law, kw.pop("chains"), kw.pop("warmup"), kw.pop("samples"), **kw)
        new = _fit_prepared(rd, self.df, settings, self.seed if seed is None else seed, progress,
                            n_pad=self.padded or pad_length(len(self.runs)))
        new.columns, new.group, new.error_model = dict(self.columns), self.group, self.error_model
        return new

    @staticmethod
    def _refit_with(refit_kw: dict):
        """A ``refit`` callable for :mod:`bayescale.calibration` passing ``refit_kw`` on (None: the default)."""
        return (lambda f, runs, seed, law=None: f.refit(runs, seed=seed, law=law, **refit_kw)) if refit_kw else None

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
    def predictive_draws(self, at, seed: int | None = None, max_draws: int | None = 4000, discrepancy=None,
                         raw: bool = False):
        """Draws of the mean curve and of a new observed run at ``at``: (query frame, two arrays (S, points)).

        Beyond the runs the mean curve includes the fit's extrapolation error (:attr:`error`), or a fixed ``tau``
        = ``discrepancy``; ``raw=True``: none (the raw posterior).
        """
        frame = query_points(self.law, at, self.columns)
        seed = self._seed(seed)
        mu, obs = self.posterior_draws(max_draws, seed, 0.0 if raw else discrepancy).predictive(frame, seed)
        return frame, mu, obs

    def _seed(self, seed):
        return self.seed + 1 if seed is None else seed

    def log_predictive_density(self, at, observed, se=None, max_draws: int | None = 4000, discrepancy=None,
                               seed: int | None = None, raw: bool = False) -> np.ndarray:
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
        return self.posterior_draws(max_draws, seed, 0.0 if raw else discrepancy).log_density(frame, y, se=se,
                                                                                           seed=seed)

    def predict(self, at, levels=DEFAULT_LEVELS, seed: int | None = None, max_draws: int | None = 4000,
                discrepancy=None, raw: bool = False):
        """Posterior predictive bands at ``at`` (see :class:`bayescale.bands.Bands`), with the fit's extrapolation
        error beyond the runs (:attr:`error`; a fixed ``tau`` = ``discrepancy``); ``raw=True``: the raw posterior,
        whose bands beyond the runs are too narrow on real curves (``benchmarks/RESULTS.md``)."""
        seed = self._seed(seed)
        return bands_from_draws(self.posterior_draws(max_draws, seed, 0.0 if raw else discrepancy),
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
            "map_potential": self.map_potential, "error": self.error.to_dict(),
            # the model's parameters, not just "default": the file says what its bands were made with
            "error_model": None if self.error_model is None else self._error_model_used().to_dict(),
            "local": None if self.local is None else {"tau": self.local["tau"],
                                                      "targets": self.local["targets"].to_dict(orient="list")},
        }

    def save(self, path) -> Path:
        """Write the fit (posterior, stats, runs and metadata) to a netCDF file, with a sha256 of each group and of
        the metadata that :func:`load_fit` checks."""
        path = Path(path)
        tree = self.idata.copy()
        tree["runs"] = xr.Dataset.from_dataframe(self.runs.reset_index(drop=True).rename_axis("run"))
        meta = json.loads(json.dumps(self._meta(), default=float))  # as load_fit will read it back
        sha = {g: _sha256(tree[g].to_dataset()) for g in tree.children}
        sha["metadata"] = _sha256_meta(meta)
        tree.attrs["bayescale"] = json.dumps({**meta, "sha256": sha})
        tree.to_netcdf(path, engine="h5netcdf")
        return path


def _sha256(ds: xr.Dataset) -> str:
    """sha256 of a dataset's variables (names, dims, values; numbers as little-endian float64)."""
    h = hashlib.sha256()
    for name in sorted(ds.data_vars, key=str):
        v = ds[name].values
        h.update(json.dumps([str(name), list(map(str, ds[name].dims)), list(v.shape)]).encode())
        if v.dtype.kind in "biuf":
            h.update(np.ascontiguousarray(v, dtype="<f8").tobytes())
        else:
            h.update("\x1f".join(map(str, v.reshape(-1))).encode())
    return h.hexdigest()


def _sha256_meta(meta: dict) -> str:
    return hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()


_REQUIRED_GROUPS = ("posterior", "sample_stats", "runs")


def load_fit(path) -> Fit:
    """Read a fit written by :meth:`Fit.save`; its law must be registered (built-ins always are).

    A :class:`~bayescale.errors.FitFileError` names the file and the part that is missing or wrong, including a
    posterior, runs or metadata changed after the save (their sha256 differs). Files saved before the checksum
    existed load with a warning that they cannot be checked.
    """
    path = Path(path)
    if not path.exists():
        raise FitFileError(f"fit file {str(path)!r} does not exist")
    try:
        tree = xr.open_datatree(path, engine="h5netcdf").load()
        meta = json.loads(tree.attrs["bayescale"])
        if not isinstance(meta, dict):
            raise TypeError("the metadata is not a JSON object")
    except Exception as exc:
        raise FitFileError(f"{str(path)!r} is not a bayescale fit file or is corrupt ({type(exc).__name__}: {exc}); "
                           "refit and save it again") from exc
    missing = [g for g in _REQUIRED_GROUPS if g not in tree.children]
    if missing:
        raise FitFileError(f"fit file {str(path)!r} has no {', '.join(map(repr, missing))} group: it is incomplete; "
                           "refit and save it again")
    _check_sha256(path, tree, meta)
    law, kw = _fit_arguments(path, meta)
    runs = tree["runs"].to_dataset().to_dataframe().reset_index(drop=True)
    lacking = [c for c in (*law.input_names, "y") if c not in runs]
    if lacking:
        raise FitFileError(f"the runs in fit file {str(path)!r} lack column(s) {lacking} of law {law.name!r}; "
                           "refit and save again")
    post = tree["posterior"].to_dataset()
    for name in (*law.param_names, "sigma"):
        if name not in post:
            raise FitFileError(f"the posterior in fit file {str(path)!r} has no parameter {name!r} of law "
                               f"{law.name!r}; refit and save again")
        bad = int(post[name].size - np.isfinite(post[name].values).sum())
        if bad:
            raise FitFileError(f"the posterior of parameter {name!r} in fit file {str(path)!r} has {bad} NaN/inf "
                               "draw(s); refit and save again")
    idata = tree.copy()
    del idata["runs"]
    idata.attrs.pop("bayescale", None)
    local, error = kw.pop("local"), kw.pop("error_value")
    out = Fit(law, idata, runs=runs, **kw)
    out.local, out._error = local, error
    return out


def _check_sha256(path: Path, tree, meta: dict) -> None:
    sha = meta.pop("sha256", None)
    if sha is None:
        warnings.warn(f"fit file {str(path)!r} was saved without a checksum (an older bayescale), so changes to its "
                      "posterior cannot be detected; save it again to add one", UserWarning, stacklevel=3)
        return
    if not isinstance(sha, dict):
        raise FitFileError(f"the sha256 entry in the metadata of fit file {str(path)!r} is not a mapping: the file "
                           "was changed after it was saved; refit and save again")
    for part, digest in sha.items():
        if part == "metadata":
            now = _sha256_meta(meta)
        else:
            now = _sha256(tree[part].to_dataset()) if part in tree.children else None
        if now != digest:
            raise FitFileError(f"the {part} in fit file {str(path)!r} was changed after it was saved (its sha256 "
                               "differs); refit and save again")


def _fit_arguments(path: Path, meta: dict):
    """The law and the keyword arguments of :class:`Fit` from a fit file's metadata, each key checked."""
    where = f"fit file {str(path)!r}"

    def need(key, types, what):
        types = types if isinstance(types, tuple) else (types,)
        if key not in meta:
            raise FitFileError(f"the metadata of {where} has no {key!r} entry; refit and save again")
        if not isinstance(meta[key], types) or isinstance(meta[key], bool) and bool not in types:
            raise FitFileError(f"the {key!r} entry in the metadata of {where} must be {what}, got {meta[key]!r}; "
                               "refit and save again")
        return meta[key]

    try:
        law = get_law(need("law", str, "a law name"))
    except UnknownLawError as exc:
        raise FitFileError(f"{where} was made by law {meta['law']!r}, which is not registered: register it with "
                           "bayescale.register_law(...) before load_fit, or refit") from exc
    likelihood = need("likelihood", str, "a likelihood name")
    s = need("scales", dict, "a mapping of data scales")
    columns = need("columns", dict, "a mapping of law inputs to columns")
    settings = need("settings", dict, "a mapping of sampler settings")
    kw = {"df": float(need("df", (int, float), "a number")), "seed": need("seed", int, "an integer"),
          "group": need("group", (str, type(None)), "a group name or null"), "columns": columns,
          "map_potential": float(meta.get("map_potential", float("nan")))}
    try:
        kw["likelihood"] = check_likelihood(likelihood)
        kw["scales"] = Scales(**s)
        for k in ("y_min", "y_max", "y_med"):
            if not (isinstance(s[k], (int, float)) and np.isfinite(s[k])):
                raise ValueError(f"scales[{k!r}] must be a finite number, got {s[k]!r}")
        for k in ("center", "lo", "hi"):
            if not isinstance(s[k], dict) or set(s[k]) != set(law.input_names):
                raise ValueError(f"scales[{k!r}] must map each input of law {law.name!r} {list(law.input_names)} "
                                 f"to a number, got {s[k]!r}")
        kw["settings"] = SamplerSettings(**settings)
        if "error" in meta:
            kw["error"] = check_error(ErrorModel.from_dict(meta["error_model"]) if isinstance(meta.get("error_model"), dict)
                                      else meta.get("error_model"))
            error = ExtrapolationError.from_dict(meta["error"])
        else:  # files saved before the error model hold a fixed tau
            kw["error"], error = None, ExtrapolationError.fixed(check_tau(meta.get("discrepancy", 0.0)))
        kw["error_value"] = error
        loc = meta.get("local")
        kw["local"] = None if not loc else {"tau": check_tau(loc["tau"]), "targets": pd.DataFrame(loc["targets"])}
    except (TypeError, ValueError, KeyError) as exc:
        raise FitFileError(f"the metadata of {where} is not valid ({type(exc).__name__}: {exc}); refit and save "
                           "again") from exc
    return law, kw


RESIDUAL_MAX = 4.0  # a run further than this many noise sds from the fitted curve is named
ISOLATED_DECADES = 3.0  # a run whose log input lies this far from every other run's is named (a unit slip?)


def _describe_run(law, row) -> str:
    return ", ".join(f"{n}={row[n]:.4g}" for n in law.input_names) + f" (y={row['y']:.4g})"


def _data_checks(f: Fit) -> list[str]:
    """See :attr:`Fit.data_warnings`."""
    from scipy.stats import spearmanr

    runs, law, out = f.runs, f.law, []
    y = runs["y"].to_numpy(float)
    if len(y) > 1 and np.ptp(y) == 0:
        return [f"every run has the same y ({y[0]:.4g}): the law's shape cannot be learned from them; check the y "
                "column"]
    for inp in law.inputs:  # isolated inputs: a unit slip (billions for units, tokens for parameters)
        v = runs[inp.name].to_numpy(float)
        if inp.scale != "log" or len(np.unique(v)) < 4 or (v <= 0).any():
            continue
        lv = np.log10(v)
        for i in range(len(v)):
            gap = np.min(np.abs(np.delete(lv, np.flatnonzero(lv == lv[i])) - lv[i]))
            if gap > ISOLATED_DECADES:
                out.append(f"the run {_describe_run(law, runs.iloc[i])} lies {gap:.1f} decades from every other "
                           f"run's {inp.name}: a unit slip? Check that row")
        # several runs slipped alike (e.g. every third row in billions): two groups of runs decades apart
        cut = np.sort(np.unique(lv))
        k = int(np.argmax(np.diff(cut)))
        gap = cut[k + 1] - cut[k]
        low = lv <= cut[k]
        if gap > ISOLATED_DECADES and min(low.sum(), (~low).sum()) >= 2:
            few = np.flatnonzero(low if low.sum() <= (~low).sum() else ~low)
            rows = "; ".join(_describe_run(law, runs.iloc[i]) for i in few[:3]) + ("; ..." if len(few) > 3 else "")
            side = "below" if low[few[0]] else "above"
            out.append(f"{len(few)} runs ({rows}) have {inp.name} {gap:.1f} decades {side} every other run's: a unit "
                       "slip in those rows (billions for units)? Check those rows")
    mu = np.median(f.posterior_draws(500, seed=0, discrepancy=0.0).mean(runs), axis=0)
    if (y > 0).all() and (mu > 0).all():
        sd = np.median(log_sd(f.likelihood, mu, np.median(f.draws(500)["sigma"]), f.df))
        z = (np.log(y) - np.log(mu)) / max(sd, 1e-12)
        # (influence, PSIS-LOO k > 0.7, is no test: a ladder's corner runs are often influential and fine)
        flagged = np.flatnonzero(np.abs(z) > RESIDUAL_MAX)
        for i in flagged[np.argsort(-np.abs(z[flagged]))][:3]:
            out.append(f"the run {_describe_run(law, runs.iloc[i])} lies {z[i]:+.1f} noise sds from the fitted "
                       f"curve ({mu[i]:.4g}): a unit slip in its inputs, a different setup, or a law that does not "
                       "hold there? Check that row")
        robust = ROBUST_ALTERNATIVE.get(f.likelihood)
        if len(flagged) and robust:
            n = len(flagged)
            out.append(f"{n} run{'s' * (n > 1)} lie{'s' * (n == 1)} more than {RESIDUAL_MAX:g} noise sds from the "
                       f"fitted curve and pull{'s' * (n == 1)} the law's exponents (and the compute-optimal "
                       f"allocation) toward {'them' if n > 1 else 'it'}: if genuine, refit with "
                       f"likelihood='{robust}' (CLI: --likelihood {robust}), under which outlying runs weigh less")
    size = run_size(law, runs)
    if len(y) >= 4 and np.ptp(size) > 0:
        rho_y, rho_mu = spearmanr(size, y)[0], spearmanr(size, mu)[0]
        if np.isfinite(rho_y) and np.isfinite(rho_mu) and rho_y * rho_mu < 0 and min(abs(rho_y), abs(rho_mu)) > 0.5:
            way = "rises" if rho_y > 0 else "falls"
            out.append(f"y {way} with the size of the runs (rank correlation {rho_y:+.2f}) but the fitted {law.name} "
                       f"curve {'falls' if rho_mu < 0 else 'rises'}: is y a quantity this law describes (a loss or an "
                       "error rate: lower is better)? For an accuracy fit 1 - accuracy, or use the sigmoid law")
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
        lower=None, upper=None, likelihood: str = DEFAULT_LIKELIHOOD, df: float = 4.0, chains: int = 4,
        warmup: int = 1000, samples: int = 1000, seed: int = 0, progress: bool | None = None, error="default",
        **sampler) -> Fit:
    """Fit ``law`` to ``runs`` with NUTS (float64, seeded) and return a :class:`Fit`.

    ``runs``: DataFrame or CSV/Parquet path; ``x``/``inputs`` map the law's inputs to columns, ``y`` names the
    outcome. ``se`` (standard error) or ``lower``/``upper`` (95% interval) give known measurement error.
    ``likelihood``: ``"logstudentt"`` (default: multiplicative noise, robust to outlying runs), ``"lognormal"``,
    ``"normal"``, ``"studentt"`` or ``"beta"`` (bounded metrics in [0, 1], zeros included; :mod:`bayescale.noise`).
    Extra keywords (``target_accept``, ``max_tree_depth``, ``dense_mass``, ``n_starts``, ``opt_steps``) tune NUTS;
    ``target_accept`` defaults to the law's (``Law.target_accept``).
    ``error``: the extrapolation error of predictions beyond the runs (:attr:`Fit.error`): ``"default"`` (the
    corpus-learned prior updated with the fit's own leave-future-out errors, :mod:`bayescale.error_model`), an
    :class:`~bayescale.error_model.ErrorModel`, or ``"raw"``/None for the raw posterior (bands too narrow beyond
    the runs on real curves; ``predict(..., raw=True)`` gives them for any fit).
    With ``group=``, each group is a curve and the result is :func:`fit_many`'s.
    """
    error = check_error(error)
    if group is not None:
        return fit_many(runs, law, y=y, x=x, inputs=inputs, group=group, se=se, lower=lower, upper=upper,
                        likelihood=likelihood, df=df, chains=chains, warmup=warmup, samples=samples, seed=seed,
                        progress=progress, error=error, **sampler)
    rd = prepare_runs(runs, law, y=y, x=x, inputs=inputs, se=se, lower=lower, upper=upper,
                      likelihood=check_likelihood(likelihood))
    settings = SamplerSettings.for_law(rd.law, chains, warmup, samples, **sampler)
    out = _fit_prepared(rd, df, settings, seed, progress)
    out.error_model = error
    return out


def _own_refit_settings(settings: SamplerSettings) -> SamplerSettings:
    """The sampler settings of a fit's own leave-future-out refits (:meth:`Fit.own_errors`): the fit's, with at
    most ``config.settings["lfo.refit_draws"]`` warm-up steps and draws and ``["lfo.refit_chains"]`` chains."""
    n = config.settings["lfo.refit_draws"]
    return replace(settings, num_warmup=min(settings.num_warmup, n), num_samples=min(settings.num_samples, n),
                   num_chains=min(settings.num_chains, config.settings["lfo.refit_chains"]))


def _fit_prepared(rd: RunData, df, settings, seed, progress, group=None, n_pad: int = 0) -> Fit:
    frame, data, scales = _lone_curve(rd, group, n_pad)
    out = _sample(rd.law, rd.likelihood, df, settings, data, _key(seed), progress=progress, label=f"NUTS {rd.law.name}")
    return _as_fit(rd, df, settings, seed, group, frame, scales, out)


def _lone_curve(rd: RunData, group, n_pad: int = 0):
    """One curve's runs, the model's data padded for a fit of that curve alone (to ``n_pad`` points where they
    fit, else to :func:`~bayescale.model.pad_length`), and its scales."""
    frame = rd.curve(group).drop(columns=["group"], errors="ignore").reset_index(drop=True)
    return frame, *curve_data(rd.law, frame, n_pad if n_pad >= len(frame) else pad_length(len(frame)))


def _key(seed: int) -> np.ndarray:
    return np.asarray(jax.random.PRNGKey(seed))


def _sample(law: Law, likelihood: str, df, settings, data, keys, batched=False, joint=False, progress=False,
            label="NUTS"):
    """:func:`~bayescale.sampler.run_nuts` of ``law``'s model: one curve, or a batch with ``batched``."""
    program = f"{law.name}|{likelihood}|df={float(df)!r}" if is_builtin(law) else None  # a user's law: traced
    # the diagnostics' library, while compiled code holds no GIL (not in a worker: the submitting process checks);
    # and Dask's arrays where Dask is installed, as xarray imports them at its first array to tell if it is Dask's
    importing = None if _WORKER else config.import_meanwhile(
        "arviz_stats", *(("dask.array",) if importlib.util.find_spec("dask") is not None else ()))
    try:
        return run_nuts(build_model(law, likelihood, df), data, keys, settings, len(law.params) + 1,
                        batched=batched, progress=progress, label=label, joint=joint, program=program)
    finally:
        if importing is not None:
            importing.join()
        config.freeze_imports()


def _as_fit(rd: RunData, df, settings, seed, group, frame, scales, out) -> Fit:
    """The :class:`Fit` of one curve from its :func:`_sample` outputs."""
    samples, ll, stats, vbest = out
    fit = Fit(rd.law, _to_idata(rd.law, samples, ll, stats, frame), scales, frame, rd.columns, rd.likelihood, df,
              seed, settings, group=group, map_potential=float(vbest))
    fit.padded = np.shape(ll)[-1]
    return fit


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

    def pool_errors(self) -> "FitMany":
        """These fits with extrapolation errors that pool their curves' own leave-future-out errors, the curves
        taken as one domain (a suite of related runs: one corpus's tasks, one sweep): each curve's error is the
        corpus prior updated with its own errors and, through the offset of ``tau`` curves of one domain share,
        with the others' (:meth:`bayescale.error_model.ErrorModel.posterior_many`). Fits predicting with the raw
        posterior or a fixed ``tau`` stay as they are.

        Returns
        -------
        FitMany
            The same posteriors; ``fit.error.method`` says how many runs of its own and of the other curves
            informed each.
        """
        fleets: dict = {}  # fits sharing an error model pool together
        for g, f in self.items():
            if f.error_model is not None and (f._error is None or f._error.point is None):
                model = f._error_model_used()
                fleets.setdefault(json.dumps(model.to_dict(), sort_keys=True), (model, []))[1].append(g)
        out = dict(self)
        for model, groups in fleets.values():
            curves = [dict(family=self[g].law.name, span=fitted_span(self.law, self[g].scales),
                           noise=self[g].noise_level, errors=self[g].own_errors()[0]) for g in groups]
            for g, err in zip(groups, model.posterior_many(curves, "leave-future-out refits of each curve")):
                out[g] = self[g].with_error(err)
        return FitMany(out, self.law, self.refitted)

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
             likelihood: str = DEFAULT_LIKELIHOOD, df: float = 4.0, chains: int = 4, warmup: int = 1000,
             samples: int = 1000, seed: int = 0, progress: bool | None = None, refit_flagged: bool = True,
             batch_size: int | None = None, joint: bool = False, executor=None, error="default", **sampler) -> FitMany:
    """Fit ``law`` to every group of ``runs`` with vectorised NUTS (CPU, or GPU when JAX sees one).

    Curves are padded to a common length, so one compiled program serves them all, and sampled ``batch_size`` at a
    time (vmapped), each with its own step size and mass matrix. A vectorised NUTS step costs as much as the longest
    trajectory in the batch, and on a CPU the arithmetic of a few lanes already fills the cores: there batches of
    one curve, its chains run one after another on each device, were fastest (``benchmarks/batching.py``,
    ``benchmarks/speed.py``), so that is the CPU default; on a GPU the default is all curves at once. Each curve's
    random key depends on ``seed`` and its position only.

    Past one machine, ``executor`` ships the batches to workers and gathers the draws; diagnostics, the refits of
    flagged curves (also on the workers) and the result are the local run's, draw for draw. Point it at a cluster
    with ``dask.distributed.Client("scheduler:8786")``; on one machine use ``ProcessPoolExecutor(n,
    mp_context=multiprocessing.get_context("spawn"))`` (a forked child inherits JAX's threads and can deadlock).
    Each worker process sets itself up at its first batch, before JAX starts there: single-threaded XLA
    (``XLA_FLAGS``) and as many CPU devices as this process has, because the draws depend on how many devices the
    chains are split across (in the last digits). A worker thus runs one chain per core on up to ``chains`` cores;
    for one-core workers (``dask worker --nworkers N --nthreads 1``) start this process with
    ``BAYESCALE_CPU_DEVICES=1`` (its own fits then use one device too). A worker that already ran JAX keeps its
    devices and threads: valid draws, but not bit-identical, and oversubscribed cores. The law travels by value
    when it pickles (its functions defined at module level of an importable module), else by registered name:
    built-in laws are registered in every worker; register your own there first, e.g.
    ``client.run(bs.register_law, my_law, overwrite=True)`` (Dask pickles lambdas) or
    ``ProcessPoolExecutor(..., initializer=mymodule.register)``. The routes combine: a GPU worker samples a large
    batch in one vmapped program, so with one GPU worker per node pass ``batch_size`` = curves per GPU (the
    default follows this process's backend: one curve per batch on a CPU); identical draws need the same backend.

    Parameters
    ----------
    runs, law, group, y, x, inputs, se, lower, upper, likelihood, df, chains, warmup, samples, seed, progress, error
        As for :func:`fit`; ``group`` names the column whose values are the curves. Each curve's extrapolation error
        reads its own runs; for curves of one domain, :meth:`FitMany.pool_errors` lets it read the others' too.
    refit_flagged : bool
        Refit a curve whose diagnostics fail alone with twice the warm-up; the better of the two fits is kept.
    batch_size : int, optional
        Curves per vmapped batch (default: 1 on a CPU, all curves on a GPU). One curve per batch runs in the
        compiled program of a single fit, which its own leave-future-out refits run too.
    joint : bool
        Sample each batch in one NUTS run over all its curves, each whitened by its Laplace approximation
        (``joint`` of :func:`bayescale.sampler.run_nuts`): no lock step, but a shared step size, and a divergence
        counts against every curve of the batch.
    executor : optional
        Anything with ``submit(fn, *args)`` returning a future with ``result()``: a ``dask.distributed.Client``
        (or its ``get_executor()``), a ``concurrent.futures`` executor, ... None: sample in this process.
    **sampler
        NUTS settings (see :func:`fit`).

    Returns
    -------
    FitMany
        A dict group -> :class:`Fit`, with ``refitted`` (the groups refitted) and :meth:`FitMany.summary`.
    """
    _check_executor(executor)
    error = check_error(error)
    rd = prepare_runs(runs, law, y=y, x=x, inputs=inputs, group=group, se=se, lower=lower, upper=upper,
                      likelihood=check_likelihood(likelihood))
    law = rd.law
    settings = SamplerSettings.for_law(law, chains, warmup, samples, **sampler)
    groups = rd.groups
    frames = [rd.curve(g).drop(columns=["group"]).reset_index(drop=True) for g in groups]
    if batch_size is None:
        batch_size = 1 if jax.default_backend() == "cpu" else len(groups)
    size = max(1, min(int(batch_size), len(groups)))
    # one curve at a time (a CPU's default) runs in a single curve's program, which the fits' own refits and
    # the refits of flagged curves run too
    alone = size == 1 and not joint
    n_pad = batch_pad_length(max(len(f) for f in frames))
    built = [curve_data(law, f, n_pad) for f in frames]
    order = sorted(range(len(groups)), key=lambda i: len(frames[i]))
    root = jax.random.PRNGKey(seed)
    batches, jobs = [], []
    for b in range(-(-len(groups) // size)):
        idx = order[b * size:(b + 1) * size]
        padded = idx + [idx[-1]] * (size - len(idx))  # same shapes for the last batch: no recompilation
        batches.append(idx)
        keys = np.stack([np.asarray(jax.random.fold_in(root, i)) for i in padded])
        jobs.append((built[idx[0]][0], keys[0]) if alone else
                    (jax.tree.map(lambda *a: np.stack(a), *[built[i][0] for i in padded]), keys))
    outs = _sample_jobs(rd, df, settings, jobs, not alone, joint, executor, progress, f"NUTS {law.name} batch")
    fits = {}
    for idx, out in zip(batches, outs):
        for j, i in enumerate(idx):
            fits[groups[i]] = _as_fit(rd, df, settings, seed, groups[i], frames[i], built[i][1],
                                      out if alone else jax.tree.map(lambda a: a[j], out))
    fits = {g: fits[g] for g in groups}
    flagged = [i for i, g in enumerate(groups) if refit_flagged and not fits[g].ok]
    retry = SamplerSettings.for_law(law, chains, 2 * warmup, samples, **sampler)
    retried = [_lone_curve(rd, groups[i], n_pad) for i in flagged]
    outs = _sample_jobs(rd, df, retry, [(data, _key(seed + 1000 + i)) for i, (_, data, _) in zip(flagged, retried)],
                        False, False, executor, False, f"NUTS {law.name} refit")
    refitted = []
    for i, (frame, _, scales), out in zip(flagged, retried, outs):
        g = groups[i]
        f2 = _as_fit(rd, df, retry, seed + 1000 + i, g, frame, scales, out)
        refitted.append(g)
        if len(f2.warnings) <= len(fits[g].warnings):
            fits[g] = f2
    for f in fits.values():
        f.error_model = error
    return FitMany(fits, law, refitted)


# -- fleets: fit_many's jobs on an executor's workers ------------------------------------------------------------
# XLA has no thread-count flag: a CPU device runs its program on one thread (NUTS's ops are too small to split), and
# this keeps Eigen's library calls (large matrix products) on that thread too.
_ONE_THREAD_FLAG = "--xla_cpu_multi_thread_eigen=false"
_WORKER: dict = {}


def _check_executor(executor) -> None:
    if executor is None:
        return
    if not callable(getattr(executor, "submit", None)):
        raise SettingError(f"executor must have a submit(fn, *args) method whose futures have .result() (a "
                           "dask.distributed Client, a concurrent.futures executor, ...); got "
                           f"{type(executor).__name__}. Pass executor=None to fit in this process.")
    context = getattr(executor, "_mp_context", None)  # a ProcessPoolExecutor's start method (no public accessor)
    if context is not None and context.get_start_method() == "fork":
        raise SettingError("this ProcessPoolExecutor forks its workers, and a forked child inherits JAX's threads "
                           "and can deadlock; create it with mp_context=multiprocessing.get_context('spawn')")


def _law_ref(law: Law):
    """What travels to the workers for ``law``: the Law when it pickles (no lambdas), else its registered name."""
    try:
        pickle.dumps(law)
        return law
    except (pickle.PicklingError, AttributeError, TypeError):
        pass
    try:
        registered = get_law(law.name) is law
    except UnknownLawError:
        registered = False
    if not registered:
        raise SettingError(f"law {law.name!r} does not pickle and is not registered under its name, so the workers "
                           "cannot get it: register it (bayescale.register_law) here and in each worker, or define "
                           "its functions at module level of an importable module")
    return law.name


def _sample_jobs(rd: RunData, df, settings, jobs: list, batched: bool, joint: bool, executor, progress, label):
    """The :func:`_sample` outputs of each ``(data, keys)`` job, in order: here one after the other, or on
    ``executor``'s workers."""
    if executor is None:
        return [_sample(rd.law, rd.likelihood, df, settings, data, keys, batched, joint, progress,
                        f"{label} {j + 1}/{len(jobs)}") for j, (data, keys) in enumerate(jobs)]
    ref = _law_ref(rd.law) if jobs else None
    devices = jax.local_device_count() if jax.default_backend() == "cpu" else 1
    futures = [executor.submit(_worker_sample, devices, ref, rd.likelihood, df, settings, data, keys, batched, joint)
               for data, keys in jobs]
    if sys.stderr.isatty() if progress is None else progress:
        futures = tqdm(futures, desc=label, file=sys.stderr, leave=False)
    return [f.result() for f in futures]


def _worker_sample(devices: int, law_ref, likelihood: str, df, settings, data, keys, batched: bool, joint: bool):
    """One job in a worker process: its set-up (first job only), then :func:`_sample`, outputs as numpy arrays."""
    _worker_setup(devices)
    try:
        law = get_law(law_ref)
    except UnknownLawError:
        raise UnknownLawError(f"law {law_ref!r} is not registered in worker process {os.getpid()}: register it "
                              "there before fitting (Dask: client.run(bayescale.register_law, law); "
                              "ProcessPoolExecutor: initializer=), or define its functions at module level of an "
                              "importable module so that the law itself travels") from None
    return _sample(law, likelihood, df, settings, data, keys, batched, joint)


def _worker_setup(devices: int) -> None:
    """``devices`` CPU devices (the submitting process's count), each on one thread, for this worker process, if JAX
    has not started its backends here.

    The draws depend on how many devices the chains are split across (:func:`bayescale.sampler.chain_devices`), so
    a worker with the submitting process's count samples exactly as it would. Unpickling a job imports bayescale,
    which imports JAX but starts no backend, so the device count and ``XLA_FLAGS`` (read when the CPU backend
    starts) still take effect; once JAX has started they cannot change and the process keeps its own.
    """
    if _WORKER:
        return
    try:
        jax.config.update("jax_num_cpu_devices", devices)
    except RuntimeError:  # JAX already started in this process
        pass
    else:
        config.settings["cpu.devices"] = devices  # or config.setup() would set the default count again
        flags = os.environ.get("XLA_FLAGS", "").split()
        # (a value not starting with "--" names a flags file, which XLA reads instead)
        name = _ONE_THREAD_FLAG.split("=")[0]
        if (not flags or flags[0].startswith("--")) and not any(f.startswith(name) for f in flags):
            os.environ["XLA_FLAGS"] = " ".join([*flags, _ONE_THREAD_FLAG])
    _WORKER["ready"] = True
