"""The extrapolation-error model: how far a law's predictions stray beyond its runs, learned from real curves.

A law fitted to runs is exact only if the curve belongs to its family; real curves bend away from it, more the
further a prediction reaches. bayescale models the bend of curve ``c`` as a multiplicative error on the law's mean
curve (applied by :mod:`bayescale.posterior`)::

    mu'(x) = mu(x) exp(tau_c b(x)^gamma z_c),   z_c ~ Normal(0, 1), one per curve (a smooth bend, not jitter)

with ``b`` the distance beyond the fitted runs (decades of the furthest input, or of the geometric mean of several
log inputs such as N and D: :func:`bayescale.runs.distance_beyond`; 0 inside) and ``tau_c`` in ln-units per
decade^gamma. Curves differ, so ``tau_c`` is itself uncertain (hierarchical)::

    ln tau_c ~ Normal(a + a_family + a_domain + beta_span ln(span / 1 decade) + beta_noise ln(noise / 0.01),
                      omega^2),   a_domain ~ Normal(0, omega_domain^2)

``span``: decades the fitted runs cover; ``noise``: the fit's noise scale (ln units); ``a_domain``: what curves of
one domain (a suite of related runs) share, unknown for a user's curve, so its prior sd is
``sqrt(omega^2 + omega_domain^2)``. Mixing over ``tau_c`` gives
errors heavier-tailed than Gaussian, and the data decide ``gamma`` (how the error grows with distance).

:func:`learn` fits ``a, omega, gamma, beta_*`` and the family offsets (shrunk towards 0 with sd
:data:`FAMILY_SD`; a family the corpus lacks gets 0 and that extra spread) by maximum marginal likelihood (exact
gradients from JAX) and keeps a covariate only if it helps predict a domain left out of the corpus (a user's curve
comes from a domain the corpus lacks); it learns on a corpus
of held-out errors of real curves: per curve, the log errors ``r = ln y - E[ln y_pred]`` and predictive sds ``s`` of
its runs beyond the fitted ones, ``r ~ Normal(0, diag(s^2) + tau_c^2 u u^T)``, ``u = b^gamma``, integrated over
``ln tau_c`` on a grid. The package ships models learned on six public suites, one per likelihood the suites were
fitted with (:func:`default_error_model`; ``benchmarks/honest_bands.py`` learns them and scores them
leave-one-suite-out).

:meth:`ErrorModel.posterior` updates the prior with a fit's own leave-future-out errors
(:func:`bayescale.calibration.own_errors`: blocks of its largest runs, each predicted by a refit to the runs below
it and one bend of scale ``kappa tau b^gamma``;
the corpus learns ``kappa``, how the errors just beyond the runs relate to those further out), so that with few
runs the corpus decides and with many blocks the curve's own runs weigh more; it returns an
:class:`ExtrapolationError` (a distribution of ``tau`` on a grid) that fits carry and draws come from.
:meth:`ErrorModel.posterior_many` does the same for a fleet of curves of one domain, which share ``a_domain``, so
that each curve's error reads the others' own errors too (:meth:`bayescale.FitMany.pool_errors`).
"""

from __future__ import annotations

import functools
import itertools
import json
from dataclasses import asdict, dataclass, field
from importlib import resources

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from scipy.special import logsumexp

from bayescale.errors import SettingError
from bayescale.noise import DEFAULT as DEFAULT_LIKELIHOOD
from bayescale.noise import log_sd

__all__ = ["SHIPPED", "SHIPPED_KIN", "ErrorModel", "ExtrapolationError", "check_error", "default_error_model",
           "heldout_errors", "learn", "noise_level"]

GRID = np.linspace(np.log(1e-4), np.log(5.0), 161)  # ln tau grid (ln-units per decade^gamma)
FAMILY_SD = 0.5  # sd of a family's offset of ln tau (ln units): how different families may be a priori
OMEGA_MIN = 0.05  # smallest sd of ln tau between curves: below the grid's resolution
SPAN_REF, NOISE_REF = 1.0, 0.01  # covariate reference values: 1 decade of runs, 1% noise
COVARIATES = ("span", "noise")  # what ln tau may depend on besides the family and the domain
OFFSETS = np.linspace(-4.0, 4.0, 33)  # a domain's offset of ln tau in sds: the grid it is integrated over on
LOG_W_OFFSETS = -0.5 * OFFSETS**2 - logsumexp(-0.5 * OFFSETS**2)  # their Normal(0, 1) weights, normalised


