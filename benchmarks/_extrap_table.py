"""Tables and plots of the extrapolation benchmark, from the result files of ``extrapolation.STANDARD``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks._common import Table, load_json, shown

SUITE_ORDER = {"revisiting": 0, "colpret": 1, "chinchilla": 2, "gadre": 3}
DOMAIN_ORDER = {"IC": 0, "NMT": 1, "LM": 2, "BB": 3}
NSL_PFN_IC = (0.0280, 3.330)  # NSL-PFN's IC RMSLE and LL (Lee et al., ICML 2025; published, not rerun here)
# bootstrap baseline per suite/domain for the pooled calibration goal
BOOT_FOR = {"revisiting": "boot:M4", "colpret": "boot:M4", "chinchilla": "boot:chinchilla",
            ("gadre", "loss"): "boot:chinchilla", ("gadre", "downstream"): "boot:downstream"}


def _bayescale(method: str) -> bool:
    return method.startswith("nuts:") or method in ("bma", "pfn")


def load_results(results: Path) -> list[dict]:
    """The result files of every (suite, method) in ``STANDARD`` that ``results`` has."""
    from benchmarks.extrapolation import STANDARD, result_name

    found = (load_json(results / result_name(s, m)) for s, (_, ms) in STANDARD.items() for m in ms)
    return [d for d in found if d is not None]


def _f(v, fmt=".4f", se=None):
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    s = format(v, fmt)
    if se is not None and np.isfinite(se):
        s += f" ± {format(se, fmt)}"
    return s


def _method_key(m: str):
    order = {"nuts": 0, "cal": 0.5, "local": 0.6, "bma": 1, "pfn": 2, "boot": 3, "ls": 4}
    return (order.get(m.split(":")[0], 9), m)


HEADER = ["suite", "domain", "method", "curves", "points", "RMSLE", "LL (data y)", "LL (NSL-PFN units)", "cov 50%",
          "cov 90%", "cov 99%", "MSCE", "width 90%", "CRPS", "fit ok", "s / curve", "suite wall s (CPU s, load avg)",
          "limit"]


def rows_table(res: list[dict]) -> list[list[str]]:
    lines, keyed = [], []
    for d in res:
        for dom, a in d["aggregate"].items():
            if dom == "pooled" and len(d["aggregate"]) == 2:
                continue  # one domain: the pooled row repeats it
            keyed.append(((SUITE_ORDER.get(d["suite"], 9), dom == "pooled", DOMAIN_ORDER.get(dom, 5), dom,
                           _method_key(d["method"])), d, dom, a))
    for _, d, dom, a in sorted(keyed, key=lambda k: k[0]):
        cov = a["coverage"]
        load = d.get("loadavg_start")
        cpu = f"{d['cpu_s']:.0f} CPU s, " if d.get("cpu_s") else ""
        wall = f"{d['wall_s']:.0f} ({cpu}load {load[0]:.1f})" if load else f"{d['wall_s']:.0f}"
        lines.append([
            d["suite"], dom, d["method"], a["curves"], a["points"], _f(a.get("rmsle"), ".4f", a.get("rmsle_se")),
            _f(a.get("ll"), ".3f", a.get("ll_se")), _f(a.get("ll_nsl"), ".3f"), _f(cov["0.5"], ".2f"),
            _f(cov["0.9"], ".2f"), _f(cov["0.99"], ".2f"), _f(a.get("msce"), ".4f", a.get("msce_se")),
            _f(a.get("width90"), ".3g"), _f(a.get("crps"), ".3g"), f"{a['ok_rate']:.0%}", _f(a.get("seconds"), ".1f"),
            wall, d.get("limit") or "all"])
    return lines


def goals(res: list[dict]) -> list[list[str]]:
    by = {(d["suite"], d["method"]): d for d in res}
    lines = []
    r_goal, ll_goal = NSL_PFN_IC
    ic = [(d["method"], d["aggregate"]["IC"]) for d in res
          if d["suite"] == "revisiting" and _bayescale(d["method"]) and "IC" in d["aggregate"]]
    goal = f"IC: best bayescale RMSLE < {r_goal} and LL > {ll_goal} (NSL-PFN)"
    if ic:
        best_r = min(ic, key=lambda x: x[1]["rmsle"])
        best_l = max(ic, key=lambda x: x[1]["ll"])
        both = [m for m, a in ic if a["rmsle"] < r_goal and a["ll"] > ll_goal]
        partial = any(by[("revisiting", m)].get("limit") for m, _ in ic)
        lines.append([goal, f"best RMSLE {best_r[1]['rmsle']:.4f} ({best_r[0]}), best LL {best_l[1]['ll']:.3f} "
                            f"({best_l[0]}){'; some runs with --limit' if partial else ''}",
                      "met by " + ", ".join(both) if both else "not met"])
    else:
        lines.append([goal, "no revisiting results", "not measured"])
    # pooled calibration: bma against the least-squares bootstrap of each suite's default law
    pooled = {}
    for who in ("bma", "boot"):
        n = cov90 = 0.0
        msces, suites = [], set()
        for d in res:
            for dom, a in d["aggregate"].items():
                want = "bma" if who == "bma" else BOOT_FOR.get((d["suite"], dom), BOOT_FOR.get(d["suite"]))
                if dom == "pooled" or d["method"] != want:
                    continue
                n += a["points"]
                cov90 += a["coverage_points"]["0.9"] * a["points"]
                msces += [c["msce"] for c in d["curves"] if c.get("domain") == dom and "msce" in c]
                suites.add(d["suite"])
        pooled[who] = (cov90 / n if n else None, float(np.mean(msces)) if msces else None, sorted(suites), int(n))
    cb, mb, sb, nb = pooled["bma"]
    cs, ms, ss, _ = pooled["boot"]
    if cb is not None:
        lines.append(["pooled 90% coverage of bma in [85%, 95%]", f"{cb:.1%} of {nb} held-out points ({', '.join(sb)})",
                      "met" if 0.85 <= cb <= 0.95 else "not met"])
    if mb is not None and ms is not None:
        lines.append(["pooled MSCE (mean over curves) of bma below the LS bootstrap's", f"bma {mb:.4f} vs bootstrap "
                      f"{ms:.4f} (bootstrap 90% coverage {cs:.1%}; {', '.join(ss)})", "met" if mb < ms else "not met"])
    full = [d for d in res if d["suite"] == "revisiting" and d["method"].startswith("nuts:") and not d.get("limit")
            and not d.get("domain")]
    if not full:
        return lines + [["revisiting suite, one NUTS family, < 10 min", "no full-suite NUTS run", "not measured"]]
    fastest = min(full, key=lambda d: d["wall_s"])
    ld = fastest.get("loadavg_start") or [float("nan")]
    cpu = fastest.get("cpu_s")
    cpu_txt = f", {cpu / 60:.1f} CPU min" if cpu else ""
    lines.append(["revisiting suite, one NUTS family, < 10 min on 2 cores",
                  f"{fastest['method']}: {fastest['wall_s'] / 60:.1f} min wall for "
                  f"{fastest['aggregate']['pooled']['curves']} curves{cpu_txt} (1-minute load average {ld[0]:.1f} at "
                  "its start)",
                  ("met" if fastest["wall_s"] < 600 else "not met (wall)")
                  + ("; CPU time fits" if cpu and fastest["wall_s"] >= 600 and cpu < 1200 else "")])
    lines.append(["(every full revisiting NUTS run)", ", ".join(
        f"{d['method']} {d['wall_s'] / 60:.1f} min wall"
        + (f" ({d['cpu_s'] / 60:.1f} CPU min, load {d['loadavg_start'][0]:.1f})" if d.get("cpu_s") else "")
        for d in sorted(full, key=lambda d: d["wall_s"])), ""])
    return lines


def details(res: list[dict]) -> list[list[str]]:
    """Per method and domain: the PFN weights used, the calibrated taus, bma's mean stacking weights."""
    out = []
    for d in sorted(res, key=lambda d: (SUITE_ORDER.get(d["suite"], 9), _method_key(d["method"]))):
        m = d["method"]
        if m == "pfn" and isinstance(d.get("pfn_weights"), dict):
            w = d["pfn_weights"]
            rc = w.get("recalibration")
            out.append([d["suite"], m, "all", f"weights {w.get('config_name')} at step {w.get('step')} of "
                        f"{w.get('total_steps')} (sha256 {str(w.get('sha256'))[:12]}); "
                        + (f"recalibrated predictive (map fitted on {rc}; no real data)" if rc else
                           "raw network predictive (no recalibration map)")])
        elif m.startswith(("cal:", "local:")):
            taus: dict = {}
            for c in d["curves"]:
                taus.setdefault(c["domain"], c.get("tau"))
            out += [[d["suite"], m, dom, f"tau {t:.3g} per decade" + (" (the larger of the global and the local "
                     "fits')" if m.startswith("local:") else "")] for dom, t in taus.items() if t is not None]
        elif m == "bma":
            acc: dict = {}
            for c in d["curves"]:
                for k, v in c.get("weights", {}).items():
                    acc.setdefault(c["domain"], {}).setdefault(k, []).append(v)
            out += [[d["suite"], m, dom, "mean stacking weights " + ", ".join(f"{k} {np.mean(v):.2f}"
                                                                              for k, v in ws.items())]
                    for dom, ws in acc.items()]
    return out


