"""Risk report for a budget decision: which big run to fund, and how sure we are.

:func:`risk_report` fits the law(s) to the pilot runs (or takes fits), predicts each option (a planned run such as
70B parameters on 1.4T tokens) and writes three files into ``out``:

- ``report.html``: a self-contained page (plots embedded as base64 PNG, no external resources);
- ``report.md``: the same summary in Markdown;
- ``report.json``: every number, for scripts.

Contents: the fits' diagnostics gate on top (a failing fit says so in words); per option the predicted loss of the
run (posterior predictive, run-to-run noise included), its median and 80%/95% intervals, P(loss <= target) and the
expected shortfall E[max(loss - target, 0)] (how far above the target the run lands, on average, counting a run
that meets the target as 0), plus the mean of the worst 5% of outcomes (CVaR 95%); P(option A beats option B)
(lower loss) from joint draws, and the compute each option needs; how much the answer depends on the law family
(model average vs each family); and the pilot run :func:`bayescale.next_runs` recommends, with how much it is
expected to narrow the prediction.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from bayescale.errors import BayescaleError
from bayescale.laws import get_law

__all__ = ["RiskReport", "check_in_browser", "chromium", "parse_option", "parse_size", "risk_report"]

SUFFIX = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_NUM = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGTPkmbgtp]?)\s*$")


def parse_size(text) -> float:
    """``"70B"`` -> 7e10, ``"1.4T"`` -> 1.4e12, ``"350M"``, ``"2K"``, or a plain number like ``"7e10"``."""
    if isinstance(text, (int, float, np.floating, np.integer)):
        v = float(text)
    else:
        m = _NUM.match(str(text))
        if not m:
            raise BayescaleError(f"could not read size {text!r}: write a number with an optional suffix K, M, B (or G), "
                                 "T, P, e.g. 70B, 1.4T, 350M or 7e10")
        v = float(m.group(1)) * SUFFIX.get(m.group(2).upper(), 1.0)
    if not np.isfinite(v) or v <= 0:
        raise BayescaleError(f"size {text!r} must be a positive number")
    return v


def parse_option(spec, law="chinchilla") -> dict:
    """An option as ``{input: value}``: ``"70B,1.4T"`` (values in the law's input order, here N then D),
    ``"N=70B,D=1.4T"``, or a dict."""
    law = get_law(law)
    names = law.input_names
    if isinstance(spec, dict):
        parts = {k: parse_size(v) for k, v in spec.items()}
    else:
        items = [p.strip() for p in str(spec).split(",") if p.strip()]
        if items and all("=" in p for p in items):
            parts = {k.strip(): parse_size(v) for k, v in (p.split("=", 1) for p in items)}
        elif len(items) == len(names) and not any("=" in p for p in items):
            parts = dict(zip(names, (parse_size(p) for p in items)))
        else:
            example = ",".join(["70B", "1.4T"][: len(names)]) if set(names) == {"N", "D"} else ",".join("1e9" for _ in names)
            raise BayescaleError(f"could not read option {spec!r}: law {law.name!r} needs {len(names)} value(s) "
                                 f"({', '.join(names)}), e.g. --option \"{example}\" or "
                                 f"\"{','.join(f'{n}=...' for n in names)}\"")
    missing, extra = [n for n in names if n not in parts], [k for k in parts if k not in names]
    if missing or extra:
        raise BayescaleError(f"option {spec!r} must give {list(names)}"
                             + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
    return {n: parts[n] for n in names}


def _fmt_size(v: float) -> str:
    for s, f in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if v >= f:
            return f"{v / f:.3g}{s}"
    return f"{v:.3g}"


@dataclass
class RiskReport:
    """What :func:`risk_report` computed: ``summary`` (the JSON), ``draws`` (loss draws per option, joint across
    options), ``files`` (paths written), ``fits`` and ``model`` (the headline: a fit or the model average)."""

    summary: dict
    draws: pd.DataFrame
    files: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    model: object = None
    next_runs: pd.DataFrame | None = None


# --------------------------------------------------------------------------------------------------
# Numbers


def _option_stats(d: np.ndarray, target: float) -> dict:
    q = np.quantile(d, [0.025, 0.1, 0.5, 0.9, 0.975])
    worst = np.sort(d)[int(np.floor(0.95 * len(d))):]
    return {"median": float(q[2]), "mean": float(d.mean()), "lo80": float(q[1]), "hi80": float(q[3]),
            "lo95": float(q[0]), "hi95": float(q[4]), "p_meet": float(np.mean(d <= target)),
            "expected_shortfall": float(np.mean(np.maximum(d - target, 0.0))), "cvar95": float(worst.mean())}


def _draws_for(model, frame: pd.DataFrame, seed: int, n_draws: int):
    from bayescale.compare import ModelAverage

    if isinstance(model, ModelAverage):
        _, mu, obs = model.predictive_draws(frame, seed=seed, n_draws=n_draws)
    else:
        _, mu, obs = model.predictive_draws(frame, seed=seed, max_draws=n_draws)
    return mu, obs


def _gate(fits: dict) -> dict:
    out = {}
    for name, f in fits.items():
        d = f.diagnostics
        out[name] = {"ok": bool(f.ok), "warnings": list(f.warnings), "max_rhat": d["max_rhat"],
                     "min_ess_bulk": d["min_ess_bulk"], "divergences": d["divergences"], "chains": d["chains"],
                     "draws": d["draws"]}
    return out


def _default_candidates(runs: pd.DataFrame, law, n: int | None = None) -> pd.DataFrame:
    """A grid around the pilot runs: each log input from its smallest value to 4x its largest (6 values per input
    for several inputs, 12 for one)."""
    n = n or (12 if len(law.inputs) == 1 else 6)
    axes = {}
    for inp in law.inputs:
        v = runs[inp.name].to_numpy(float)
        axes[inp.name] = np.geomspace(v.min(), 4 * v.max(), n) if inp.scale == "log" else np.linspace(v.min(), v.max() + 0.5 * np.ptp(v), n)
    from bayescale.next_runs import candidate_grid

    return candidate_grid(**axes)


# --------------------------------------------------------------------------------------------------
# Plots (PNG bytes)


def _png(fig) -> bytes:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _plot_distributions(draws: pd.DataFrame, target: float, stats_: dict) -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    lo = min(draws.quantile(0.002).min(), target)
    hi = max(draws.quantile(0.998).max(), target)
    bins = np.linspace(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo), 70)
    for i, name in enumerate(draws.columns):
        ax.hist(draws[name], bins=bins, density=True, alpha=0.45, color=f"C{i}",
                label=f"{name}: P(loss <= target) = {stats_[name]['p_meet']:.0%}")
        ax.axvline(stats_[name]["median"], color=f"C{i}", lw=1.2)
    ax.axvline(target, color="k", ls="--", lw=1.5, label=f"target {target:g}")
    ax.set_xlabel("predicted loss of the run")
    ax.set_ylabel("density")
    ax.set_title("Predicted loss per option (posterior predictive; lines: medians)", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _plot_families(table: pd.DataFrame, target: float) -> bytes:
    import matplotlib.pyplot as plt

    options = list(dict.fromkeys(table["option"]))
    families = list(dict.fromkeys(table["family"]))
    fig, ax = plt.subplots(figsize=(7, 0.6 + 0.45 * len(options) * len(families)))
    y, ticks, labels = 0, [], []
    for oi, opt in enumerate(options):
        for fi, fam in enumerate(families):
            r = table[(table["option"] == opt) & (table["family"] == fam)].iloc[0]
            ax.plot([r["lo95"], r["hi95"]], [y, y], color=f"C{oi}", lw=1.5, alpha=0.6)
            ax.plot([r["lo80"], r["hi80"]], [y, y], color=f"C{oi}", lw=5, alpha=0.8)
            ax.plot(r["median"], y, "o", color="k" if fam.startswith("average") else "w", mec="k", ms=5)
            ticks.append(y)
            labels.append(f"{opt} | {fam}")
            y -= 1
        y -= 0.6
    ax.axvline(target, color="k", ls="--", lw=1.2, label=f"target {target:g}")
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_xlabel("predicted loss (thick: 80%, thin: 95%)")
    ax.set_title("Sensitivity to the law family", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _plot_context(runs: pd.DataFrame, law, options: dict, stats_: dict, costs: dict, y_name: str) -> bytes:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.8))
    nd = set(law.input_names) == {"N", "D"}
    xr_ = 6 * runs["N"] * runs["D"] if nd else runs[law.input_names[0]]
    ax.plot(xr_, runs["y"], ".", color="0.4", ms=4, label=f"pilot runs ({len(runs)})")
    for i, name in enumerate(options):
        s, c = stats_[name], costs[name]
        ax.errorbar([c], [s["median"]], yerr=[[s["median"] - s["lo95"]], [s["hi95"] - s["median"]]], fmt="o",
                    color=f"C{i}", elinewidth=1.2, capsize=3, label=f"{name} (95% interval)")
    ax.set_xscale("log")
    ax.set_xlabel("compute 6ND (FLOP)" if nd else law.input_names[0])
    ax.set_ylabel(y_name)
    ax.set_title("Pilot runs and the options", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


# --------------------------------------------------------------------------------------------------
# Writers


def _md_table(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(r[c]) for c in cols) + " |")
    return "\n".join(lines)


def _html_table(df: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>"
                   for r in df.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


_CSS = """body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:980px;margin:24px auto;
padding:0 16px;color:#1d1d1f;line-height:1.45}h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px
solid #ddd;padding-bottom:4px}table{border-collapse:collapse;margin:8px 0;font-size:.9em}th,td{border:1px solid #ccc;
padding:4px 8px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.gate{padding:10px 14px;border-radius:6px;margin:12px 0}.ok{background:#e8f5e9;border:1px solid #66bb6a}
.bad{background:#ffebee;border:1px solid #e53935}img{max-width:100%;height:auto;display:block;margin:8px 0}
.note{color:#555;font-size:.9em}#page-check{color:#888;font-size:.8em;margin-top:2em}"""

_JS_HEAD = """<script>window.__errors=[];window.addEventListener('error',function(e){window.__errors.push(String(e.message||e));});</script>"""
_JS_CHECK = """<script>
function pageCheck(){var imgs=Array.prototype.slice.call(document.images);
var ok=imgs.filter(function(i){return i.complete&&i.naturalWidth>0;}).length;var el=document.getElementById('page-check');
el.setAttribute('data-images',imgs.length);el.setAttribute('data-images-ok',ok);el.setAttribute('data-errors',window.__errors.length);
el.textContent='page check: '+ok+'/'+imgs.length+' images decoded, '+window.__errors.length+' script errors';}
window.addEventListener('load',pageCheck);
</script>"""


def _write(out: Path, summary: dict, tables: dict, images: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    gate_ok = summary["gate"]["ok"]
    gate_text = summary["gate"]["text"]
    md = [f"# {summary['title']}", "", f"**Diagnostics:** {gate_text}", ""]
    md += ["## Options", "", _md_table(tables["options"]), "", summary["definitions"], ""]
    if "versus" in tables:
        md += ["## Option A beats option B", "", "P(row's loss < column's loss), from joint posterior draws.", "",
               _md_table(tables["versus"]), ""]
    md += ["## Law family", "", summary["family_text"], "", _md_table(tables["families"]), ""]
    md += ["## Next pilot run", "", summary["next_run_text"], ""]
    if "next" in tables:
        md += [_md_table(tables["next"]), ""]
    md += ["## Fits", "", _md_table(tables["fits"]), ""]
    (out / "report.md").write_text("\n".join(md))
    (out / "report.json").write_text(json.dumps(summary, indent=2, default=float))

    def img(key, alt):
        return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(images[key]).decode()}">'

    body = [f"<h1>{html.escape(summary['title'])}</h1>",
            f'<div class="gate {"ok" if gate_ok else "bad"}"><b>Diagnostics:</b> {html.escape(gate_text)}</div>',
            f"<p class=note>{html.escape(summary['setup'])}</p>",
            "<h2>Options</h2>", _html_table(tables["options"]), f"<p class=note>{html.escape(summary['definitions'])}</p>",
            img("distributions", "predicted loss distribution per option"), img("context", "pilot runs and options")]
    if "versus" in tables:
        body += ["<h2>Option A beats option B</h2>", "<p>P(row's loss &lt; column's loss), from joint posterior draws.</p>",
                 _html_table(tables["versus"])]
    body += ["<h2>Law family</h2>", f"<p>{html.escape(summary['family_text'])}</p>", _html_table(tables["families"]),
             img("families", "sensitivity to the law family")]
    body += ["<h2>Next pilot run</h2>", f"<p>{html.escape(summary['next_run_text'])}</p>"]
    if "next" in tables:
        body.append(_html_table(tables["next"]))
    body += ["<h2>Fits</h2>", _html_table(tables["fits"]), '<div id="page-check">page check did not run</div>', _JS_CHECK]
    page = (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(summary['title'])}</title>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{_CSS}</style>{_JS_HEAD}</head>"
            f"<body>{''.join(body)}</body></html>")
    (out / "report.html").write_text(page)
    return {"html": out / "report.html", "md": out / "report.md", "json": out / "report.json"}


# --------------------------------------------------------------------------------------------------


def risk_report(runs=None, law="chinchilla", *, options, target_loss: float, x=None, inputs=None, y: str = "loss",
                laws=None, fits: dict | None = None, out=None, candidates=None, cost=None, seed: int = 0,
                chains: int = 4, warmup: int = 1000, samples: int = 1000, n_draws: int = 4000, n_outcomes: int = 32,
                next_max_draws: int = 1000, title: str | None = None) -> RiskReport:
    """Fit, predict the ``options`` and write ``report.html``/``report.md``/``report.json`` into ``out``.

    ``runs`` (DataFrame or CSV/Parquet) with ``x``/``inputs`` and ``y`` as for :func:`bayescale.fit`; ``law`` the
    family, ``laws`` several families (the headline numbers then come from their stacking average), or ``fits``
    (``{name: Fit}``, already fitted to the same runs) instead of fitting. ``options``: a list of specs like
    ``"70B,1.4T"`` (see :func:`parse_option`) or a dict ``{label: spec}``. ``target_loss``: the loss the big run must
    reach. ``candidates``/``cost``: pilot runs to consider for the next-run recommendation (default: a grid from
    the smallest pilot run to 4x the largest per input, cost 6ND). Returns a :class:`RiskReport`; ``out=None``
    computes without writing files.
    """
    import bayescale as bs
    from bayescale.next_runs import next_runs

    if target_loss is None or not np.isfinite(float(target_loss)):
        raise BayescaleError("target_loss must be a number (the loss the big run must reach)")
    target = float(target_loss)
    if fits is None:
        if runs is None:
            raise BayescaleError("give runs (a run table) or fits={name: Fit}")
        names = [law] if not laws else ([s.strip() for s in laws.split(",")] if isinstance(laws, str) else list(laws))
        if law is not None and laws and get_law(law).name not in [get_law(n).name for n in names]:
            names = [law, *names]
        fits = {}
        for n in names:
            lw = get_law(n)
            fits[lw.name] = bs.fit(runs, lw, x=x, inputs=inputs, y=y, chains=chains, warmup=warmup, samples=samples,
                                   seed=seed, progress=False)
    if not fits:
        raise BayescaleError("fits is empty")
    first = next(iter(fits.values()))
    main_law = first.law
    for n, f in fits.items():
        if tuple(f.law.input_names) != tuple(main_law.input_names):
            raise BayescaleError(f"fit {n!r} has inputs {list(f.law.input_names)}, not {list(main_law.input_names)}: "
                                 "compare families with the same inputs")
    if isinstance(options, dict):
        opts = {str(k): parse_option(v, main_law) for k, v in options.items()}
    else:
        if isinstance(options, (str, dict)) or not len(options):
            raise BayescaleError("options must be a non-empty list like ['70B,1.4T', '35B,2.8T'] or a dict {label: spec}")
        opts = {str(o) if not isinstance(o, dict) else ",".join(f"{k}={_fmt_size(v)}" for k, v in o.items()):
                parse_option(o, main_law) for o in options}
    frame = pd.DataFrame(list(opts.values()), columns=list(main_law.input_names))
    labels = list(opts)
    if cost is None:
        if set(main_law.input_names) == {"N", "D"}:
            costs = 6.0 * frame["N"].to_numpy() * frame["D"].to_numpy()
        else:
            costs = frame[main_law.input_names[0]].to_numpy(float)
    else:
        costs = np.asarray(cost(*[frame[n].to_numpy(float) for n in main_law.input_names]), float) * np.ones(len(frame))
    cost_of = dict(zip(labels, map(float, costs)))

    model = bs.model_average(fits) if len(fits) > 1 else first
    headline = "stacking average of " + ", ".join(fits) if len(fits) > 1 else f"{main_law.name} fit"
    mu, obs = _draws_for(model, frame, seed, n_draws)
    draws = pd.DataFrame(obs, columns=labels)
    stats_ = {lab: _option_stats(draws[lab].to_numpy(), target) for lab in labels}
    versus = {a: {b: float(np.mean(draws[a].to_numpy() < draws[b].to_numpy())) for b in labels if b != a}
              for a in labels}

    # sensitivity to the family
    fam_rows = []
    fam_models = {**({f"average ({len(fits)} families)": model} if len(fits) > 1 else {}), **fits}
    fam_stats = {}
    for fam, m in fam_models.items():
        _, o = (mu, obs) if m is model else _draws_for(m, frame, seed, n_draws)
        fam_stats[fam] = {lab: _option_stats(o[:, i], target) for i, lab in enumerate(labels)}
        for lab in labels:
            s = fam_stats[fam][lab]
            fam_rows.append({"option": lab, "family": fam, "weight": (model.weights.get(fam, np.nan) if len(fits) > 1
                                                                       else 1.0), **s})
    fam_table = pd.DataFrame(fam_rows)
    per_family = fam_table[~fam_table["family"].str.startswith("average")]
    spread = {lab: (float(per_family[per_family.option == lab]["p_meet"].min()),
                    float(per_family[per_family.option == lab]["p_meet"].max())) for lab in labels}
    if len(fits) > 1:
        worst = max(labels, key=lambda lab: spread[lab][1] - spread[lab][0])
        lo_, hi_ = spread[worst]
        family_text = (f"Across the {len(fits)} families P(loss <= {target:g}) for {worst} ranges from {lo_:.0%} to "
                       f"{hi_:.0%} (stacking weights: " + ", ".join(f"{k} {v:.2f}" for k, v in model.weights.items())
                       + "). " + ("The families disagree: the averaged numbers weigh each by how well it predicts held-out "
                                  "pilot runs (stacking), so a family with weight near 0 barely counts."
                                  if hi_ - lo_ > 0.2 else "The answer hardly depends on the family."))
    else:
        family_text = (f"Only one family ({main_law.name}) was fitted: pass laws=[...] (CLI --laws) to see how much "
                       "the answer depends on it.")

    # recommended next pilot run
    pilot = first.runs
    cand = _default_candidates(pilot, main_law) if candidates is None else candidates
    try:
        nr = next_runs(model, cand, target=frame, k=1, cost=None if candidates is not None or cost is None else cost,
                       seed=seed, n_outcomes=n_outcomes, max_draws=next_max_draws)
    except BayescaleError as exc:
        nr, next_text, next_info = None, f"No recommendation: {exc}", {}
    if nr is not None:
        best = nr.iloc[0]
        inp_cols = [first.columns.get(n, n) for n in main_law.input_names]
        where = ", ".join(f"{c}={_fmt_size(float(best[c]))}" for c in inp_cols)
        sd0, sd1 = float(best["target_sd"]), float(best["expected_sd_after"])
        narrow = 1 - sd1 / sd0 if sd0 > 0 else 0.0
        next_info = {**{c: float(best[c]) for c in inp_cols}, "cost": float(best["cost"]), "target_sd_now": sd0,
                     "target_sd_after": sd1, "narrowing": narrow, "ess_median": float(best["ess_median"]),
                     "candidates": len(nr)}
        next_text = (f"Train {where} next (cost {best['cost']:.3g}): of {len(nr)} candidate pilot runs it is expected "
                     f"to narrow the options' predicted loss most per unit cost: the posterior sd of log loss at the "
                     f"options (mean-curve uncertainty, averaged over options) is expected to go from {sd0:.4f} to "
                     f"{sd1:.4f} ({narrow:.0%} narrower; importance-sampling ESS {best['ess_median']:.0f}).")
        top = nr.loc[nr["expected_var_reduction"].idxmax()]
        if top["expected_var_reduction"] > best["expected_var_reduction"]:
            where_top = ", ".join(f"{c}={_fmt_size(float(top[c]))}" for c in inp_cols)
            next_info["most_informative"] = {**{c: float(top[c]) for c in inp_cols}, "cost": float(top["cost"]),
                                             "target_sd_after": float(top["expected_sd_after"]),
                                             "narrowing": 1 - float(top["expected_sd_after"]) / sd0 if sd0 > 0 else 0.0}
            next_text += (f" Regardless of cost, the most informative candidate is {where_top} (cost {top['cost']:.3g}):"
                          f" expected sd {float(top['expected_sd_after']):.4f} "
                          f"({next_info['most_informative']['narrowing']:.0%} narrower).")
        if "warning" in nr.attrs:
            next_text += " Caution: " + nr.attrs["warning"]
    gate = _gate(fits)
    bad = [n for n, g in gate.items() if not g["ok"]]
    gate_text = ("All fits passed their diagnostics (r-hat <= 1.01, enough effective draws, no divergences, "
                 "E-BFMI >= 0.3)." if not bad else
                 "WARNING: " + "; ".join(f"the {n} fit failed its diagnostics ({'; '.join(gate[n]['warnings'])})"
                                         for n in bad) + ". The numbers below are not reliable until it is refitted "
                 "(more warm-up and draws) and passes.")
    definitions = ("Predicted loss of the run itself (posterior predictive, run-to-run noise included). "
                   "P(meet) = P(loss <= target). Expected shortfall = E[max(loss - target, 0)], how far above the "
                   "target the run lands on average (0 when it meets it). CVaR 95% = mean loss of the worst 5% of "
                   "outcomes. Compute = 6ND FLOP unless a cost function was given.")
    opt_rows = []
    for lab in labels:
        s = stats_[lab]
        opt_rows.append({"option": lab, **{n: _fmt_size(float(v)) for n, v in opts[lab].items()},
                         "compute": f"{cost_of[lab]:.3g}", "median": f"{s['median']:.4f}",
                         "80% interval": f"{s['lo80']:.4f} - {s['hi80']:.4f}",
                         "95% interval": f"{s['lo95']:.4f} - {s['hi95']:.4f}", "P(meet)": f"{s['p_meet']:.1%}",
                         "expected shortfall": f"{s['expected_shortfall']:.4f}", "CVaR 95%": f"{s['cvar95']:.4f}"})
    tables = {"options": pd.DataFrame(opt_rows)}
    if len(labels) > 1:
        tables["versus"] = pd.DataFrame([{"option": a, **{b: ("" if a == b else f"{versus[a][b]:.1%}") for b in labels}}
                                         for a in labels])
    tables["families"] = pd.DataFrame([{"option": r["option"], "family": r["family"],
                                        "weight": "" if not np.isfinite(r["weight"]) else f"{r['weight']:.2f}",
                                        "median": f"{r['median']:.4f}", "80% interval": f"{r['lo80']:.4f} - {r['hi80']:.4f}",
                                        "P(meet)": f"{r['p_meet']:.1%}"} for _, r in fam_table.iterrows()])
    if nr is not None:
        show = nr.head(5)
        tables["next"] = pd.DataFrame({**{c: [_fmt_size(float(v)) for v in show[c]] for c in inp_cols},
                                       "cost": [f"{v:.3g}" for v in show["cost"]],
                                       "sd now": [f"{v:.4f}" for v in show["target_sd"]],
                                       "expected sd after": [f"{v:.4f}" for v in show["expected_sd_after"]],
                                       "narrowing of the variance": [f"{v:.0%}" for v in show["reduction_frac"]]})
    tables["fits"] = pd.DataFrame([{"family": n, "ok": "yes" if g["ok"] else "NO", "max r-hat": f"{g['max_rhat']:.3f}",
                                    "min bulk ESS": f"{g['min_ess_bulk']:.0f}", "divergences": g["divergences"],
                                    "chains x draws": f"{g['chains']} x {g['draws']}",
                                    "warnings": "; ".join(g["warnings"]) or "-"} for n, g in gate.items()])
    ttl = title or f"Risk report: which run reaches loss {target:g}?"
    summary = {
        "title": ttl, "target_loss": target, "headline_model": headline, "y": first.columns.get("y", "y"),
        "setup": (f"{len(pilot)} pilot runs; headline numbers from the {headline}; {draws.shape[0]} joint posterior "
                  f"predictive draws per option; seed {seed}."),
        "gate": {"ok": not bad, "text": gate_text, "fits": gate},
        "definitions": definitions,
        "options": {lab: {"inputs": opts[lab], "compute": cost_of[lab], **stats_[lab]} for lab in labels},
        "p_beats": versus,
        "families": {fam: st for fam, st in fam_stats.items()},
        "weights": dict(model.weights) if len(fits) > 1 else {main_law.name: 1.0},
        "family_text": family_text,
        "next_run": next_info, "next_run_text": next_text,
        "n_draws": int(draws.shape[0]),
    }
    files = {}
    if out is not None:
        images = {"distributions": _plot_distributions(draws, target, stats_),
                  "families": _plot_families(fam_table, target),
                  "context": _plot_context(pilot, main_law, opts, stats_, cost_of, summary["y"])}
        files = _write(Path(out), summary, tables, images)
        np.savez_compressed(Path(out) / "report_draws.npz", **{"options": np.array(labels), "loss": obs})
        files["draws"] = Path(out) / "report_draws.npz"
    return RiskReport(summary=summary, draws=draws, files=files, fits=fits, model=model, next_runs=nr)


# --------------------------------------------------------------------------------------------------
# Browser check


def chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def check_in_browser(html_path, screenshot=None, timeout: int = 90) -> dict:
    """Load a report in headless Chromium and read back the page's own check: how many images there are, how many
    decoded (``naturalWidth > 0``), how many script errors; optionally save a screenshot.

    Returns ``{"checked", "images", "images_ok", "script_errors", "img_tags_with_data", "returncode"}``.
    Raises FileNotFoundError when no Chromium is installed (Debian: ``apt-get install -y chromium``).
    """
    import subprocess
    import tempfile

    exe = chromium()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install -y chromium)")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]
    url = Path(html_path).resolve().as_uri()
    with tempfile.TemporaryDirectory() as prof:
        dom = subprocess.run([exe, *flags, f"--user-data-dir={prof}", "--virtual-time-budget=5000", "--dump-dom", url],
                             capture_output=True, text=True, timeout=timeout)
    m = re.search(r'id="page-check" data-images="(\d+)" data-images-ok="(\d+)" data-errors="(\d+)"', dom.stdout)
    out = {"returncode": dom.returncode, "checked": bool(m), "images": int(m.group(1)) if m else 0,
           "images_ok": int(m.group(2)) if m else 0, "script_errors": int(m.group(3)) if m else -1,
           "img_tags_with_data": len(re.findall(r'<img[^>]+src="data:image/png;base64,[A-Za-z0-9+/=]{100,}"',
                                                dom.stdout))}
    if screenshot is not None:
        with tempfile.TemporaryDirectory() as prof:
            subprocess.run([exe, *flags, f"--user-data-dir={prof}", "--window-size=1100,2600",
                            f"--screenshot={Path(screenshot).resolve()}", url], capture_output=True, text=True,
                           timeout=timeout)
        out["screenshot"] = str(screenshot)
    return out
