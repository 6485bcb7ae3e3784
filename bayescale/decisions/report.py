"""Risk report rendering: which big run to fund, and how sure we are, as a page, a summary and data files.

:func:`risk_report` fits the law(s) to the pilot runs (or takes fits), computes the numbers
(:func:`bayescale.decisions.risk.assess_risk`: per option the predicted loss of the run, P(loss <= target), the
expected shortfall, CVaR; P(option A beats option B); the sensitivity to the law family; the diagnostics gate and
the next pilot run) and, with ``out``, writes them (:func:`write_report`):

- ``report.html``: a self-contained page (plots embedded as base64 PNG, no external resources) that checks itself
  on load (:func:`check_in_browser` reads that check back in headless Chromium);
- ``report.md``: the same summary in Markdown;
- ``report.json``: every number, for scripts;
- ``report_draws.npz``: the joint loss draws per option.

This module only renders: every number comes from the :class:`~bayescale.decisions.risk.RiskReport`.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from bayescale.runs import default_cost
from bayescale.decisions.next_runs import SearchOptions
from bayescale.decisions.risk import RiskReport, assess_risk, check_target_loss, fit_families, format_size
from bayescale.errors import BayescaleError
from bayescale.sampler import SamplerSettings

__all__ = ["check_in_browser", "chromium", "risk_report", "write_report"]


def risk_report(runs=None, law="chinchilla", *, options, target_loss: float, x=None, inputs=None, y: str = "loss",
                laws=None, fits: dict | None = None, out=None, candidates=None, cost=None, seed: int = 0,
                sampler: SamplerSettings | None = None, n_draws: int = 4000,
                search: SearchOptions = SearchOptions(), title: str | None = None) -> RiskReport:
    """Fit, predict the ``options`` and write ``report.html``/``report.md``/``report.json`` into ``out``.

    Parameters
    ----------
    runs : DataFrame or str, optional
        The pilot runs (DataFrame or CSV/Parquet) with ``x``/``inputs`` and ``y`` as for :func:`bayescale.fit`.
    law, laws : str or Law
        The family, or several (``laws``: the headline numbers then come from their stacking average).
    options : list or dict
        Planned runs: specs like ``"70B,1.4T"`` (see :func:`~bayescale.decisions.risk.parse_option`) or a dict
        ``{label: spec}``.
    target_loss : float
        The loss the big run must reach.
    fits : dict, optional
        ``{name: Fit}``, already fitted to the same runs, instead of fitting.
    out : str or Path, optional
        Folder to write the files into; None computes without writing.
    candidates, cost
        Pilot runs to consider for the next-run recommendation (default: a grid from the smallest pilot run to 4x
        the largest per input) and the options' cost function (default 6ND,
        :func:`~bayescale.decisions.allocation.default_cost`).
    seed : int
        Seeds the fits, the draws and the recommendation.
    sampler : SamplerSettings, optional
        NUTS settings for every family (default: each law's, 4 chains of 1000 warm-up and 1000 draws).
    n_draws : int
        Joint posterior predictive draws per option.
    search : SearchOptions
        How the next-run recommendation searches (simulated outcomes, posterior draws; see
        :class:`~bayescale.decisions.next_runs.SearchOptions`).
    title : str, optional
        The report's title.

    Returns
    -------
    RiskReport
        The numbers (:func:`~bayescale.decisions.risk.assess_risk`), with ``files`` the paths written.
    """
    check_target_loss(target_loss)  # before any fitting
    if out is not None:
        _out_folder(out)
    if fits is None:
        fits = fit_families(runs, law, laws, x=x, inputs=inputs, y=y, seed=seed, sampler=sampler)
    rep = assess_risk(fits, options, target_loss, candidates=candidates, cost=cost, seed=seed, n_draws=n_draws,
                      search=search, title=title)
    if out is not None:
        rep.files = write_report(rep, out)
    return rep


def _out_folder(out) -> Path:
    """``out`` as a Path if it is a folder or does not exist yet; an existing file is an error."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise BayescaleError(f"report folder {str(out)!r} is an existing file; the report writes several files "
                             "(report.html, report.md, report.json, report_draws.npz) into a folder: name a new or "
                             "existing folder")
    return out


def write_report(rep: RiskReport, out) -> dict:
    """Write ``rep`` into the folder ``out``: ``report.html``, ``report.md``, ``report.json`` and
    ``report_draws.npz``.

    Parameters
    ----------
    rep : RiskReport
        What :func:`~bayescale.decisions.risk.assess_risk` computed.
    out : str or Path
        The folder (created if missing).

    Returns
    -------
    dict
        The paths written: ``{"html", "md", "json", "draws"}``.
    """
    out = _out_folder(out)
    s = rep.summary
    images = {"distributions": _plot_distributions(rep.draws, s["target_loss"], s["options"]),
              "families": _plot_families(rep.families, s["target_loss"]),
              "context": _plot_context(rep.runs, rep.law, s["options"], s["y"])}
    files = _write(out, s, _tables(rep), images)
    np.savez_compressed(out / "report_draws.npz", options=np.array(list(rep.draws.columns)),
                        loss=rep.draws.to_numpy())
    files["draws"] = out / "report_draws.npz"
    return files