def tables(results: Path) -> list[Table]:
    from benchmarks.extrapolation import STANDARD_COMMAND

    res = load_results(results)
    if not res:
        return []
    dates = sorted(d["date"] for d in res)
    commands = {d["command"] for d in res}
    history = ""
    if len(commands) != 1 or "--standard" not in next(iter(commands)):
        history = (f"{len(commands)} commands run between {dates[0]} and {dates[-1]} (each file's `command` says "
                   "which)")
    cmd = STANDARD_COMMAND if history else next(iter(commands))
    m = res[0]["machine"]
    src = (f"{m['cpu_model']}, {m['cpu_count']} cores, JAX {m['jax']} on {m['backend']}, bayescale {m['bayescale']}; "
           f"{len(res)} result files {shown(results)}/<suite>__<method>.json")
    return [Table("extrapolation", cmd, src, HEADER, rows_table(res), history),
            Table("extrapolation_goals", cmd, src, ["goal", "measured", "met?"], goals(res), history),
            Table("extrapolation_details", cmd, src, ["suite", "method", "domain", "detail"], details(res), history)]


def plots(results: Path, res: list[dict]) -> list[str]:
    """One PNG per suite/domain: a few curves, context and held-out runs, median and 90% band per method."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.extrapolation import cache_path, grid_for, load_suite

    cache = results / "cache"
    methods_by_suite: dict = {}
    for d in res:
        methods_by_suite.setdefault(d["suite"], set()).add(d["method"])
    out = []
    for suite in sorted(methods_by_suite, key=lambda s: SUITE_ORDER.get(s, 9)):
        if not cache.exists():
            break
        ms = methods_by_suite[suite]
        pref = [m for m in ("bma", "nuts:M4", "nuts:chinchilla", "nuts:downstream", "boot:M4", "boot:chinchilla",
                            "boot:downstream", "pfn") if m in ms]
        tasks = load_suite(suite)
        domains = sorted({t.domain for t in tasks}, key=lambda x: DOMAIN_ORDER.get(x, 5))
        for dom in domains:
            ts = [t for t in tasks if t.domain == dom]
            ts = [t for t in ts if any(cache_path(cache, suite, m.replace(":", "-") if not m.startswith("nuts:")
                                                  else m[5:], t).exists() for m in pref)]
            ts = [ts[i] for i in sorted({round(v) for v in np.linspace(0, len(ts) - 1, min(3, len(ts)))})] if ts else ts
            if not ts:
                continue
            fig, axes = plt.subplots(1, len(ts), figsize=(4.6 * len(ts), 3.6), squeeze=False)
            for ax, t in zip(axes[0], ts):
                xin = "x" if "x" in t.inputs else ("C" if "C" in t.inputs else t.inputs[0])
                grid = grid_for(t)
                # one-input curves: show the upper half of the fitted range and the extrapolation
                x_lo = float(np.quantile(t.ctx[xin], 0.5)) if grid is not None else 0.0
                keep = (grid["x"] >= x_lo).to_numpy() if grid is not None else None
                c = t.ctx[t.ctx[xin] >= x_lo]
                ax.plot(c[xin], c["y"], "k.", ms=4, label="fitted runs")
                ax.plot(t.tgt[xin], t.tgt["y"], "x", color="tab:red", ms=3, alpha=0.6, zorder=5, label="held out")
                keys = [(m, m[5:] if m.startswith("nuts:") else m.replace(":", "-")) for m in pref]
                shown = [(m, k) for m, k in keys if cache_path(cache, suite, k, t).exists()][:3]
                for j, (m, key) in enumerate(shown):
                    z = np.load(cache_path(cache, suite, key, t))
                    col = f"C{j}"
                    if grid is not None and "grid_draws" in z and z["grid_draws"].size:
                        q = np.quantile(z["grid_draws"], [0.05, 0.5, 0.95], axis=0)[:, keep]
                        gx = grid["x"].to_numpy()[keep]
                        ax.plot(gx, q[1], color=col, lw=1.2, label=f"{m} median")
                        ax.fill_between(gx, q[0], q[2], color=col, alpha=0.18, label=f"{m} 90%")
                    elif "tgt_q" in z:
                        q = z["tgt_q"]
                        off = 1.0 + 0.03 * (j - 1)
                        ax.errorbar(t.tgt[xin] * off, q[1], yerr=[q[1] - q[0], q[2] - q[1]], fmt="o", ms=3,
                                    color=col, capsize=2, label=f"{m} median, 90%")
                ax.set_xscale("log")
                ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
                ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
                if suite != "gadre" or dom != "downstream":
                    ax.set_yscale("log")
                ax.set_title(t.curve if len(t.curve) < 40 else t.curve[:38] + "…", fontsize=8)
                ax.set_xlabel(xin)
            axes[0][0].set_ylabel("y")
            axes[0][-1].legend(fontsize=6)
            fig.suptitle(f"{suite} / {dom}", fontsize=9)
            fig.tight_layout()
            name = f"extrapolation_{suite}_{dom}.png".replace("/", "_")
            fig.savefig(results / name, dpi=110)
            plt.close(fig)
            out.append(name)
    return out
