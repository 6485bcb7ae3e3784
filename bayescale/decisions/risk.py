"""The numbers of a risk report: which big run to fund, and how sure we are.

:func:`assess_risk` takes fits of the pilot runs (:func:`fit_families` makes them) and planned runs, the *options*
(such as 70B parameters on 1.4T tokens), and computes from joint posterior predictive draws of the runs' loss
(run-to-run noise included):

- per option: the median, 80%/95% intervals, P(loss <= target), the expected shortfall E[max(loss - target, 0)]
  (how far above the target the run lands, on average, counting a run that meets the target as 0), the mean of
  the worst 5% of outcomes (CVaR 95%) and its compute (:func:`~bayescale.decisions.allocation.default_cost`);
- P(option A beats option B) (lower loss) from the joint draws;
- how much the answer depends on the law family (model average vs each family);
- the fits' diagnostics gate, and the pilot run :func:`~bayescale.decisions.next_runs.next_runs` recommends, with
  how much it is expected to narrow the prediction.

It returns them as a :class:`RiskReport`, whose ``summary`` states each number also in a sentence;
:mod:`bayescale.decisions.report` renders it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from bayescale.compare import model_average
from bayescale.decisions.allocation import compute_optimal
from bayescale.runs import default_cost, parse_size, query_points
from bayescale.decisions.next_runs import SearchOptions, candidate_grid, next_runs
from bayescale.errors import BayescaleError
from bayescale.fit import fit
from bayescale.laws import get_law
from bayescale.posterior import posterior_draws
from bayescale.sampler import SamplerSettings

__all__ = ["RiskReport", "assess_risk", "check_target_loss", "default_candidates", "diagnostics_verdict", "fit_families",
           "format_size", "parse_option", "parse_size"]

def format_size(v: float) -> str:
    """7e10 -> ``"70B"``, 1.4e12 -> ``"1.4T"`` (3 significant digits; the inverse of :func:`parse_size`)."""
    v = float(f"{v:.3g}")  # rounded first: 9.996e11 is "1T", not "1e+03B"
    for s, f in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if v >= f:
            return f"{v / f:.3g}{s}"
    return f"{v:.3g}"


def parse_option(spec, law="chinchilla") -> dict:
    """One planned run as ``{input: value}``: ``"70B,1.4T"`` (values in the law's input order, here N then D),
    ``"N=70B,D=1.4T"`` (one point of :func:`bayescale.runs.query_points`' syntax), or a dict."""
    law = get_law(law)
    frame = query_points(law, spec)
    if len(frame) != 1:
        raise BayescaleError(f"option {spec!r} gives {len(frame)} runs; give one run per option (repeat --option), "
                             f"e.g. \"{','.join(f'{n}=...' for n in law.input_names)}\"")
    return {n: float(frame[n].iloc[0]) for n in law.input_names}


def check_target_loss(target_loss) -> float:
    """``target_loss`` as a float if it is a finite number, else a clear error."""
    try:
        t = float(target_loss)
    except (TypeError, ValueError):
        t = float("nan")
    if not np.isfinite(t):
        raise BayescaleError("target_loss must be a number (the loss the big run must reach)")
    return t


@dataclass
class RiskReport:
    """What :func:`assess_risk` computed: ``summary`` (every number, and the sentences that state them: the
    JSON), ``draws`` (loss draws per option, joint across options), ``fits`` and ``model`` (the headline: a fit or
    the model average), ``next_runs`` (the ranked candidate pilot runs, or None), ``families`` (the option
    statistics per family, one row per option and family) and ``files`` (paths written, by
    :func:`bayescale.decisions.report.write_report`)."""

    summary: dict
    draws: pd.DataFrame
    files: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    model: object = None
    next_runs: pd.DataFrame | None = None
    families: pd.DataFrame | None = None

    @property
    def runs(self) -> pd.DataFrame:
        """The pilot runs (the first fit's, in the law's input names and ``y``)."""
        return next(iter(self.fits.values())).runs

    @property
    def law(self):
        """The law of the first fit (all fits share its inputs)."""
        return next(iter(self.fits.values())).law

    @property
    def input_columns(self) -> list[str]:
        """The run table's column of each input of the law."""
        return _input_columns(next(iter(self.fits.values())))


def _input_columns(f) -> list[str]:
    return [f.columns.get(n, n) for n in f.law.input_names]


# --------------------------------------------------------------------------------------------------
# Fits


def fit_families(runs, law="chinchilla", laws=None, *, x=None, inputs=None, y: str = "loss", seed: int = 0,
                 sampler: SamplerSettings | None = None) -> dict:
    """Fit ``law`` and ``laws`` (several families: a list or ``"chinchilla,kaplan"``) to ``runs``.

    Parameters
    ----------
    runs : DataFrame or str
        The pilot runs (DataFrame or CSV/Parquet path), with ``x``/``inputs`` and ``y`` as for :func:`bayescale.fit`.
    law, laws : str or Law
        The family, and optionally several (``law`` is added to them when missing).
    sampler : SamplerSettings, optional
        NUTS settings used for every family (default: each law's, :meth:`SamplerSettings.for_law`).

    Returns
    -------
    dict
        ``{law name: Fit}``, ``law`` first.
    """
    if runs is None:
        raise BayescaleError("give runs (a run table) or fits={name: Fit}")
    names = [law] if not laws else ([s.strip() for s in laws.split(",")] if isinstance(laws, str) else list(laws))
    if law is not None and laws and get_law(law).name not in [get_law(n).name for n in names]:
        names = [law, *names]
    nuts = {}
    if sampler is not None:
        nuts = asdict(sampler)
        nuts.update(chains=nuts.pop("num_chains"), warmup=nuts.pop("num_warmup"), samples=nuts.pop("num_samples"))
    fits = {}
    for n in names:
        lw = get_law(n)
        fits[lw.name] = fit(runs, lw, x=x, inputs=inputs, y=y, seed=seed, progress=False, **nuts)
    return fits


def _gate(fits: dict) -> dict:
    out = {}
    for name, f in fits.items():
        d = f.diagnostics
        out[name] = {"ok": bool(f.ok), "warnings": list(f.warnings), "max_rhat": d["max_rhat"],
                     "min_ess_bulk": d["min_ess_bulk"], "divergences": d["divergences"], "chains": d["chains"],
                     "draws": d["draws"]}
    return out


def _error_evidence(fits: dict) -> dict:
    """Per family: the extrapolation error its bands carry and the evidence from the user's own runs (the
    leave-future-out errors that updated the corpus prior)."""
    out = {}
    for name, f in fits.items():
        err = getattr(f, "error", None)
        if err is None:
            out[name] = {"text": "none recorded"}
            continue
        lo, hi = (float(v) for v in err.quantile([0.05, 0.95]))
        row = {"text": err.describe(), "tau": err.tau, "tau_lo90": lo, "tau_hi90": hi, "gamma": err.gamma,
               "method": err.method}
        if hasattr(f, "own_errors") and not err.is_zero and err.point is None:
            own, how = f.own_errors()
            own = own[own["beyond"] > 0]  # the runs that told about the error: those predicted beyond the rest
            row.update(own_runs=int(len(own)), own_how=how,
                       own_rms_ln_error=float(np.sqrt(np.mean(own["r"].to_numpy(float) ** 2))) if len(own) else None,
                       own_max_beyond=float(own["beyond"].max()) if len(own) else None)
        out[name] = row
    return out


WEIGHT_MATTERS = 0.01  # a family with less weight than this does not move the headline numbers


def diagnostics_verdict(gate: dict, weights: dict) -> str:
    """The diagnostics verdict: failing fits that carry weight make the numbers unreliable and are named with their
    weight; failing fits with (almost) no weight are mentioned as not used."""
    bad = [n for n, g in gate.items() if not g["ok"]]
    if not bad:
        return ("All fits passed their diagnostics (r-hat <= 1.01, enough effective draws, at most 1 divergence "
                "per 1000 draws, E-BFMI >= 0.3).")
    used = [n for n in bad if weights.get(n, 1.0) >= WEIGHT_MATTERS]
    unused = [n for n in bad if n not in used]
    note = ("" if not unused else " " + ", ".join(f"The {n} fit also failed its diagnostics" for n in unused[:1])
            + (f" (and {', '.join(unused[1:])})" if len(unused) > 1 else "")
            + f", but its weight is below {WEIGHT_MATTERS:g}: it does not move the numbers.")
    carrying = ", ".join(f"{n} {weights.get(n, 1.0):.2f}" for n in gate if weights.get(n, 1.0) >= WEIGHT_MATTERS)
    if not used:
        return f"The families carrying the numbers passed their diagnostics (weights: {carrying}).{note}"
    return ("WARNING: " + "; ".join(f"the {n} fit (weight {weights.get(n, 1.0):.2f}) failed its diagnostics "
                                    f"({'; '.join(gate[n]['warnings'])})" for n in used)
            + ". The numbers below are not reliable until it is refitted (more warm-up and draws) and passes."
            + note)


# --------------------------------------------------------------------------------------------------
# Options


def _options(options, law) -> dict:
    """``{label: {input: value}}`` from a list of option specs or a dict ``{label: spec}``."""
    if isinstance(options, dict):
        return {str(k): parse_option(v, law) for k, v in options.items()}
    if isinstance(options, str) or not len(options):
        raise BayescaleError("options must be a non-empty list like ['70B,1.4T', '35B,2.8T'] or a dict {label: spec}")
    return {str(o) if not isinstance(o, dict) else ",".join(f"{k}={format_size(v)}" for k, v in o.items()):
            parse_option(o, law) for o in options}


def _option_costs(frame: pd.DataFrame, law, cost) -> np.ndarray:
    """Each option's compute: ``cost(*inputs)``, else :func:`default_cost` for laws in N and D, else the first
    input."""
    names = law.input_names
    if cost is not None:
        return np.asarray(cost(*[frame[n].to_numpy(float) for n in names]), float) * np.ones(len(frame))
    if set(names) == {"N", "D"}:
        return default_cost(frame["N"], frame["D"])
    return frame[names[0]].to_numpy(float)


def _allocation(model, law, frame: pd.DataFrame, labels: list, cost_of: dict, cost, seed: int) -> dict | None:
    """Per option (laws in N and D): the compute-optimal split at the option's compute
    (:func:`~bayescale.decisions.allocation.compute_optimal`, 80% intervals; checked by the runs' isoFLOP profiles
    where they have them) and where the option's own N lies against it; None for other laws."""
    if set(law.input_names) != {"N", "D"}:
        return None
    c = None if cost is None else (lambda n, d: cost(*[{"N": n, "D": d}[k] for k in law.input_names]))
    try:
        opt = compute_optimal(model, [cost_of[lab] for lab in labels], cost=c, levels=(0.8,), seed=seed)
    except BayescaleError as exc:
        return {"note": f"not computed: {exc}", "options": {}}
    out = {}
    for i, lab in enumerate(labels):
        n, d = float(frame["N"].iloc[i]), float(frame["D"].iloc[i])
        lo, hi = (float(opt[f"N_opt_{k}"].values[0, i]) for k in ("lower", "upper"))
        t_lo, t_hi = (float(opt[f"tokens_per_param_{k}"].values[0, i]) for k in ("lower", "upper"))
        where = "within it" if lo <= n <= hi else ("a larger model" if n > hi else "a smaller model")
        out[lab] = {"N": n, "tokens_per_param": d / n, "N_opt": float(opt["N_opt_median"].values[i]), "N_opt_lo80": lo,
                    "N_opt_hi80": hi, "tokens_per_param_opt": float(opt["tokens_per_param_median"].values[i]),
                    "tokens_per_param_opt_lo80": t_lo, "tokens_per_param_opt_hi80": t_hi, "verdict": where}
    return {"note": opt.attrs["optimum"], "options": out}


def _option_stats(d: np.ndarray, target: float) -> dict:
    q = np.quantile(d, [0.025, 0.1, 0.5, 0.9, 0.975])
    worst = np.sort(d)[int(np.floor(0.95 * len(d))):]
    return {"median": float(q[2]), "mean": float(d.mean()), "lo80": float(q[1]), "hi80": float(q[3]),
            "lo95": float(q[0]), "hi95": float(q[4]), "p_meet": float(np.mean(d <= target)),
            "expected_shortfall": float(np.mean(np.maximum(d - target, 0.0))), "cvar95": float(worst.mean())}


def _predictive(model, frame: pd.DataFrame, seed: int, n_draws: int) -> np.ndarray:
    """(S, options) new runs' loss, joint across the options."""
    return posterior_draws(model, n_draws, seed).predictive(frame, seed)[1]


# --------------------------------------------------------------------------------------------------
# Law family


def _families(fits: dict, model, obs: np.ndarray, frame: pd.DataFrame, labels: list, target: float, seed: int,
              n_draws: int) -> dict:
    """``{family: {option: statistics}}``, the model average first (with several families)."""
    fam_models = {**({f"average ({len(fits)} families)": model} if len(fits) > 1 else {}), **fits}
    out = {}
    for fam, m in fam_models.items():
        o = obs if m is model else _predictive(m, frame, seed, n_draws)
        out[fam] = {lab: _option_stats(o[:, i], target) for i, lab in enumerate(labels)}
    return out


def _family_table(fam_stats: dict, weights: dict) -> pd.DataFrame:
    """One row per family and option: its weight (NaN for the average) and option statistics."""
    return pd.DataFrame([{"option": lab, "family": fam, "weight": weights.get(fam, np.nan), **st}
                         for fam, per in fam_stats.items() for lab, st in per.items()])


def _family_text(fits: dict, model, table: pd.DataFrame, labels: list, target: float) -> str:
    if len(fits) == 1:
        return (f"Only one family ({next(iter(fits.values())).law.name}) was fitted: pass laws=[...] (CLI --laws) "
                "to see how much the answer depends on it.")
    per_family = table[~table["family"].str.startswith("average")]
    spread = {lab: (float(per_family[per_family.option == lab]["p_meet"].min()),
                    float(per_family[per_family.option == lab]["p_meet"].max())) for lab in labels}
    worst = max(labels, key=lambda lab: spread[lab][1] - spread[lab][0])
    lo_, hi_ = spread[worst]
    return (f"Across the {len(fits)} families P(loss <= {target:g}) for {worst} ranges from {lo_:.0%} to "
            f"{hi_:.0%} (stacking weights: " + ", ".join(f"{k} {v:.2f}" for k, v in model.weights.items())
            + "). " + ("The families disagree: the averaged numbers weigh each by how well it predicts "
                       + ("the largest pilot runs from the smaller ones (leave-future-out stacking)"
                          if model.table is not None and model.table.attrs.get("ic") == "lfo"
                          else "held-out pilot runs (PSIS-LOO stacking)")
                       + ", so a family with weight near 0 barely counts."
                       if hi_ - lo_ > 0.2 else "The answer hardly depends on the family."))


# --------------------------------------------------------------------------------------------------
# Next pilot run


SAME_RUN = 0.05  # a candidate within 5% of a pilot run in every input is that run: not recommended again


def default_candidates(runs: pd.DataFrame, law, n: int | None = None) -> pd.DataFrame:
    """Candidate next pilot runs: a grid around the pilot runs, each log input from its smallest value to 4x its
    largest (6 values per input for several inputs, 12 for one), without the runs already there (within
    :data:`SAME_RUN` in every input)."""
    n = n or (12 if len(law.inputs) == 1 else 6)
    axes = {}
    for inp in law.inputs:
        v = runs[inp.name].to_numpy(float)
        axes[inp.name] = np.geomspace(v.min(), 4 * v.max(), n) if inp.scale == "log" else np.linspace(v.min(), v.max() + 0.5 * np.ptp(v), n)
    grid = candidate_grid(**axes)
    same = np.ones((len(grid), len(runs)), bool)
    for inp in law.inputs:
        c, r = grid[inp.name].to_numpy(float)[:, None], runs[inp.name].to_numpy(float)[None, :]
        same &= np.abs(c - r) <= SAME_RUN * np.maximum(np.abs(r), 1e-300)
    return grid[~same.any(axis=1)].reset_index(drop=True)


def _next_run(nr: pd.DataFrame, cols: list) -> tuple[dict, str]:
    """The recommendation in ``next_runs``' table ``nr``: its numbers and the sentence stating them."""
    best = nr.iloc[0]
    where = ", ".join(f"{c}={format_size(float(best[c]))}" for c in cols)
    sd0, sd1 = float(best["target_sd"]), float(best["expected_sd_after"])
    narrow = 1 - sd1 / sd0 if sd0 > 0 else 0.0
    info = {**{c: float(best[c]) for c in cols}, "cost": float(best["cost"]), "target_sd_now": sd0,
            "target_sd_after": sd1, "narrowing": narrow, "ess_median": float(best["ess_median"]), "candidates": len(nr)}
    text = (f"Train {where} next (cost {best['cost']:.3g}): of {len(nr)} candidate pilot runs it is expected "
            f"to narrow the options' predicted loss most per unit cost: the posterior sd of log loss at the "
            f"options (mean-curve uncertainty, averaged over options) is expected to go from {sd0:.4f} to "
            f"{sd1:.4f} ({narrow:.0%} narrower; importance-sampling ESS {best['ess_median']:.0f}).")
    top = nr.loc[nr["expected_var_reduction"].idxmax()]
    if top["expected_var_reduction"] > best["expected_var_reduction"]:
        where_top = ", ".join(f"{c}={format_size(float(top[c]))}" for c in cols)
        info["most_informative"] = {**{c: float(top[c]) for c in cols}, "cost": float(top["cost"]),
                                    "target_sd_after": float(top["expected_sd_after"]),
                                    "narrowing": 1 - float(top["expected_sd_after"]) / sd0 if sd0 > 0 else 0.0}
        text += (f" Regardless of cost, the most informative candidate is {where_top} (cost {top['cost']:.3g}):"
                 f" expected sd {float(top['expected_sd_after']):.4f} "
                 f"({info['most_informative']['narrowing']:.0%} narrower).")
    if "warning" in nr.attrs:
        text += " Caution: " + nr.attrs["warning"]
    return info, text


# --------------------------------------------------------------------------------------------------


DEFINITIONS = ("Predicted loss of the run itself (posterior predictive, run-to-run noise included). "
               "P(meet) = P(loss <= target). Expected shortfall = E[max(loss - target, 0)], how far above the "
               "target the run lands on average (0 when it meets it). CVaR 95% = mean loss of the worst 5% of "
               "outcomes. Compute = 6ND FLOP unless a cost function was given.")


def assess_risk(fits: dict, options, target_loss: float, *, candidates=None, cost=None, seed: int = 0,
                n_draws: int = 4000, search: SearchOptions = SearchOptions(), title: str | None = None) -> RiskReport:
    """The numbers of a risk report: each option's predicted loss against ``target_loss``, and what to train next.

    Parameters
    ----------
    fits : dict
        ``{name: Fit}`` fitted to the same pilot runs (:func:`fit_families`); with several the headline numbers
        come from their stacking average (:func:`bayescale.model_average`).
    options : list or dict
        Planned runs: specs like ``"70B,1.4T"`` (see :func:`parse_option`) or a dict ``{label: spec}``.
    target_loss : float
        The loss the big run must reach.
    candidates : DataFrame or dict, optional
        Pilot runs to consider for the next-run recommendation (default: a grid from the smallest pilot run to 4x
        the largest per input, cost :func:`~bayescale.decisions.allocation.default_cost`).
    cost : callable, optional
        ``cost(*inputs)`` of an option (and of a default candidate); default 6ND for laws in N and D.
    seed : int
        Seeds the draws and the recommendation's search.
    n_draws : int
        Joint posterior predictive draws per option.
    search : SearchOptions
        The next-run search (:func:`~bayescale.decisions.next_runs.next_runs`).
    title : str, optional
        The report's title.

    Returns
    -------
    RiskReport
        With ``files`` empty: :func:`bayescale.decisions.report.write_report` writes it.
    """
    target = check_target_loss(target_loss)
    if not fits:
        raise BayescaleError("fits is empty")
    first = next(iter(fits.values()))
    law = first.law
    for n, f in fits.items():
        if tuple(f.law.input_names) != tuple(law.input_names):
            raise BayescaleError(f"fit {n!r} has inputs {list(f.law.input_names)}, not {list(law.input_names)}: "
                                 "compare families with the same inputs")
    opts = _options(options, law)
    labels = list(opts)
    frame = pd.DataFrame(list(opts.values()), columns=list(law.input_names))
    cost_of = dict(zip(labels, map(float, _option_costs(frame, law, cost))))

    model = model_average(fits) if len(fits) > 1 else first
    headline = "stacking average of " + ", ".join(fits) if len(fits) > 1 else f"{law.name} fit"
    obs = _predictive(model, frame, seed, n_draws)
    draws = pd.DataFrame(obs, columns=labels)
    stats_ = {lab: _option_stats(draws[lab].to_numpy(), target) for lab in labels}
    versus = {a: {b: float(np.mean(draws[a].to_numpy() < draws[b].to_numpy())) for b in labels if b != a}
              for a in labels}
    fam_stats = _families(fits, model, obs, frame, labels, target, seed, n_draws)
    fam_table = _family_table(fam_stats, dict(model.weights) if len(fits) > 1 else dict.fromkeys(fits, 1.0))

    pilot = first.runs
    cand = default_candidates(pilot, law) if candidates is None else candidates
    try:
        nr = next_runs(model, cand, target=frame, k=1, cost=None if candidates is not None or cost is None else cost,
                       seed=seed, search=search)
    except BayescaleError as exc:
        nr, next_text, next_info = None, f"No recommendation: {exc}", {}
    if nr is not None:
        next_info, next_text = _next_run(nr, _input_columns(first))
    gate = _gate(fits)
    weights = dict(model.weights) if len(fits) > 1 else dict.fromkeys(fits, 1.0)
    summary = {
        "title": title or f"Risk report: which run reaches loss {target:g}?", "target_loss": target,
        "headline_model": headline, "y": first.columns.get("y", "y"),
        "setup": (f"{len(pilot)} pilot runs; headline numbers from the {headline}; {draws.shape[0]} joint posterior "
                  f"predictive draws per option; seed {seed}."),
        "gate": {"ok": all(g["ok"] for n, g in gate.items() if weights.get(n, 1.0) >= WEIGHT_MATTERS),
                 "text": diagnostics_verdict(gate, weights), "fits": gate},
        "definitions": DEFINITIONS,
        "options": {lab: {"inputs": opts[lab], "compute": cost_of[lab], **stats_[lab]} for lab in labels},
        "p_beats": versus,
        "families": fam_stats,
        "weights": dict(model.weights) if len(fits) > 1 else {law.name: 1.0},
        "family_text": _family_text(fits, model, fam_table, labels, target),
        "next_run": next_info, "next_run_text": next_text,
        "extrapolation_error": _error_evidence(fits),
        "allocation": _allocation(model, law, frame, labels, cost_of, cost, seed),
        "n_draws": int(draws.shape[0]),
    }
    return RiskReport(summary=summary, draws=draws, fits=fits, model=model, next_runs=nr, families=fam_table)