def heldout_errors(y, log_mu, noise_sd, beyond) -> pd.DataFrame:
    """Errors of predictions of held-out runs, as :func:`learn` and :meth:`ErrorModel.posterior` take them.

    ``r = ln y - E[ln mu]`` and ``s^2 = Var[ln mu] + E[sd^2]`` (ln units), the expectations over posterior draws.

    Parameters
    ----------
    y : array (m,)
        Observed outcomes (positive).
    log_mu, noise_sd : array (S, m)
        Per draw and run: ln of the mean curve and the noise's sd of ``ln y`` (:func:`bayescale.noise.log_sd`).
    beyond : array (m,)
        Decades beyond the runs the draws were fitted to (:func:`bayescale.runs.distance_beyond`).

    Returns
    -------
    DataFrame
        Columns ``r``, ``s``, ``beyond``.
    """
    log_mu = np.asarray(log_mu, float)
    m = log_mu.mean(axis=0)
    var = log_mu.var(axis=0) + np.mean(np.asarray(noise_sd, float) ** 2, axis=0)
    return pd.DataFrame({"r": np.log(np.asarray(y, float)) - m, "s": np.sqrt(var),
                         "beyond": np.asarray(beyond, float)})


def _rank_one(const, rr, ua, ub, t2, xp=np):
    """``log Normal(r; 0, diag(s^2) + tau^2 u u^T)`` from the sufficient sums (``const`` = n ln 2 pi + sum ln s^2,
    ``rr`` = sum r^2/s^2, ``ua`` = sum u^2/s^2, ``ub`` = sum u r/s^2) at ``t2`` = tau^2 (matrix determinant lemma and
    Sherman-Morrison); arguments broadcast; ``xp``: the array module (NumPy, or JAX when learning)."""
    return -0.5 * (const + xp.log1p(t2 * ua) + rr - t2 * ub**2 / (1 + t2 * ua))


def _usable(errors: pd.DataFrame) -> pd.DataFrame:
    """The held-out errors that inform ``tau``: finite, and beyond the runs they were predicted from."""
    return errors[np.isfinite(errors["r"]) & np.isfinite(errors["s"]) & (errors["beyond"] > 0)]


def _loglik_grid(r, s, u, grid=GRID) -> np.ndarray:
    """:func:`_rank_one` of one bend at each ``ln tau`` of ``grid``."""
    r, s, u = (np.asarray(v, float).reshape(-1) for v in (r, s, u))
    if r.size == 0:
        return np.zeros(len(grid))
    s2 = np.maximum(s, 1e-8) ** 2
    return _rank_one(r.size * np.log(2 * np.pi) + np.sum(np.log(s2)), np.sum(r**2 / s2), np.sum(u**2 / s2),
                     np.sum(u * r / s2), np.exp(2 * np.asarray(grid)))


def _own_loglik(own: pd.DataFrame, gamma: float, kappa: float, grid=GRID) -> np.ndarray:
    """Log likelihood on the grid of a curve's own held-out errors: each ``block`` one bend, ``u = kappa b^gamma``."""
    blocks = own.groupby("block", sort=False) if "block" in own else [(0, own)]
    return sum((_loglik_grid(g["r"], g["s"], kappa * g["beyond"].to_numpy(float) ** gamma, grid) for _, g in blocks),
               np.zeros(len(grid)))


def _log_prior_grid(m, sd, grid=GRID) -> np.ndarray:
    """Normal(m, sd^2) of ``ln tau`` as probabilities on the grid (normalised there, so a narrow prior stays a
    distribution instead of a spike the quadrature would overweight)."""
    lp = -0.5 * ((np.asarray(grid) - m) / sd) ** 2
    return lp - logsumexp(lp)


