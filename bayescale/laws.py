"""Scaling-law families: one declarative registry.

Every family is a :class:`Law`: a name, the formula, its inputs, its parameters (each with a prior whose
support is the constraint), the range of y it can produce, the fewest distinct points it needs, and a JAX mean
function. Registering one (:func:`register_law`) is all it takes for fitting, bands, comparison, the CLI and the
family test table to pick it up.

Parametrisation. Inputs are centred before they reach the mean function: a ``log`` input arrives as
``t = ln(x / x0)`` and a ``linear`` one as ``t = x - x0``, where ``x0`` is the geometric (log) or arithmetic
(linear) mean of the fitted runs. Each power-law term is parametrised by its log value at that centre,
``A / x^alpha = exp(a - alpha * t)`` with ``a = ln(A) - alpha * ln(x0)``, which removes the strong ``A``-``alpha``
correlation that makes NUTS crawl on raw scaling laws. Priors are weakly informative and scaled by the data
(``Scales``): "the reducible loss at the centre of your runs is within a factor of a few of the observed loss".
:meth:`Law.natural` maps a posterior back to the published form (``A``, ``alpha``, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

from bayescale.errors import UnknownLawError
from bayescale.noise import Beta

__all__ = ["FLOP_PER_PARAM_TOKEN", "Input", "Law", "Param", "Scales", "bnsl_law", "external_law", "get_law",
           "is_builtin", "list_laws", "register_law", "LAWS"]

FLOP_PER_PARAM_TOKEN = 6.0  # training compute C = 6 N D FLOP (forward and backward pass; Kaplan et al. 2020)


class Scales(NamedTuple):
    """Data scales the priors and the centring use (a JAX pytree, so batches of curves vmap over it).

    ``center``, ``lo`` and ``hi`` map each input name to its centre ``x0`` and to the smallest/largest
    centred value ``t`` in the fitted runs (natural-log units for log inputs). ``joint_lo``/``joint_hi``: for a law
    of several log inputs, the smallest/largest mean of their centred ``t`` over the runs (the log of their geometric
    mean: for N and D, half the log of the compute 6ND); NaN otherwise.
    """

    y_min: Any
    y_max: Any
    y_med: Any
    center: dict
    lo: dict
    hi: dict
    joint_lo: Any = float("nan")
    joint_hi: Any = float("nan")

    def width(self, name: str):
        """Span of input ``name`` in centred units (at least 1, so priors stay proper with one x)."""
        return jnp.maximum(self.hi[name] - self.lo[name], 1.0)


@dataclass(frozen=True)
class Input:
    """An input of a law: ``scale`` is ``"log"`` (sizes, must be > 0) or ``"linear"``."""

    name: str
    description: str = ""
    scale: str = "log"


@dataclass(frozen=True)
class Param:
    """A parameter: ``prior(scales)`` returns a NumPyro distribution; its support is the constraint."""

    name: str
    prior: Callable[[Scales], dist.Distribution]
    description: str = ""


@dataclass(frozen=True)
class Law:
    """A scaling-law family.

    ``mean(p, t)`` maps parameters ``p`` (dict name -> array) and centred inputs ``t`` (dict name -> array)
    to the expected y. ``natural(p, scales)`` returns the parameters in their published form. ``target_accept`` is
    the NUTS target acceptance rate the family's fits use unless the caller gives one (curved posteriors need a
    higher rate, hence smaller steps, to avoid divergences; ``benchmarks/init.py`` measures it).
    ``optimum(nat, budgets)``, for laws in N and D: the compute-optimal model size N* under C = 6ND in closed
    form, from the published-form parameters ``nat`` (each (S, 1)) and ``budgets`` (1, B); None: solved
    numerically (:func:`bayescale.compute_optimal`). ``toward``: where the law is used to predict, ``"max"``
    (larger inputs than the runs', the default) or ``"min"`` (smaller, e.g. lower loss for a loss -> error link);
    leave-future-out holds out the runs furthest that way.
    """

    name: str
    formula: str
    inputs: tuple[Input, ...]
    params: tuple[Param, ...]
    mean: Callable[[dict, dict], jax.Array]
    description: str = ""
    y_range: tuple[float, float] = (0.0, math.inf)
    min_points: int | None = None
    natural: Callable[[dict, Scales], dict] | None = None
    reference: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)
    target_accept: float = 0.9
    optimum: Callable | None = None
    toward: str = "max"

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def needs_points(self) -> int:
        """Fewest distinct points: one more than the law's parameters (the noise scale is the extra one)."""
        return self.min_points if self.min_points is not None else len(self.params) + 1

    def natural_params(self, p: dict, scales: Scales) -> dict:
        return self.natural(p, scales) if self.natural is not None else {}


LAWS: dict[str, Law] = {}


def external_law(name: str, formula: str, inputs: tuple[Input, ...], param_names=(), description: str = "",
                 min_points: int | None = None) -> Law:
    """A law whose mean curve and priors live outside bayescale (a PyMC model, :func:`bayescale.fit_pymc`; the
    PFN, :mod:`bayescale.pfn`): it names the inputs and parameters, and the fewest distinct points, that reading
    runs and reporting on them need; asking it for a mean or a prior is an error. Not registered."""

    def outside(*_):
        raise NotImplementedError(f"law {name!r} is computed outside bayescale ({formula}): its draws come from "
                                  "the fit that made it")

    return Law(name=name, formula=formula, inputs=tuple(inputs), params=tuple(Param(n, outside) for n in param_names),
               mean=outside, y_range=(-math.inf, math.inf), description=description, min_points=min_points)


def register_law(law: Law, *, overwrite: bool = False) -> Law:
    """Add ``law`` to the registry; everything else (fit, bands, CLI, comparison) then works with it."""
    if not isinstance(law, Law):
        raise TypeError(f"register_law expects a bayescale.Law, got {type(law).__name__}")
    key = law.name.lower()
    if key in LAWS and not overwrite:
        raise ValueError(f"a law named {law.name!r} is already registered; pass overwrite=True to replace it")
    names = [p.name for p in law.params]
    if len(set(names)) != len(names) or "sigma" in names:
        raise ValueError(f"law {law.name!r}: parameter names must be unique and not 'sigma' (the noise scale)")
    for inp in law.inputs:
        if inp.scale not in ("log", "linear"):
            raise ValueError(f"law {law.name!r}: input {inp.name!r} has scale {inp.scale!r}; use 'log' or 'linear'")
    LAWS[key] = law
    return law


def get_law(law: str | Law) -> Law:
    """Look a law up by name (case-insensitive); a :class:`Law` passes through."""
    if isinstance(law, Law):
        return law
    try:
        return LAWS[str(law).lower()]
    except KeyError:
        raise UnknownLawError(
            f"unknown law {law!r}. Registered laws: {', '.join(v.name for _, v in sorted(LAWS.items()))}. "
            "Run `bayescale laws` to list them, or register your own with bayescale.register_law(...)."
        ) from None


def list_laws() -> list[Law]:
    return [LAWS[k] for k in sorted(LAWS)]


# --------------------------------------------------------------------------------------------------
# Shared priors (all in centred units; see the module docstring)


def _exponent(median: float = 0.3, spread: float = 0.8):
    """Scaling exponent > 0: log-normal, 90% of the mass within median x/ exp(1.645 * spread)."""
    return lambda s: dist.LogNormal(math.log(median), spread)


def _floor(s: Scales):
    """Irreducible value E: anywhere between 0 and the smallest observed y."""
    return dist.Uniform(0.0, s.y_min)


def _log_term(s: Scales):
    """Log of a reducible term at the data centre: within a factor ~e^3 of the typical observed y."""
    return dist.Normal(jnp.log(s.y_med) - 1.0, 1.5)


def _log_level(s: Scales):
    """Log of y itself at the data centre."""
    return dist.Normal(jnp.log(s.y_med), 1.0)


class _Above(dist.TransformedDistribution):
    """``low + X`` for a positive ``X``, with support ``(low, inf)`` (a plain affine shift would report the reals)."""

    def __init__(self, base, low):
        self._low = low
        super().__init__(base, dist.transforms.AffineTransform(low, 1.0))

    @property
    def support(self):
        return dist.constraints.greater_than(self._low)


def _term(a, slope, t):
    """exp(a - slope * t): a power law in x written around the data centre."""
    return jnp.exp(a - slope * t)


def _coef(a, slope, center):
    """Published coefficient of exp(a - slope * ln(x / x0)) = A * x^-slope, i.e. A = exp(a + slope * ln x0)."""
    return jnp.exp(a + slope * center)


# --------------------------------------------------------------------------------------------------
# One-input families of Alabdulmohsin et al. 2022, "Revisiting neural scaling laws in language and vision"

_X = (Input("x", "training data size (examples or tokens), model size or compute"),)
_REVISITING = "Alabdulmohsin, Neyshabur & Zhai 2022, 'Revisiting neural scaling laws in language and vision'"

register_law(Law(
    name="M1",
    formula="y = beta * x^(-c)",
    inputs=_X,
    params=(
        Param("a", _log_level, "ln y at the centre of the data, ln(beta) - c ln x0"),
        Param("c", _exponent(), "scaling exponent (> 0)"),
    ),
    mean=lambda p, t: _term(p["a"], p["c"], t["x"]),
    natural=lambda p, s: {"beta": _coef(p["a"], p["c"], s.center["x"]), "c": p["c"]},
    description="Pure power law, no irreducible term.",
    reference=_REVISITING,
))

register_law(Law(
    name="M2",
    formula="y = beta * x^(-c) + eps_inf",
    inputs=_X,
    params=(
        Param("eps_inf", _floor, "irreducible y as x -> infinity, in [0, min y)"),
        Param("a", _log_term, "ln of the reducible term at the data centre"),
        Param("c", _exponent(), "scaling exponent (> 0)"),
    ),
    mean=lambda p, t: p["eps_inf"] + _term(p["a"], p["c"], t["x"]),
    natural=lambda p, s: {"beta": _coef(p["a"], p["c"], s.center["x"]), "c": p["c"], "eps_inf": p["eps_inf"]},
    description="Power law plus an irreducible floor.",
    reference=_REVISITING,
))


def _m3_mean(p, t):
    # beta (1/x + gamma)^c = beta x0^-c (e^-t + g)^c with g = gamma x0; log g is the parameter.
    return jnp.exp(p["a"] + p["c"] * jnp.logaddexp(-t["x"], p["log_g"]))


register_law(Law(
    name="M3",
    formula="y = beta * (1/x + gamma)^c",
    inputs=_X,
    params=(
        Param("a", _log_level, "ln(beta) - c ln x0"),
        Param("c", _exponent(), "scaling exponent (> 0)"),
        Param("log_g", lambda s: dist.Normal(s.hi["x"], 2.0), "ln(gamma x0): where the curve saturates"),
    ),
    mean=_m3_mean,
    natural=lambda p, s: {
        "beta": _coef(p["a"], p["c"], s.center["x"]),
        "c": p["c"],
        "gamma": jnp.exp(p["log_g"] - s.center["x"]),
    },
    description="Power law that saturates at beta * gamma^c for large x.",
    reference=_REVISITING,
))


def solve_m4(k, alpha, iters: int = 5):
    """Solve h(u) = ln s - alpha ln(1 - s) = k for s = sigmoid(u) in (0, 1); returns u.

    h(u) = alpha u + (alpha - 1) softplus(-u) rises with slope 1 for u -> -inf and alpha for u -> +inf, so its
    asymptotes give a start within |alpha - 1| ln 2 of the root; Halley's method (cubic convergence) then reaches
    ~1e-12 in 5 steps, each one exp and one log1p. Gradients come from a last Newton step alone (implicit-function
    theorem), not through the iterations.
    """
    ks, al = jax.lax.stop_gradient(k), jax.lax.stop_gradient(alpha)
    am1 = al - 1.0

    def parts(u):
        e = jnp.exp(-jnp.abs(u))
        sp = jnp.maximum(-u, 0.0) + jnp.log1p(e)  # softplus(-u)
        sig = jnp.where(u >= 0, 1.0, e) / (1.0 + e)  # sigmoid(u)
        return sp, sig

    u = jnp.where(ks < 0, ks, ks / al)
    for _ in range(iters):
        sp, sig = parts(u)
        f = al * u + am1 * sp - ks
        d1 = 1.0 + am1 * sig
        u = u - 2.0 * f * d1 / (2.0 * d1 * d1 - f * am1 * sig * (1.0 - sig))
    u = jax.lax.stop_gradient(u)
    sp, sig = parts(u)
    return u - (alpha * u + (alpha - 1.0) * sp - k) / (1.0 + am1 * sig)


def _m4_mean(p, t):
    e0, einf = p["eps_0"], p["eps_inf"]
    k = p["k"] - p["c"] * t["x"]
    return einf + (e0 - einf) * jax.nn.sigmoid(solve_m4(k, p["alpha"]))


register_law(Law(
    name="M4",
    formula="(y - eps_inf) / (eps_0 - y)^alpha = beta * x^(-c)",
    inputs=_X,
    params=(
        Param("eps_inf", _floor, "irreducible y as x -> infinity, in [0, min y)"),
        Param("eps_0", lambda s: _Above(dist.LogNormal(jnp.log(0.3 * s.y_max), 1.5), s.y_max),
              "y at x -> 0 (e.g. random-guess error), above max y: max y + max y * LogNormal(ln 0.3, 1.5)"),
        Param("alpha", lambda s: dist.LogNormal(0.0, 1.0), "how sharply y leaves eps_0 (> 0)"),
        Param("k", lambda s: dist.Normal(0.0, 2.5), "ln(beta) - c ln x0 - (1 - alpha) ln(eps_0 - eps_inf)"),
        Param("c", _exponent(), "scaling exponent (> 0)"),
    ),
    mean=_m4_mean,
    natural=lambda p, s: {
        "beta": jnp.exp(p["k"] + (1.0 - p["alpha"]) * jnp.log(p["eps_0"] - p["eps_inf"]) + p["c"] * s.center["x"]),
        "c": p["c"], "alpha": p["alpha"], "eps_inf": p["eps_inf"], "eps_0": p["eps_0"],
    },
    description="Sigmoid-like law between eps_0 and eps_inf, power law in between (the paper's proposal).",
    reference=_REVISITING,
    target_accept=0.99,  # curved posterior where eps_0 is weakly identified: divergences at 0.9 (benchmarks/init.py)
))


# --------------------------------------------------------------------------------------------------
# Broken neural scaling law, Caballero et al. 2022


def _break_positions(p, n_breaks):
    """ln(d_i / x0) of each break: t1, then t1 + gap2, ... (ordered by construction)."""
    ts = [p["t1"]]
    for i in range(2, n_breaks + 1):
        ts.append(ts[-1] + p[f"gap{i}"])
    return ts


def bnsl_law(n_breaks: int, target_accept: float = 0.9) -> Law:
    """The broken neural scaling law with ``n_breaks`` breaks as a :class:`Law` (one input x, log scale)."""
    def mean(p, t):
        x = t["x"]
        logterm = p["a"] - p["c0"] * x
        for i, ti in enumerate(_break_positions(p, n_breaks), start=1):
            ci, fi = p[f"c{i}"], p[f"f{i}"]
            # ln(1 + (x/d)^(1/f)) = softplus((t - t_d)/f); minus its value at t=0 so `a` stays the log term there
            logterm = logterm - ci * fi * (jax.nn.softplus((x - ti) / fi) - jax.nn.softplus(-ti / fi))
        return p["eps_inf"] + jnp.exp(logterm)

    params = [
        Param("eps_inf", _floor, "irreducible y, in [0, min y)"),
        Param("a", _log_term, "ln of the reducible term at the data centre"),
        Param("c0", lambda s: dist.Normal(0.3, 0.5), "exponent before the first break"),
    ]
    for i in range(1, n_breaks + 1):
        if i == 1:
            params.append(Param("t1", lambda s: dist.Normal(0.5 * (s.lo["x"] + s.hi["x"]), s.width("x")),
                                "ln(d1 / x0): first break position"))
        else:
            params.append(Param(f"gap{i}", lambda s: dist.LogNormal(jnp.log(0.5 * s.width("x")), 0.7),
                                f"ln(d{i} / d{i - 1}) > 0: distance to break {i}"))
        params.append(Param(f"c{i}", lambda s: dist.Normal(0.0, 0.5), f"change of exponent at break {i}"))
        params.append(Param(f"f{i}", lambda s: dist.LogNormal(math.log(0.5), 1.0), f"smoothness of break {i} (> 0)"))

    def natural(p, s):
        out = {"eps_inf": p["eps_inf"], "c0": p["c0"]}
        log_b = p["a"] + p["c0"] * s.center["x"]
        for i, ti in enumerate(_break_positions(p, n_breaks), start=1):
            ci, fi = p[f"c{i}"], p[f"f{i}"]
            out[f"d{i}"], out[f"c{i}"], out[f"f{i}"] = jnp.exp(ti + s.center["x"]), ci, fi
            log_b = log_b + ci * fi * jax.nn.softplus(-ti / fi)
        out["b"] = jnp.exp(log_b)
        return out

    prod = " * ".join(f"(1 + (x/d{i})^(1/f{i}))^(-c{i} f{i})" for i in range(1, n_breaks + 1))
    return Law(
        name=f"BNSL{n_breaks}",
        formula=f"y = eps_inf + b * x^(-c0) * {prod}",
        inputs=_X,
        params=tuple(params),
        mean=mean,
        natural=natural,
        description=f"Broken neural scaling law with {n_breaks} break{'s' if n_breaks > 1 else ''}.",
        reference="Caballero, Gupta, Rish & Krueger 2022, 'Broken neural scaling laws'",
        target_accept=target_accept,
    )


# smooth breaks make curved posteriors: divergences at target_accept 0.9 on real curves (benchmarks/init.py)
register_law(bnsl_law(1, target_accept=0.99))
register_law(bnsl_law(2))  # 0.99 doubled its time and left r-hat (two weakly identified breaks) failing as before


# --------------------------------------------------------------------------------------------------
# Two-input laws

_ND = (Input("N", "model parameters"), Input("D", "training tokens"))


def _chinchilla_optimum(nat, budgets):
    """N* = G (C/6)^(beta/(alpha+beta)), G = (alpha A / (beta B))^(1/(alpha+beta)) (Hoffmann et al., eq. 4)."""
    A, B, al, be = nat["A"], nat["B"], nat["alpha"], nat["beta"]
    return (al * A / (be * B)) ** (1.0 / (al + be)) * (budgets / FLOP_PER_PARAM_TOKEN) ** (be / (al + be))

register_law(Law(
    name="chinchilla",
    formula="L = E + A / N^alpha + B / D^beta",
    inputs=_ND,
    params=(
        Param("E", _floor, "irreducible loss, in [0, min y)"),
        Param("a", _log_term, "ln of the model-size term A/N^alpha at the data centre"),
        Param("alpha", _exponent(0.3, 0.6), "model-size exponent (> 0)"),
        Param("b", _log_term, "ln of the data term B/D^beta at the data centre"),
        Param("beta", _exponent(0.3, 0.6), "data exponent (> 0)"),
    ),
    mean=lambda p, t: p["E"] + _term(p["a"], p["alpha"], t["N"]) + _term(p["b"], p["beta"], t["D"]),
    natural=lambda p, s: {
        "E": p["E"], "A": _coef(p["a"], p["alpha"], s.center["N"]), "alpha": p["alpha"],
        "B": _coef(p["b"], p["beta"], s.center["D"]), "beta": p["beta"],
    },
    optimum=_chinchilla_optimum,
    description="Loss in model size and data (Chinchilla approach 3).",
    reference="Hoffmann et al. 2022, 'Training compute-optimal large language models'",
))


def _kaplan_mean(p, t):
    # L = [(Nc/N)^(aN/aD) + Dc/D]^aD written as ln L = aD * logaddexp(pN - (aN/aD) tN, pD - tD) around the centre.
    scale = p["m"] / p["alphaD"]
    pn, pd = scale + jnp.log(p["w"]), scale + jnp.log1p(-p["w"])
    return jnp.exp(p["alphaD"] * jnp.logaddexp(pn - p["alphaN"] / p["alphaD"] * t["N"], pd - t["D"]))


def _kaplan_natural(p, s):
    scale = p["m"] / p["alphaD"]
    pn, pd = scale + jnp.log(p["w"]), scale + jnp.log1p(-p["w"])
    r = p["alphaN"] / p["alphaD"]
    return {"alphaN": p["alphaN"], "alphaD": p["alphaD"],
            "Nc": jnp.exp(pn / r + s.center["N"]), "Dc": jnp.exp(pd + s.center["D"])}


register_law(Law(
    name="kaplan",
    formula="L = [(Nc/N)^(alphaN/alphaD) + Dc/D]^alphaD",
    inputs=_ND,
    params=(
        Param("m", _log_level, "ln L at the data centre"),
        Param("w", lambda s: Beta(1.5, 1.5), "share of the model-size term at the centre, in (0, 1)"),
        Param("alphaN", _exponent(0.1, 0.8), "model-size exponent (> 0)"),
        Param("alphaD", _exponent(0.1, 0.8), "data exponent (> 0)"),
    ),
    mean=_kaplan_mean,
    natural=_kaplan_natural,
    description="Joint loss in model size and data, no irreducible term.",
    reference="Kaplan et al. 2020, 'Scaling laws for neural language models', eq. 1.5",
))

register_law(Law(
    name="overtrain",
    formula="L = E + (a * M^eta + b * M^(-eta)) * C^(-eta)",
    inputs=(Input("C", "training compute, FLOP (6ND)"), Input("M", "tokens per parameter, D/N")),
    params=(
        Param("E", _floor, "irreducible loss, in [0, min y)"),
        Param("la", _log_term, "ln of the a-term at the data centre"),
        Param("lb", _log_term, "ln of the b-term at the data centre"),
        Param("eta", _exponent(0.15, 0.7), "compute exponent (> 0)"),
    ),
    mean=lambda p, t: p["E"] + jnp.exp(-p["eta"] * t["C"]) * (
        jnp.exp(p["la"] + p["eta"] * t["M"]) + jnp.exp(p["lb"] - p["eta"] * t["M"])),
    natural=lambda p, s: {
        "E": p["E"], "eta": p["eta"],
        "a": jnp.exp(p["la"] - p["eta"] * s.center["M"] + p["eta"] * s.center["C"]),
        "b": jnp.exp(p["lb"] + p["eta"] * s.center["M"] + p["eta"] * s.center["C"]),
    },
    description="Over-training law: loss in compute and tokens per parameter.",
    reference="Gadre et al. 2024, 'Language models scale reliably with over-training and on downstream tasks', eq. 4",
))


# --------------------------------------------------------------------------------------------------
# Links for bounded downstream metrics

register_law(Law(
    name="downstream",
    formula="err = eps - k * exp(-gamma * L)",
    inputs=(Input("L", "validation loss (nats/token)", scale="linear"),),
    params=(
        Param("eps", lambda s: dist.Uniform(s.y_med, 1.0), "error as loss grows (chance level), in (median y, 1)"),
        Param("lk", lambda s: dist.Normal(jnp.log(jnp.maximum(1.0 - s.y_med, 0.05)) - 0.5, 1.5),
              "ln(k exp(-gamma L0)): gap below eps at the centre loss L0"),
        Param("gamma", lambda s: dist.LogNormal(0.0, 1.0), "steepness per nat of loss (> 0)"),
    ),
    mean=lambda p, t: p["eps"] - jnp.exp(p["lk"] - p["gamma"] * t["L"]),
    natural=lambda p, s: {"eps": p["eps"], "k": jnp.exp(p["lk"] + p["gamma"] * s.center["L"]), "gamma": p["gamma"]},
    description="Downstream error (in [0, 1]) from loss; an exponential link.",
    y_range=(0.0, 1.0),
    reference="Gadre et al. 2024, eq. 5",
    toward="min",
))

register_law(Law(
    name="sigmoid",
    formula="y = lo + (hi - lo) / (1 + exp(-k * (ln C - ln C_mid)))",
    inputs=(Input("C", "training compute, FLOP (or any size)"),),
    params=(
        Param("lo", lambda s: dist.Uniform(0.0, s.y_med), "lower asymptote, in [0, median y)"),
        Param("hi", lambda s: dist.Uniform(s.y_med, 1.0), "upper asymptote, in (median y, 1]"),
        Param("k", lambda s: dist.Normal(0.0, 3.0), "slope per e-fold of C (sign: rising or falling metric)"),
        Param("m", lambda s: dist.Normal(0.5 * (s.lo["C"] + s.hi["C"]), s.width("C")), "ln(C_mid / C0)"),
    ),
    mean=lambda p, t: p["lo"] + (p["hi"] - p["lo"]) * jax.nn.sigmoid(p["k"] * (t["C"] - p["m"])),
    natural=lambda p, s: {"lo": p["lo"], "hi": p["hi"], "k": p["k"], "C_mid": jnp.exp(p["m"] + s.center["C"])},
    description="Sigmoid in log-compute for bounded metrics (accuracy or error in [0, 1]).",
    y_range=(0.0, 1.0),
    reference="e.g. Ruan et al. 2024; Owen 2024, 'How predictable is language model benchmark performance?'",
))

_BUILTIN = dict(LAWS)  # the package's own laws as registered at import: a user's law under one of these names is not


def is_builtin(law: Law) -> bool:
    """Whether ``law`` is one of bayescale's own (its code is the package's, so a digest of the package names it)."""
    return _BUILTIN.get(law.name.lower()) is law
