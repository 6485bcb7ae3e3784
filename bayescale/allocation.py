"""Compute-optimal allocation: the posterior of N*(C), D*(C) and L*(C), solved per posterior draw.

For a law in model size ``N`` and tokens ``D`` (chinchilla, kaplan, or any registered law with inputs named ``N``
and ``D``), every posterior draw is a loss surface L(N, D). At a compute budget C the best split minimises L under
the cost constraint ``cost(N, D) = C`` (``6 N D`` by default). :func:`compute_optimal` solves that per draw, so the
answer carries the fit's uncertainty (and, for a :class:`~bayescale.ModelAverage`, the uncertainty about the law):

- Chinchilla with the default cost has a closed form, N* = G (C/6)^(beta/(alpha+beta)) with
  G = (alpha A / (beta B))^(1/(alpha+beta)), D* = C / (6 N*);
- otherwise a vectorised search over ln N on a wide grid, refined on a fine grid and by parabolic interpolation.

:class:`PosteriorDraws` (also used by :mod:`bayescale.next_runs` and :mod:`bayescale.report`) flattens a fit or a
model average into draws that evaluate the mean curve, the noise model and its log density anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xarray as xr
from scipy import stats

from bayescale.errors import BayescaleError
from bayescale.laws import Law, get_law

__all__ = ["PosteriorDraws", "compute_optimal", "default_cost", "law_draws", "plot_frontier", "posterior_draws"]

DEFAULT_ALLOC_LEVELS = (0.8, 0.95)


def default_cost(N, D):
    """Training compute in FLOP, C = 6 N D."""
    return 6.0 * np.asarray(N, float) * np.asarray(D, float)


# --------------------------------------------------------------------------------------------------
# Posterior draws of any fit-like object


@dataclass
class _Component:
    law: Law
    params: dict          # name -> (S_i,) in the law's centred parametrisation, plus "sigma"
    center: dict          # input name -> centre (ln x0 for log inputs)
    likelihood: str = "lognormal"
    df: float = 4.0

    @property
    def size(self) -> int:
        return len(next(iter(self.params.values())))

    def mean(self, values: dict, paired: bool = False) -> np.ndarray:
        """Mean curve (S_i, ...) at inputs ``values`` (name -> array): every draw at every point, or with ``paired``
        the inputs carry a leading draw axis (S_i, ...) and draw s is evaluated at its own points only."""
        from bayescale.fit import _mean_jit

        t = {}
        for inp in self.law.inputs:
            v = np.asarray(values[inp.name], float)
            t[inp.name] = (np.log(v) if inp.scale == "log" else v) - self.center[inp.name]
        shape = np.broadcast_shapes(*(a.shape for a in t.values()))
        if paired:
            extra = len(shape) - 1
            t = {k: np.broadcast_to(v, shape) for k, v in t.items()}
        else:
            extra = len(shape)
            t = {k: np.broadcast_to(v, shape)[None] for k, v in t.items()}
        p = {k: np.asarray(v).reshape(v.shape + (1,) * extra) for k, v in self.params.items() if k != "sigma"}
        return np.asarray(_mean_jit(self.law, p, t))


@dataclass
class PosteriorDraws:
    """Flattened posterior draws of a fit or a model average (a mixture of per-law components).

    ``mean(frame)`` -> (S, P) mean curve, ``sample(frame, rng)`` -> (S, P) new runs, ``logpdf(y, frame)`` ->
    (S, P) log density of observed y under each draw's noise model. Build with :func:`posterior_draws`.
    """

    components: list = field(default_factory=list)
    source: str = ""

    @property
    def size(self) -> int:
        return sum(c.size for c in self.components)

    @property
    def law_names(self) -> list[str]:
        return [c.law.name for c in self.components]

    @property
    def input_names(self) -> tuple:
        return self.components[0].law.input_names

    @property
    def sigma(self) -> np.ndarray:
        return np.concatenate([np.asarray(c.params["sigma"], float) for c in self.components])

    def _values(self, at) -> dict:
        if isinstance(at, dict):
            return {k: np.asarray(v, float) for k, v in at.items()}
        return {k: at[k].to_numpy(float) for k in self.input_names}

    def mean(self, at) -> np.ndarray:
        vals = self._values(at)
        return np.concatenate([c.mean(vals) for c in self.components], axis=0)

    def sample(self, at, rng: np.random.Generator, mu: np.ndarray | None = None) -> np.ndarray:
        """A new observed run at ``at`` per draw (noise model of each component)."""
        mu = self.mean(at) if mu is None else mu
        out, start = np.empty_like(mu), 0
        for c in self.components:
            sl = slice(start, start + c.size)
            out[sl] = _noise_sample(c.likelihood, mu[sl], np.asarray(c.params["sigma"])[:, None], c.df, rng)
            start += c.size
        return out

    def sample_draws(self, idx, mu: np.ndarray, rng: np.random.Generator, extra=None) -> np.ndarray:
        """New runs for the draws ``idx`` (R,) given their mean curve ``mu`` (R, P); ``extra`` (P,): an error of
        each point on top of the noise, relative (ln units), added in quadrature."""
        idx = np.asarray(idx, int)
        out, start = np.empty_like(mu), 0
        for c in self.components:
            sel = (idx >= start) & (idx < start + c.size)
            if sel.any():
                sig = _with_extra(c.likelihood, np.asarray(c.params["sigma"], float)[idx[sel] - start][:, None],
                                  mu[sel], extra)
                out[sel] = _noise_sample(c.likelihood, mu[sel], sig, c.df, rng)
            start += c.size
        return out

    def logpdf(self, y, mu: np.ndarray, extra=None) -> np.ndarray:
        """log p(y | draw) given the draws' mean ``mu`` (S, P); ``y`` broadcasts against ``mu``; ``extra`` as in
        :meth:`sample_draws`."""
        out, start = np.empty(np.broadcast_shapes(np.shape(y), mu.shape)), 0
        for c in self.components:
            sl = slice(start, start + c.size)
            sig = np.asarray(c.params["sigma"], float).reshape((-1,) + (1,) * (mu.ndim - 1))
            sig = _with_extra(c.likelihood, sig, mu[sl], extra)
            yy = y[sl] if np.ndim(y) == mu.ndim and np.shape(y)[0] == mu.shape[0] else y
            out[sl] = _noise_logpdf(c.likelihood, yy, mu[sl], sig, c.df)
            start += c.size
        return out


def _with_extra(likelihood, sigma, mu, extra):
    """Noise scale with a relative extra error (ln units) in quadrature; y units for normal/Student-t noise."""
    if extra is None:
        return sigma
    extra = np.asarray(extra, float)
    if likelihood == "lognormal":
        return np.sqrt(sigma**2 + extra**2)
    return np.sqrt(sigma**2 + (extra * mu) ** 2)


def _noise_sample(likelihood, mu, sigma, df, rng):
    z = rng.standard_normal(mu.shape) if likelihood != "studentt" else rng.standard_t(df, mu.shape)
    if likelihood == "lognormal":
        return np.maximum(mu, 1e-300) * np.exp(sigma * z)
    return mu + sigma * z


def _noise_logpdf(likelihood, y, mu, sigma, df):
    if likelihood == "lognormal":
        ly = np.log(np.maximum(y, 1e-300))
        return stats.norm.logpdf(ly, np.log(np.maximum(mu, 1e-300)), sigma) - ly
    if likelihood == "normal":
        return stats.norm.logpdf(y, mu, sigma)
    return stats.t.logpdf(y, df, mu, sigma)


def posterior_draws(model, max_draws: int | None = 2000, seed: int = 0) -> PosteriorDraws:
    """Flatten a :class:`~bayescale.Fit`, a :class:`~bayescale.ModelAverage` (draws per law in proportion to its
    weight) or a :class:`PosteriorDraws` (returned as is) into :class:`PosteriorDraws`."""
    from bayescale.compare import ModelAverage
    from bayescale.fit import Fit

    if isinstance(model, PosteriorDraws):
        return model
    if isinstance(model, Fit):
        p = model.draws(max_draws)
        return PosteriorDraws([_Component(model.law, p, dict(model.scales.center), model.likelihood, model.df)],
                              source=model.law.name)
    if isinstance(model, ModelAverage):
        rng = np.random.default_rng(seed)
        names = [n for n in model.fits if model.weights[n] > 0]
        w = np.array([model.weights[n] for n in names], float)
        total = max_draws or 4000
        counts = rng.multinomial(total, w / w.sum())
        comps = []
        for n, cnt in zip(names, counts):
            if cnt == 0:
                continue
            f = model.fits[n]
            p = f.draws(None)
            idx = rng.choice(len(p["sigma"]), size=cnt, replace=cnt > len(p["sigma"]))
            comps.append(_Component(f.law, {k: v[idx] for k, v in p.items()}, dict(f.scales.center), f.likelihood, f.df))
        return PosteriorDraws(comps, source="average(" + ",".join(names) + ")")
    raise TypeError(f"expected a bayescale Fit, ModelAverage or PosteriorDraws, got {type(model).__name__}")


def law_draws(law, params: dict, sigma=0.0, center: dict | None = None, likelihood: str = "lognormal") -> PosteriorDraws:
    """Draws of ``law`` at given parameter values (arrays or scalars) in its centred parametrisation.

    With ``center=None`` every input is centred at 1 (ln x0 = 0), so the centred parameters equal the published
    ones up to logs: for chinchilla ``a = ln A``, ``b = ln B``. Useful for checks against known laws.
    """
    law = get_law(law)
    arrs = {k: np.atleast_1d(np.asarray(v, float)) for k, v in params.items()}
    n = max(len(v) for v in arrs.values())
    arrs = {k: np.broadcast_to(v, (n,)).copy() for k, v in arrs.items()}
    missing = [p for p in law.param_names if p not in arrs]
    if missing:
        raise BayescaleError(f"law {law.name!r} needs parameters {list(law.param_names)}; missing {missing}")
    arrs["sigma"] = np.broadcast_to(np.asarray(sigma, float), (n,)).copy()
    center = {i.name: 0.0 for i in law.inputs} if center is None else dict(center)
    return PosteriorDraws([_Component(law, arrs, center, likelihood)], source=law.name)


# --------------------------------------------------------------------------------------------------
# The optimiser


def _check_nd(draws: PosteriorDraws) -> None:
    for c in draws.components:
        if set(c.law.input_names) != {"N", "D"}:
            raise BayescaleError(
                f"compute-optimal allocation needs a law in model size N and tokens D; law {c.law.name!r} has inputs "
                f"{list(c.law.input_names)}. Fit 'chinchilla' or 'kaplan' (or register a law with inputs named N and D)."
            )


def _check_budgets(budgets) -> np.ndarray:
    b = np.atleast_1d(np.asarray(budgets, dtype=float))
    if b.ndim != 1 or b.size == 0:
        raise BayescaleError("budgets must be one number or a 1-D list of compute budgets (e.g. [1e22, 1e23])")
    if not np.all(np.isfinite(b)) or np.any(b <= 0):
        raise BayescaleError(f"budgets must be positive finite numbers (FLOP, or your cost's units); got {b.tolist()}")
    return b


def _tokens_for(cost, n, budget):
    """D with cost(N, D) = budget, elementwise; ``cost`` must increase with D. Bisection on ln D."""
    if cost is None:
        return budget / (6.0 * n)
    lo = np.full(np.broadcast_shapes(np.shape(n), np.shape(budget)), -30.0)
    hi = np.full_like(lo, 120.0)
    nb, bb = np.broadcast_to(n, lo.shape), np.broadcast_to(budget, lo.shape)
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        over = np.asarray(cost(nb, np.exp(mid)), float) > bb
        hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
    return np.exp(0.5 * (lo + hi))


def _numeric_optimum(comp: _Component, budgets: np.ndarray, cost, span: float = 14.0, step: float = 0.1):
    """Per draw and budget: ln N* minimising L(N, D(N)); returns (N*, D*, L*, at_edge), each (S, B)."""
    S = comp.size
    # coarse grid over ln N, centred at the ln N where N = D under 6ND, +- span (e^14 ~ 1.2e6 either way)
    base = 0.5 * np.log(budgets / 6.0)                                   # (B,)
    grid = np.arange(-span, span + step / 2, step)                       # (G,)
    u = base[:, None] + grid[None, :]                                    # (B, G)
    n = np.exp(u)
    d = _tokens_for(cost, n, budgets[:, None])
    L = comp.mean({"N": n, "D": d})                                      # (S, B, G)
    L = np.where(np.isfinite(L), L, np.inf)
    k = np.argmin(L, axis=-1)                                            # (S, B)
    at_edge = (k == 0) | (k == len(grid) - 1)
    u0 = np.take_along_axis(np.broadcast_to(u, (S,) + u.shape), k[..., None], -1)[..., 0]
    # fine grid +- one coarse step around the best point, then a parabola through the best three
    fine = np.linspace(-step, step, 41)
    uf = u0[..., None] + fine                                            # (S, B, F)
    nf = np.exp(uf)
    df_ = _tokens_for(cost, nf, budgets[None, :, None])
    Lf = comp.mean({"N": nf, "D": df_}, paired=True)                    # (S, B, F)
    Lf = np.where(np.isfinite(Lf), Lf, np.inf)
    j = np.clip(np.argmin(Lf, axis=-1), 1, len(fine) - 2)
    y0, y1, y2 = (np.take_along_axis(Lf, (j + o)[..., None], -1)[..., 0] for o in (-1, 0, 1))
    h = fine[1] - fine[0]
    denom = y0 - 2 * y1 + y2
    shift = np.where(np.abs(denom) > 0, 0.5 * h * (y0 - y2) / np.where(denom == 0, 1, denom), 0.0)
    shift = np.clip(shift, -h, h)
    u_best = np.take_along_axis(uf, j[..., None], -1)[..., 0] + shift
    n_best = np.exp(u_best)
    d_best = _tokens_for(cost, n_best, budgets[None, :])
    l_best = comp.mean({"N": n_best, "D": d_best}, paired=True)
    return n_best, d_best, l_best, at_edge


def _chinchilla_closed_form(comp: _Component, budgets: np.ndarray):
    nat = comp.law.natural_params({k: np.asarray(v) for k, v in comp.params.items() if k != "sigma"},
                                  _CenterOnly(comp.center))
    A, B = np.asarray(nat["A"], float)[:, None], np.asarray(nat["B"], float)[:, None]
    al, be = np.asarray(nat["alpha"], float)[:, None], np.asarray(nat["beta"], float)[:, None]
    G = (al * A / (be * B)) ** (1.0 / (al + be))
    n = G * (budgets[None, :] / 6.0) ** (be / (al + be))
    d = budgets[None, :] / (6.0 * n)
    L = comp.mean({"N": n, "D": d}, paired=True)
    return n, d, L


class _CenterOnly:
    """Stands in for :class:`~bayescale.laws.Scales` where ``natural`` reads only the centres."""

    def __init__(self, center):
        self.center = center


def compute_optimal(model, budgets, cost=None, *, levels=DEFAULT_ALLOC_LEVELS, max_draws: int | None = 2000,
                    keep_draws: bool = False, method: str = "auto", seed: int = 0) -> xr.Dataset:
    """Posterior of the compute-optimal model size N*, tokens D* and loss L* at each budget.

    ``model``: a :class:`~bayescale.Fit` or :class:`~bayescale.ModelAverage` of laws in N and D (or
    :class:`PosteriorDraws`). ``budgets``: compute budgets C (FLOP when ``cost`` is the default 6ND).
    ``cost(N, D)``: a vectorised function returning the cost, increasing in D. ``method``: ``"auto"`` (closed form
    for chinchilla under 6ND, numeric otherwise), ``"closed"`` or ``"numeric"``.

    Returns an xarray Dataset with dims ``budget`` and ``level``: ``N_opt``, ``D_opt``, ``L_opt`` and
    ``tokens_per_param`` as ``*_median``, ``*_mean``, ``*_lower``/``*_upper`` (central intervals per level);
    ``at_edge`` (fraction of draws whose optimum hit the search range, numeric method); with ``keep_draws`` also the
    draws (dims ``draw``, ``budget``). ``L_opt`` is the law's mean loss (the curve, without run-to-run noise).
    """
    if method not in ("auto", "closed", "numeric"):
        raise BayescaleError(f"method must be 'auto', 'closed' or 'numeric', got {method!r}")
    if cost is not None and not callable(cost):
        raise BayescaleError("cost must be a function cost(N, D) -> compute (vectorised, increasing in D), or None for 6ND")
    budgets = _check_budgets(budgets)
    levels = sorted(float(v) for v in np.atleast_1d(levels))
    if any(not 0 < v < 1 for v in levels):
        raise BayescaleError(f"levels must lie strictly between 0 and 1, got {levels}")
    draws = posterior_draws(model, max_draws=max_draws, seed=seed)
    _check_nd(draws)
    ns, ds, ls, edges, used = [], [], [], [], set()
    for comp in draws.components:
        closed = comp.law.name == "chinchilla" and cost is None
        if method == "closed" and not closed:
            raise BayescaleError(f"no closed form for law {comp.law.name!r}"
                                 f"{' with a custom cost' if cost is not None else ''}; use method='numeric' or 'auto'")
        if closed and method != "numeric":
            n, d, L = _chinchilla_closed_form(comp, budgets)
            e = np.zeros_like(n, bool)
            used.add("closed")
        else:
            n, d, L, e = _numeric_optimum(comp, budgets, cost)
            used.add("numeric")
        ns.append(n), ds.append(d), ls.append(L), edges.append(e)
    n, d, L, e = (np.concatenate(a, axis=0) for a in (ns, ds, ls, edges))
    qlo, qhi = [(1 - v) / 2 for v in levels], [(1 + v) / 2 for v in levels]
    ds_ = xr.Dataset(coords={"budget": budgets, "level": levels})
    for name, arr in (("N_opt", n), ("D_opt", d), ("L_opt", L), ("tokens_per_param", d / n)):
        ds_[f"{name}_median"] = ("budget", np.median(arr, axis=0))
        ds_[f"{name}_mean"] = ("budget", arr.mean(axis=0))
        ds_[f"{name}_lower"] = (("level", "budget"), np.quantile(arr, qlo, axis=0))
        ds_[f"{name}_upper"] = (("level", "budget"), np.quantile(arr, qhi, axis=0))
        if keep_draws:
            ds_[f"{name}_draws"] = (("draw", "budget"), arr)
    ds_["at_edge"] = ("budget", e.mean(axis=0))
    ds_.attrs.update(laws=",".join(draws.law_names), source=draws.source, method="+".join(sorted(used)),
                     cost="6ND" if cost is None else getattr(cost, "__name__", "custom"), n_draws=int(n.shape[0]))
    return ds_


def plot_frontier(opt: xr.Dataset, ax=None, path=None, levels=None, show=("N", "D"), data=None):
    """The compute-optimal frontier: median N*(C) and D*(C) with shaded central intervals on log axes.

    ``opt`` is :func:`compute_optimal`'s Dataset; ``levels`` picks which of its levels to shade (default all);
    ``data`` (a run table with N and D columns) adds the fitted runs at their compute 6ND. Returns the Axes.
    """
    from bayescale.plots import _axes, _finish

    ax = _axes(ax)
    c = opt["budget"].values
    levels = sorted(opt["level"].values.tolist(), reverse=True) if levels is None else sorted(levels, reverse=True)
    unknown = [v for v in levels if not np.isclose(opt["level"].values, v).any()]
    if unknown:
        raise BayescaleError(f"levels {unknown} are not in the result (it has {opt['level'].values.tolist()}); "
                             "pass them to compute_optimal(levels=...)")
    names = {"N": ("N_opt", "C0", "N* (parameters)"), "D": ("D_opt", "C1", "D* (tokens)"),
             "L": ("L_opt", "C2", "L* (loss)")}
    for key in show:
        if key not in names:
            raise BayescaleError(f"show= takes 'N', 'D' and/or 'L', got {key!r}")
        var, color, label = names[key]
        for i, lv in enumerate(levels):
            sel = opt.sel(level=lv, method="nearest")
            ax.fill_between(c, sel[f"{var}_lower"].values, sel[f"{var}_upper"].values, color=color,
                            alpha=0.15 + 0.2 * i / max(len(levels) - 1, 1), lw=0, label=f"{label}: {lv:.0%} interval")
        ax.plot(c, opt[f"{var}_median"].values, color=color, lw=1.8, label=f"{label}: median")
    if data is not None:
        ax.plot(6 * data["N"] * data["D"], data["N"], ".", color="C0", ms=3, alpha=0.5, label="fitted runs (N)")
        ax.plot(6 * data["N"] * data["D"], data["D"], ".", color="C1", ms=3, alpha=0.5, label="fitted runs (D)")
    ax.set_title(f"compute-optimal allocation ({opt.attrs.get('source', '')}, cost {opt.attrs.get('cost', '')})",
                 fontsize=9)
    return _finish(ax, path, "compute budget C", "N*, D*" if "L" not in show else "optimum", True)