@dataclass(frozen=True)
class ExtrapolationError:
    """The extrapolation error of one fit: a distribution of ``tau`` (probabilities ``prob`` on ``ln tau`` grid
    ``log_tau``; a point mass for a fixed ``tau``), its growth ``gamma`` with the distance beyond the runs, and how
    it was obtained (``method``)."""

    log_tau: tuple
    prob: tuple
    gamma: float = 1.0
    method: str = "fixed"
    point: float | None = None  # a fixed tau, exactly

    @classmethod
    def fixed(cls, tau: float, gamma: float = 1.0, method: str = "fixed") -> "ExtrapolationError":
        """A known ``tau`` (ln-units per decade^gamma; 0: the raw posterior)."""
        tau = float(tau)
        if not (np.isfinite(tau) and tau >= 0):
            raise ValueError(f"the extrapolation error tau must be a finite number >= 0, got {tau!r}")
        return cls((), (), float(gamma), method, tau)

    @property
    def is_zero(self) -> bool:
        return self.point == 0

    def quantile(self, q) -> np.ndarray:
        """Quantiles of ``tau``."""
        if self.point is not None:
            return np.full(np.shape(q), self.point)
        lt, p = np.asarray(self.log_tau, float), np.asarray(self.prob, float)
        if len(lt) == 1:
            return np.full(np.shape(q), np.exp(lt[0]))
        cdf = np.cumsum(p) / p.sum()
        return np.exp(np.interp(q, cdf, lt))

    @property
    def tau(self) -> float:
        """Median ``tau`` (ln-units per decade^gamma)."""
        return float(self.quantile(0.5))

    def draws(self, n: int, seed) -> np.ndarray:
        """``n`` draws of ``tau`` (grid cells chosen by probability, uniform within the cell), from ``seed``."""
        if self.point is not None:
            return np.full(n, self.point)
        lt, p = np.asarray(self.log_tau, float), np.asarray(self.prob, float)
        rng = np.random.default_rng(seed)
        step = lt[1] - lt[0] if len(lt) > 1 else 0.0
        return np.exp(lt[rng.choice(len(lt), size=n, p=p / p.sum())] + step * (rng.random(n) - 0.5))

    def describe(self) -> str:
        if self.point is not None:
            return f"tau {self.tau:.3g} per decade ({self.method})"
        lo, hi = self.quantile([0.05, 0.95])
        return (f"tau {self.tau:.3g} [{lo:.3g}, {hi:.3g}] (90%) ln-units per decade^{self.gamma:.2f} "
                f"({self.method})")

    def to_dict(self) -> dict:
        return {"log_tau": [float(v) for v in self.log_tau], "prob": [float(v) for v in self.prob],
                "gamma": self.gamma, "method": self.method, "point": self.point}

    @classmethod
    def from_dict(cls, d: dict) -> "ExtrapolationError":
        point = d.get("point")
        if point is not None:
            return cls.fixed(float(point), float(d["gamma"]), str(d["method"]))
        lt, p = tuple(float(v) for v in d["log_tau"]), tuple(float(v) for v in d["prob"])
        if not lt or len(lt) != len(p) or not all(np.isfinite(lt)) or not all(v >= 0 for v in p) or sum(p) <= 0:
            raise ValueError("an extrapolation error needs matching finite log_tau and probabilities")
        return cls(lt, p, float(d["gamma"]), str(d["method"]))

    def __eq__(self, other) -> bool:
        return (isinstance(other, ExtrapolationError) and self.to_dict() == other.to_dict())

    __hash__ = None