# --------------------------------------------------------------------------------------------------
# Tables (formatted)


ERROR_TEXT = ("Beyond the pilot runs every band carries the law's extrapolation error, exp(tau b^gamma z) on the "
              "mean curve (b: decades beyond the runs): a prior learned from real scaling curves (bayescale/"
              "error_model.py), updated with the leave-future-out errors of these runs (each family's largest runs "
              "predicted by refits to the rest). The table shows that evidence.")


ALLOCATION_TEXT = ("At each option's compute, the split between parameters N and tokens D that minimises the loss "
                   "(the posterior of N* per draw: bayescale.compute_optimal). An option outside the 80% interval of "
                   "N* spends its compute on a model larger or smaller than the runs support.")


def _tables(rep: RiskReport) -> dict:
    s = rep.summary
    labels = list(s["options"])
    opt_rows = []
    for lab, o in s["options"].items():
        opt_rows.append({"option": lab, **{n: format_size(float(v)) for n, v in o["inputs"].items()},
                         "compute": f"{o['compute']:.3g}", "median": f"{o['median']:.4f}",
                         "80% interval": f"{o['lo80']:.4f} - {o['hi80']:.4f}",
                         "95% interval": f"{o['lo95']:.4f} - {o['hi95']:.4f}", "P(meet)": f"{o['p_meet']:.1%}",
                         "expected shortfall": f"{o['expected_shortfall']:.4f}", "CVaR 95%": f"{o['cvar95']:.4f}"})
    tables = {"options": pd.DataFrame(opt_rows)}
    if len(labels) > 1:
        versus = s["p_beats"]
        tables["versus"] = pd.DataFrame([{"option": a, **{b: ("" if a == b else f"{versus[a][b]:.1%}") for b in labels}}
                                         for a in labels])
    tables["families"] = pd.DataFrame([{"option": r["option"], "family": r["family"],
                                        "weight": "" if not np.isfinite(r["weight"]) else f"{r['weight']:.2f}",
                                        "median": f"{r['median']:.4f}", "80% interval": f"{r['lo80']:.4f} - {r['hi80']:.4f}",
                                        "P(meet)": f"{r['p_meet']:.1%}"} for _, r in rep.families.iterrows()])
    if rep.next_runs is not None:
        show = rep.next_runs.head(5)
        tables["next"] = pd.DataFrame({**{c: [format_size(float(v)) for v in show[c]] for c in rep.input_columns},
                                       "cost": [f"{v:.3g}" for v in show["cost"]],
                                       "sd now": [f"{v:.4f}" for v in show["target_sd"]],
                                       "expected sd after": [f"{v:.4f}" for v in show["expected_sd_after"]],
                                       "narrowing of the variance": [f"{v:.0%}" for v in show["reduction_frac"]]})
    alloc = (s.get("allocation") or {}).get("options") or {}
    if alloc:
        tables["allocation"] = pd.DataFrame([{
            "option": lab, "N": format_size(a["N"]), "tokens per parameter": f"{a['tokens_per_param']:.3g}",
            "compute-optimal N* (80%)": f"{format_size(a['N_opt'])} [{format_size(a['N_opt_lo80'])}, "
                                        f"{format_size(a['N_opt_hi80'])}]",
            "its tokens per parameter (80%)": f"{a['tokens_per_param_opt']:.3g} [{a['tokens_per_param_opt_lo80']:.3g}, "
                                              f"{a['tokens_per_param_opt_hi80']:.3g}]",
            "the option is": a["verdict"]} for lab, a in alloc.items()])
    ev = s.get("extrapolation_error", {})
    tables["error"] = pd.DataFrame([{
        "family": n, "tau (median, 90%)": (f"{e['tau']:.3g} [{e['tau_lo90']:.3g}, {e['tau_hi90']:.3g}]" if "tau" in e
                                          else e["text"]),
        "growth b^gamma": f"{e['gamma']:.2f}" if "gamma" in e else "-", "from": e.get("method", "-"),
        "own runs predicted beyond the rest": e.get("own_runs", "-"),
        "their rms ln error": "-" if e.get("own_rms_ln_error") is None else f"{e['own_rms_ln_error']:.4f}",
        "furthest (decades beyond)": "-" if e.get("own_max_beyond") is None else f"{e['own_max_beyond']:.2f}",
    } for n, e in ev.items()])
    tables["fits"] = pd.DataFrame([{"family": n, "ok": "yes" if g["ok"] else "NO", "max r-hat": f"{g['max_rhat']:.3f}",
                                    "min bulk ESS": f"{g['min_ess_bulk']:.0f}", "divergences": g["divergences"],
                                    "chains x draws": f"{g['chains']} x {g['draws']}",
                                    "warnings": "; ".join(g["warnings"]) or "-"} for n, g in s["gate"]["fits"].items()])
    return tables