@dataclass(frozen=True)
class ErrorModel:
    """Corpus prior of the extrapolation error (see the module docstring for the model and its parameters)."""

    a: float
    omega: float
    gamma: float
    beta_span: float = 0.0
    beta_noise: float = 0.0
    family: dict = field(default_factory=dict)
    source: str = ""
    omega_domain: float = 0.0
    kappa: float = 1.0
    covariates: tuple = COVARIATES  # those learned (the others' slopes are 0)

    def prior(self, family: str, span: float, noise: float) -> tuple[float, float]:
        """Mean and sd of ``ln tau`` for a curve of ``family`` whose runs cover ``span`` decades with noise
        ``noise`` (ln units)."""
        span = span if np.isfinite(span) else SPAN_REF
        noise = noise if np.isfinite(noise) else NOISE_REF
        m = (self.a + self.beta_span * np.log(max(span, 1e-3) / SPAN_REF)
             + self.beta_noise * np.log(max(noise, 1e-5) / NOISE_REF))
        sd = np.hypot(self.omega, self.omega_domain)  # a new curve, from a domain the corpus may lack
        if family in self.family:
            return float(m + self.family[family]), float(sd)
        return float(m), float(np.hypot(sd, FAMILY_SD))

    def posterior(self, family: str, span: float, noise: float, errors: pd.DataFrame | None = None,
                  method: str = "") -> ExtrapolationError:
        """The extrapolation error of one fit: the prior updated with its own held-out errors.

        Parameters
        ----------
        family : str
            The law's name (families the corpus lacks get the prior's extra spread).
        span, noise : float
            Decades the fitted runs cover; the fit's noise scale (ln units).
        errors : DataFrame, optional
            The fit's own leave-future-out errors: columns ``r`` (ln y minus the predicted mean of ln y), ``s``
            (predictive sd of ln y), ``beyond`` (decades beyond the runs it was predicted from) and optionally
            ``block`` (errors of one block share one bend; :func:`bayescale.calibration.own_errors`).
        method : str
            How ``errors`` were made (recorded in the result).

        Returns
        -------
        ExtrapolationError
        """
        m, sd = self.prior(family, span, noise)
        logp = _log_prior_grid(m, sd)
        n = 0
        if errors is not None and len(errors):
            use = _usable(errors)
            n = len(use)
            if n:
                logp = logp + _own_loglik(use, self.gamma, self.kappa)
        p = np.exp(logp - logsumexp(logp))
        if n:
            how = f"corpus prior updated with {n} of its own run{'s' * (n != 1)} predicted beyond the others ({method})"
        elif errors is not None:
            how = "corpus prior only (no run of its own could be held out)"
        else:
            how = "corpus prior only"
        return ExtrapolationError(tuple(GRID), tuple(p), self.gamma, how)

    def posterior_many(self, curves: list[dict], method: str = "") -> list[ExtrapolationError]:
        """The extrapolation errors of fits of curves from one domain (a fleet: one suite of related runs), each
        prior updated with every curve's own held-out errors through the domain offset they share.

        ``ln tau_c = m_c + s_c q + omega e_c``, ``q, e_c ~ Normal(0, 1)``: ``m_c`` and the sd of ``ln tau_c``,
        ``sqrt(omega^2 + s_c^2)``, are :meth:`prior`'s, and ``q`` (the domain's offset, with a family's the corpus
        lacks) is one for the fleet, integrated over on a grid. A curve's own errors then tell about the others'
        ``tau`` as far as curves of one domain are alike (``omega`` against ``omega_domain``); with one curve the
        result is :meth:`posterior`'s, up to the grid of ``q``.

        Parameters
        ----------
        curves : list of dict
            Per curve: ``family``, ``span``, ``noise`` and ``errors`` (as for :meth:`posterior`; None when none).
        method : str
            How the errors were made (recorded in the results).

        Returns
        -------
        list of ExtrapolationError
            One per curve, in order.
        """
        own, prior = [], []  # per curve: log likelihood of its own errors on GRID; log prior on GRID per q (Q, G)
        for c in curves:
            m, sd = self.prior(c["family"], c["span"], c["noise"])
            shared = np.sqrt(max(sd**2 - self.omega**2, 0.0))
            prior.append(np.stack([_log_prior_grid(m + shared * v, self.omega) for v in OFFSETS]))
            errors = c.get("errors")
            use = _usable(errors) if errors is not None and len(errors) else errors
            n = 0 if use is None else len(use)
            own.append((_own_loglik(use, self.gamma, self.kappa) if n else np.zeros(len(GRID)), n))
        joint = [ll[None, :] + lp for (ll, _), lp in zip(own, prior)]  # (Q, G) per curve
        marginal = [logsumexp(j, axis=1) for j in joint]  # (Q,) per curve: its own errors given q
        log_w = LOG_W_OFFSETS + np.sum(marginal, axis=0)
        w = np.exp(log_w - logsumexp(log_w))
        n_all, out = sum(n for _, n in own), []
        for (_, n), j, mg in zip(own, joint, marginal):
            p = np.sum(w[:, None] * np.exp(j - mg[:, None]), axis=0)
            theirs, k = n_all - n, len(curves) - 1  # the other curves' runs, and how many curves
            how = (f"corpus prior updated with {n} of its own run{'s' * (n != 1)} and {theirs} "
                   f"run{'s' * (theirs != 1)} of the {k} other curve{'s' * (k != 1)} of its domain, each predicted "
                   f"beyond the runs before it ({method})")
            out.append(ExtrapolationError(tuple(GRID), tuple(p / p.sum()), self.gamma, how))
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ErrorModel":
        return cls(**{k: d[k] for k in ("a", "omega", "gamma", "beta_span", "beta_noise", "family", "source",
                                        "omega_domain", "kappa")}, covariates=tuple(d.get("covariates", COVARIATES)))