# --------------------------------------------------------------------------------------------------
# Plots (PNG bytes)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure  # defer loading matplotlib

    fig = Figure(figsize=(width, height))
    return fig, fig.subplots()


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _plot_distributions(draws: pd.DataFrame, target: float, options: dict) -> bytes:
    fig, ax = _figure(7, 3.8)
    lo = min(draws.quantile(0.002).min(), target)
    hi = max(draws.quantile(0.998).max(), target)
    bins = np.linspace(lo - 0.02 * (hi - lo), hi + 0.02 * (hi - lo), 70)
    for i, name in enumerate(draws.columns):
        ax.hist(draws[name], bins=bins, density=True, alpha=0.45, color=f"C{i}",
                label=f"{name}: P(loss <= target) = {options[name]['p_meet']:.0%}")
        ax.axvline(options[name]["median"], color=f"C{i}", lw=1.2)
    ax.axvline(target, color="k", ls="--", lw=1.5, label=f"target {target:g}")
    ax.set_xlabel("predicted loss of the run")
    ax.set_ylabel("density")
    ax.set_title("Predicted loss per option (posterior predictive; lines: medians)", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _plot_families(table: pd.DataFrame, target: float) -> bytes:
    options = list(dict.fromkeys(table["option"]))
    families = list(dict.fromkeys(table["family"]))
    fig, ax = _figure(7, 0.6 + 0.45 * len(options) * len(families))
    y, ticks, labels = 0, [], []
    for oi, opt in enumerate(options):
        for fam in families:
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


def _plot_context(runs: pd.DataFrame, law, options: dict, y_name: str) -> bytes:
    fig, ax = _figure(7, 3.8)
    nd = set(law.input_names) == {"N", "D"}
    xr_ = default_cost(runs["N"], runs["D"]) if nd else runs[law.input_names[0]]
    ax.plot(xr_, runs["y"], ".", color="0.4", ms=4, label=f"pilot runs ({len(runs)})")
    for i, (name, o) in enumerate(options.items()):
        ax.errorbar([o["compute"]], [o["median"]], yerr=[[o["median"] - o["lo95"]], [o["hi95"] - o["median"]]],
                    fmt="o", color=f"C{i}", elinewidth=1.2, capsize=3, label=f"{name} (95% interval)")
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
    if "allocation" in tables:
        md += ["## Compute-optimal split", "", ALLOCATION_TEXT, "", f"N*: {summary['allocation']['note']}.", "",
               _md_table(tables["allocation"]), ""]
    md += ["## Next pilot run", "", summary["next_run_text"], ""]
    if "next" in tables:
        md += [_md_table(tables["next"]), ""]
    md += ["## Extrapolation error", "", ERROR_TEXT, "", _md_table(tables["error"]), ""]
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
    if "allocation" in tables:
        body += ["<h2>Compute-optimal split</h2>", f"<p>{html.escape(ALLOCATION_TEXT)}</p>",
                 f"<p class=note>N*: {html.escape(summary['allocation']['note'])}.</p>",
                 _html_table(tables["allocation"])]
    body += ["<h2>Next pilot run</h2>", f"<p>{html.escape(summary['next_run_text'])}</p>"]
    if "next" in tables:
        body.append(_html_table(tables["next"]))
    body += ["<h2>Extrapolation error</h2>", f"<p>{html.escape(ERROR_TEXT)}</p>", _html_table(tables["error"])]
    body += ["<h2>Fits</h2>", _html_table(tables["fits"]), '<div id="page-check">page check did not run</div>', _JS_CHECK]
    page = (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(summary['title'])}</title>"
            f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{_CSS}</style>{_JS_HEAD}</head>"
            f"<body>{''.join(body)}</body></html>")
    (out / "report.html").write_text(page)
    return {"html": out / "report.html", "md": out / "report.md", "json": out / "report.json"}


# --------------------------------------------------------------------------------------------------
# Browser check


def chromium() -> str | None:
    """Path of a Chromium/Chrome executable, or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def check_in_browser(html_path, screenshot=None, timeout: int = 90) -> dict:
    """Load a report in headless Chromium and read back the page's own check: how many images there are, how many
    decoded (``naturalWidth > 0``), how many script errors; optionally save a screenshot.

    Returns ``{"checked", "images", "images_ok", "script_errors", "img_tags_with_data", "returncode"}``.
    Raises FileNotFoundError when no Chromium is installed (Debian: ``apt-get install -y chromium``).
    """
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