def learn(errors: pd.DataFrame, domain: str | None = "suite", source: str = "",
          covariates: str | tuple = "select") -> ErrorModel:
    """Learn an :class:`ErrorModel` from held-out errors of real curves.

    Parameters
    ----------
    errors : DataFrame
        One row per held-out run: ``curve`` (id), ``family`` (law name), ``r``, ``s``, ``beyond`` (as for
        :meth:`ErrorModel.posterior`), ``span`` and ``noise`` (per curve, see :meth:`ErrorModel.prior`),
        ``domain`` when given, and optionally ``kind`` (``"target"``: runs far beyond, one bend per curve;
        ``"own"``: the curve's own leave-future-out errors, one bend per ``block``, scaled by ``kappa``, which is
        learned: how the own errors relate to the errors further out).
    domain : str or None
        A column grouping curves into domains (e.g. the suite). Each domain gets its own offset of ``ln tau``,
        ``Normal(0, omega_domain^2)``, integrated out: curves of one domain are alike, and a user's curve comes from
        a domain the corpus may lack, so its prior carries ``omega_domain`` too. Each domain weighs the same in
        total, so a domain of many curves does not decide alone. None (or a single domain): the corpus is one
        domain and a new curve comes from it (``omega_domain`` = 0), as when a lab learns from its own past curves
        (:meth:`bayescale.fit.Fit.heldout_errors`).
    source : str
        What the corpus is (recorded in the model).
    covariates : "select" or tuple of str
        Which of :data:`COVARIATES` ``ln tau`` depends on. ``"select"``: the subset whose model, learned without
        one domain, best predicts that domain's target errors (mean log density per curve, every domain left out
        in turn, domains alike): a covariate that explains curves within the corpus's domains but not across them
        is dropped. Needs 3 domains or more; with fewer, all covariates.

    Returns
    -------
    ErrorModel
        The maximum marginal likelihood parameters (family offsets shrunk, sd :data:`FAMILY_SD`).
    """
    need = {"curve", "family", "r", "s", "beyond", "span", "noise"} | ({domain} if domain else set())
    missing = sorted(need - set(errors.columns))
    if missing:
        raise SettingError(f"the error corpus lacks columns {missing}; it needs {sorted(need)}")
    d = _usable(errors)
    d = d.assign(_domain="all" if domain is None else d[domain].astype(str))
    if d["curve"].nunique() < 3:
        raise SettingError(f"learning the error model needs held-out errors of at least 3 curves, got "
                           f"{d['curve'].nunique()}")
    if isinstance(covariates, str):
        if covariates != "select":
            raise SettingError(f"covariates must be 'select' or a tuple of {COVARIATES}, got {covariates!r}")
        covariates = _select_covariates(d) if d["_domain"].nunique() >= 3 else COVARIATES
    bad = sorted(set(covariates) - set(COVARIATES))
    if bad:
        raise SettingError(f"unknown covariates {bad}; choose from {COVARIATES}")
    return _learn(d, tuple(covariates), source)


def _select_covariates(d: pd.DataFrame) -> tuple:
    """The subset of :data:`COVARIATES` with the best leave-one-domain-out log density of target errors."""
    subsets = [tuple(c for c, keep in zip(COVARIATES, mask) if keep)
               for mask in itertools.product((False, True), repeat=len(COVARIATES))]
    doms = sorted(d["_domain"].unique())
    score = {c: np.mean([_log_score(_learn(d[d["_domain"] != k], c, ""), d[d["_domain"] == k]) for k in doms])
             for c in subsets}
    return max(subsets, key=lambda c: (score[c], len(c)))


def _log_score(model: ErrorModel, d: pd.DataFrame) -> float:
    """Mean over curves of ``d`` of the log density of their target errors under ``model``'s posterior given
    their own errors (what a fit of such a curve would predict)."""
    out = []
    for _, g in d.groupby("curve", sort=False):
        kind = g["kind"].to_numpy() if "kind" in g else np.full(len(g), "target")
        tgt, own = g[kind != "own"], g[kind == "own"]
        if not len(tgt):
            continue
        post = model.posterior(str(g["family"].iloc[0]), float(g["span"].iloc[0]), float(g["noise"].iloc[0]),
                               own if len(own) else None)
        ll = _loglik_grid(tgt["r"], tgt["s"], tgt["beyond"].to_numpy(float) ** model.gamma)
        out.append(logsumexp(ll + np.log(np.maximum(np.asarray(post.prob), 1e-300))))
    return float(np.mean(out))


def _learn(d: pd.DataFrame, covariates: tuple, source: str) -> ErrorModel:
    """Maximum marginal likelihood of the error model on the checked corpus ``d`` (column ``_domain``)."""
    curves = [g for _, g in d.groupby("curve", sort=True)]
    first = pd.DataFrame([g.iloc[0] for g in curves])
    fams = sorted(first["family"].astype(str).unique())
    fi = np.array([fams.index(f) for f in first["family"].astype(str)])
    use = np.array([c in covariates for c in COVARIATES], float)
    xs = np.log(np.maximum(first["span"].to_numpy(float), 1e-3) / SPAN_REF)
    xn = np.log(np.maximum(first["noise"].to_numpy(float), 1e-5) / NOISE_REF)
    doms = sorted(first["_domain"].unique())
    di = np.array([doms.index(v) for v in first["_domain"]])
    counts = np.bincount(di)
    w = len(curves) / (len(doms) * counts[di])  # each domain the same total weight
    dom_of = np.eye(len(doms))[di].T  # (D, C)
    # every bend (a curve's target runs; each block of its own errors) padded into arrays: the objective is vectorised
    bends = []
    for c, g in enumerate(curves):
        kind = g["kind"].to_numpy() if "kind" in g else np.full(len(g), "target")
        block = g["block"].to_numpy() if "block" in g else np.zeros(len(g))
        for is_own in (False, True):
            sel = (kind == "own") == is_own
            for blk in np.unique(block[sel]) if is_own else [None]:
                part = g[sel & (block == blk)] if is_own else g[sel]
                if len(part):
                    bends.append((c, is_own, part["r"].to_numpy(float), part["s"].to_numpy(float),
                                  np.log(np.maximum(part["beyond"].to_numpy(float), 1e-12))))
    width = max(len(b[2]) for b in bends)
    pad = lambda i: np.array([np.pad(b[i], (0, width - len(b[i]))) for b in bends])  # noqa: E731
    r_, lb_ = pad(2), pad(4)
    mask = np.array([np.arange(width) < len(b[2]) for b in bends], float)
    inv_s2 = mask / np.maximum(pad(3), 1e-8) ** 2
    const = np.array([len(b[2]) * np.log(2 * np.pi) + np.sum(np.log(np.maximum(b[3], 1e-8) ** 2)) for b in bends])
    rr = np.sum(r_**2 * inv_s2, axis=1)
    is_own_ = np.array([b[1] for b in bends])
    to_curve = np.zeros((len(curves), len(bends)))
    to_curve[[b[0] for b in bends], np.arange(len(bends))] = 1.0

    one = len(doms) == 1  # one domain: a new curve is taken to come from it, so no spread between domains
    arrays = {"fi": fi, "xs": xs, "xn": xn, "w": w, "dom_of": dom_of, "is_own": is_own_, "lb": lb_, "inv_s2": inv_s2,
              "r": r_, "const": const, "rr": rr, "to_curve": to_curve, "use": use}
    value_and_grad = _objective_and_grad()

    def fun(th):
        v, g = value_and_grad(np.asarray(th, float), arrays, one)
        return float(v), np.asarray(g, float)

    th0 = np.concatenate([[np.log(0.05), np.log(0.3), 0.0, 0.0, 0.0, np.log(0.3), 0.0], np.zeros(len(fams))])
    res = minimize(fun, th0, jac=True, method="L-BFGS-B")
    a, om, gam, bs_, bn, om_d, kappa, off = (np.asarray(v, float) for v in _unpack(res.x, use, one, np))
    return ErrorModel(float(a), float(om), float(gam), float(bs_), float(bn),
                      {f: float(o) for f, o in zip(fams, off)}, source, float(om_d), float(kappa), tuple(covariates))


def _unpack(th, use, one: bool, xp):
    """The error model's parameters from the unconstrained vector ``th`` the learning optimises."""
    return (th[0], OMEGA_MIN + xp.exp(th[1]), 0.25 + 2.25 / (1 + xp.exp(-th[2])), th[3] * use[0], th[4] * use[1],
            0.0 if one else xp.exp(th[5]), xp.exp(th[6]), th[7:])


@functools.cache
def _objective_and_grad():
    """The negative log marginal likelihood of :func:`_learn` and its gradient, compiled once per shape of the
    corpus (its arrays are inputs, so the covariate subsets and left-out domains of :func:`_select_covariates` that
    share a shape share the program)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.special import logsumexp as jlse

    def objective(th, d, one):
        a, om, gam, bs_, bn, om_d, kappa, off = _unpack(th, d["use"], one, jnp)
        m = a + off[d["fi"]] + bs_ * d["xs"] + bn * d["xn"]
        u = jnp.exp(gam * d["lb"]) * jnp.where(d["is_own"], kappa, 1.0)[:, None]  # (bends, width): _loglik_grid
        ua = jnp.sum(u**2 * d["inv_s2"], axis=1)[:, None]
        ub = jnp.sum(u * d["r"] * d["inv_s2"], axis=1)[:, None]
        ll = d["to_curve"] @ _rank_one(d["const"][:, None], d["rr"][:, None], ua, ub, np.exp(2 * GRID)[None, :],
                                       xp=jnp)  # (C, G)
        mean = m[:, None, None] + om_d * OFFSETS[None, :, None]  # (C, Q, 1)
        lp = -0.5 * ((GRID[None, None, :] - mean) / om) ** 2
        lp = lp - jlse(lp, axis=2, keepdims=True)
        per = jlse(ll[:, None, :] + lp, axis=2) * d["w"][:, None]  # (C, Q): each curve given the domain offset
        total = jnp.sum(jlse(LOG_W_OFFSETS[None, :] + d["dom_of"] @ per, axis=1))
        # shrinkage of the family offsets and weak priors keep the slopes and the domain spread from chasing few
        # domains: Normal(0, 1) slopes; a Rayleigh(1) domain sd, zero at 0, since with a handful of domains the
        # maximum likelihood of a spread between them often sits at 0, which would make a new domain's tau certain
        # (a boundary-avoiding prior: Chung et al. 2013, Psychometrika 78:685)
        spread = 0.0 if one else 0.5 * om_d**2 - jnp.log(om_d)
        return (-total + 0.5 * jnp.sum((off / FAMILY_SD) ** 2) + 0.5 * (bs_**2 + bn**2) + spread
                + 0.5 * jnp.log(kappa) ** 2)

    return jax.jit(jax.value_and_grad(objective), static_argnums=2)


def noise_level(likelihood: str, y, sigma, df: float = 4.0) -> float:
    """A fit's typical noise in ln units: the median over runs ``y`` and draws ``sigma`` of
    :func:`bayescale.noise.log_sd` (the error model's ``noise``)."""
    y, sigma = np.asarray(y, float).reshape(1, -1), np.asarray(sigma, float).reshape(-1, 1)
    return float(np.median(log_sd(likelihood, y, sigma, df)))


def check_error(error):
    """``error`` as a fit keeps it: ``"default"`` (the shipped corpus prior, loaded when first used), an
    :class:`ErrorModel`, or None (``"raw"``/``"none"`` too: no extrapolation error); else a clear error."""
    if error is None or isinstance(error, ErrorModel):
        return error
    if isinstance(error, str) and error.lower() in ("default", "raw", "none"):
        return "default" if error.lower() == "default" else None
    raise SettingError(f"error must be 'default' (the corpus-learned extrapolation error), an ErrorModel, or "
                       f"'raw'/None (the raw posterior), got {error!r}")


# the shipped error models, by the likelihood of the fits they were learned on (files beside this module)
SHIPPED = {"lognormal": "error_model_lognormal.json", "logstudentt": "error_model_logstudentt.json"}
# a likelihood without its own takes that of its kind, heavy-tailed (robust) or not; any other (a user's PyMC
# model, whose noise is unknown here) the lognormal fits'
SHIPPED_KIN = {"normal": "lognormal", "studentt": "logstudentt", "beta": "lognormal"}


def default_error_model(likelihood: str = DEFAULT_LIKELIHOOD) -> ErrorModel:
    """The error model shipped with the package for fits of ``likelihood`` (learned on the held-out errors of such
    fits; :data:`SHIPPED` names the files; a likelihood without its own takes that of its kind,
    :data:`SHIPPED_KIN`: ``"beta"`` the lognormal fits', ``"studentt"`` the robust fits'; a PyMC model's the
    lognormal fits'). Its ``source`` says what it was learned on and by which command."""
    name = SHIPPED.get(likelihood) or SHIPPED[SHIPPED_KIN.get(likelihood, "lognormal")]
    with resources.files("bayescale").joinpath(name).open() as fh:
        return ErrorModel.from_dict(json.load(fh))
