"""Honest bands beyond the data: the corpus-learned extrapolation error, scored leave-one-suite-out.

Six real suites (bundled, :mod:`bayescale.datasets`), each curve split into fit runs and the runs to predict:

- ``revisiting``: Alabdulmohsin et al. 2022, official split, up to ``--per-domain`` curves per domain (M4);
- ``colpret``: ColPret loss curves, fit the first half (M4), every ``COLPRET_EVERY``-th curve;
- ``chinchilla``: fit compute < 1e21 FLOP, predict the 23 larger runs (chinchilla law);
- ``gadre``: per corpus fit N <= 411M, predict 1.4B and 6.9B (chinchilla law on loss, loss -> error law);
- ``datablations``: repeated-data curves, fit tokens <= half the last, predict the rest (M4);
- ``multipower``: loss vs step under nine learning-rate schedules, fit steps <= half the last (M4).

Stage ``fits`` (slow, cached under ``benchmarks/results/cache/honest/``): one NUTS fit per curve (4 chains x 300
warm-up + 300 draws), keeping the mean-curve draws at the fit and target runs, the least-squares bootstrap, and the
peer's draws at the target runs.
Stage ``fits`` also gives every cached fit its own leave-future-out errors (:func:`bayescale.calibration.own_errors`,
refits with the same NUTS settings; a user's fit refits with 2 chains, whose errors match 4 chains' to within Monte
Carlo noise: ``benchmarks/own_errors.py``).
Stage ``score`` (fast): for each suite left out (each of revisiting's four domains counts as a suite: nine in all),
:func:`bayescale.error_model.learn` on the other suites'
held-out errors, then every method's bands on the left-out suite: ``default`` (the learned prior updated with the
curve's own leave-future-out errors, what :func:`bayescale.fit` does), ``default, pooled per domain`` (the
prior updated with the own errors of every curve of the curve's domain in the left-out suite, through the offset
they share: :meth:`bayescale.FitMany.pool_errors`), ``prior only`` (no update), ``raw`` (no
extrapolation error), ``per-domain tau`` (today's :func:`bayescale.calibrate` estimator on the same held-out errors
of the fit runs, pooled per domain), ``boot`` (least-squares bootstrap of the same law), and the peer a user would
pick instead, ``simple-scaling-laws`` (its default law and ``new-run`` bands, :mod:`benchmarks._peer`; the ``bench``
extra installs it; skipped with a note when absent). No suite's targets ever set a setting used to score that suite.

    python -m benchmarks.honest_bands --stage fits          # 75-90 min on 2 cores with refits, peer; resumable
    python -m benchmarks.honest_bands --stage score         # the tables, from the cache
    python -m benchmarks.honest_bands --stage ship          # the package's error model, learned on all six suites
    python -m benchmarks.honest_bands --stage self-check    # the scores and the peer's adapter on known cases

``--likelihood logstudentt`` does the same with robust multiplicative noise (``ln y ~ StudentT(4, ln mu, s)``,
``bs.fit``'s default since 2026-12-06), cached apart; its table is ``honest_bands_logstudentt``. Without it the
fits are lognormal (the default before), whose tables and cache keep the unsuffixed names.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._common import NOISE_MODELS, RESULTS, output_args, publish, save_json, suffix, thin_log

DF = 4.0
SUITES = ("revisiting", "colpret", "chinchilla", "gadre", "datablations", "multipower")
NUTS = dict(chains=4, warmup=300, samples=300)
KEEP = 600  # posterior draws kept per curve
COLPRET_EVERY = 8
MAX_CTX, MAX_TGT = 40, 20  # long curves thinned (log-spaced) to this many fit / target points
LEVELS = (0.5, 0.8, 0.9, 0.95)
# distance beyond the fitted runs (decades) of the by-distance table: fixed edges, the same for every suite
PEER = "simple-scaling-laws"  # the peer's method name (benchmarks/_peer.py)
FLEET = "default, pooled per domain"  # FitMany.pool_errors over the left-out suite's curves of one domain
DISTANCE_BINS = (("inside", 0.0, 0.0), ("0-0.1", 0.0, 0.1), ("0.1-0.2", 0.1, 0.2), ("> 0.2", 0.2, np.inf))


def cache_dir(likelihood: str) -> Path:
    return RESULTS / "cache" / f"honest{suffix(likelihood)}"


def command(likelihood: str) -> str:
    opt = "" if likelihood == "lognormal" else f" --likelihood {likelihood}"
    return f"python -m benchmarks.honest_bands --stage score{opt}"


def tasks(suite: str, per_domain: int = 20) -> list[dict]:
    """The curves of a suite: dicts with domain, curve, law, ctx, tgt (inputs + y)."""
    import bayescale as bs

    out = []
    if suite == "revisiting":
        r = bs.datasets.revisiting()
        seen: dict = {}
        for c, d in r.groupby("curve", sort=True):
            dom = d["domain"].iloc[0]
            seen[dom] = seen.get(dom, 0) + 1
            if seen[dom] > per_domain:
                continue
            d = d.sort_values("x")
            out.append(dict(domain=dom, curve=c, law="M4", ctx=d[d.train][["x", "y"]], tgt=d[~d.train][["x", "y"]]))
    elif suite == "colpret":
        r = bs.datasets.colpret().rename(columns={"tokens": "x", "loss": "y"})
        for i, (c, d) in enumerate(r.groupby("curve", sort=True)):
            if i % COLPRET_EVERY:
                continue
            d = d.sort_values("x")
            out.append(dict(domain="ColPret", curve=str(c), law="M4",
                            ctx=thin_log(d[d.context][["x", "y"]], "x", MAX_CTX),
                            tgt=thin_log(d[~d.context][["x", "y"]], "x", MAX_TGT)))
    elif suite == "chinchilla":
        r = bs.datasets.chinchilla().rename(columns={"loss": "y"})
        cols = ["N", "D", "y"]
        out.append(dict(domain="Chinchilla", curve="chinchilla", law="chinchilla", ctx=r[r.C < 1e21][cols],
                        tgt=r[r.C >= 1e21][cols]))
    elif suite == "gadre":
        g = bs.datasets.gadre_downstream()
        for corpus, d in g.groupby("dataset", sort=True):
            small = d["N"] <= 4.2e8
            loss = d[["N", "D", "loss"]].rename(columns={"loss": "y"})
            out.append(dict(domain="loss", curve=corpus, law="chinchilla", ctx=loss[small], tgt=loss[~small]))
            err = pd.DataFrame({"L": d["loss"], "y": d["err"]})
            out.append(dict(domain="downstream", curve=corpus, law="downstream", ctx=err[small], tgt=err[~small]))
    elif suite in ("datablations", "multipower"):  # loss vs tokens (steps): fit up to half the last, predict the rest
        r = (bs.datasets.datablations().rename(columns={"tokens": "x", "loss": "y"}) if suite == "datablations"
             else bs.datasets.multipower().rename(columns={"step": "x", "loss": "y"}))
        for c, d in r.groupby("curve", sort=True):
            fit = d["x"] <= d["x"].max() / 2
            out.append(dict(domain=suite, curve=c, law="M4", ctx=thin_log(d[fit][["x", "y"]], "x", MAX_CTX),
                            tgt=thin_log(d[~fit][["x", "y"]], "x", MAX_TGT)))
    else:
        raise SystemExit(f"unknown suite {suite!r}; choose one of {', '.join(SUITES)}")
    for t in out:
        t["suite"] = suite
        t["ctx"], t["tgt"] = t["ctx"].reset_index(drop=True), t["tgt"].reset_index(drop=True)
    return out


def _file(t: dict, likelihood: str, peer: bool = False) -> Path:
    """A curve's cached fit; ``peer``: its cached ``simple-scaling-laws`` draws (the same for every likelihood)."""
    import re

    name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{t['domain']}__{t['curve']}")
    return (cache_dir("lognormal") / "peer" if peer else cache_dir(likelihood)) / t["suite"] / (name + ".npz")


def stage_peer(suites, seed: int, per_domain: int) -> None:
    """``simple-scaling-laws``' new-run draws at each curve's held-out runs, cached (cached curves are skipped)."""
    from benchmarks import _peer

    version = _peer.version()
    if version is None:
        print(f"{_peer.NAME} is not installed (pip install -e '.[bench]'): its row is left out", file=sys.stderr)
        return
    for suite in suites:
        for t in tasks(suite, per_domain):
            p = _file(t, "lognormal", peer=True)
            if p.exists():
                continue
            t0 = time.perf_counter()
            inputs = [c for c in t["ctx"].columns if c != "y"]
            try:
                draws = _peer.peer_draws(t["ctx"], t["tgt"], inputs, seed)
            except LookupError:     # not a size law (the loss -> error link): no peer row for this curve
                draws = np.zeros((0, len(t["tgt"])))
            p.parent.mkdir(parents=True, exist_ok=True)
            secs = time.perf_counter() - t0
            np.savez_compressed(p, draws=draws.astype(np.float32), version=version, seconds=secs)
            print(f"  {suite} {t['curve']} ({_peer.NAME}): {secs:.1f} s", file=sys.stderr, flush=True)


def _refit(law, likelihood: str):
    """``refit(runs, seed) -> fit``: the benchmark's NUTS fit of ``law`` (the fits, and the package's own
    leave-future-out refits, :func:`bayescale.calibration.own_errors`, with the same settings)."""
    import bayescale as bs

    names = list(law.input_names)
    return lambda runs, seed: bs.fit(runs, law, inputs={k: k for k in names}, y="y", seed=seed, progress=False,
                                     likelihood=likelihood, df=DF, **NUTS)


def _add_own_errors(suite: str, likelihood: str, seed: int) -> None:
    """Each cached fit of ``suite`` gets its own leave-future-out errors (the package's refits, with the
    benchmark's NUTS settings), where it lacks them."""
    import bayescale as bs
    from bayescale import calibration

    for p in sorted((cache_dir(likelihood) / suite).glob("*.npz")):
        z = dict(np.load(p, allow_pickle=False))
        if "own" in z:
            continue
        t0 = time.perf_counter()
        law = bs.get_law(str(z["law"]))
        ctx = pd.DataFrame(z["ctx"], columns=[str(v) for v in z["inputs"]] + ["y"])
        own, how = calibration.own_errors(law, ctx, _refit(law, likelihood), seed=seed + 7919)
        np.savez_compressed(p, **z, own=own[["r", "s", "beyond", "block"]].to_numpy(float).reshape(-1, 4),
                            own_how=how)
        print(f"  {suite} {z['curve']}: own errors {time.perf_counter() - t0:.1f} s ({how})", file=sys.stderr,
              flush=True)


def stage_fits(suites, seed: int, per_domain: int, likelihood: str) -> None:
    """One NUTS fit and one least-squares bootstrap per curve, cached (curves already cached are skipped). The
    bootstrap does not depend on the likelihood: only the lognormal cache runs it."""
    import bayescale as bs
    from benchmarks._extrap_ls import boot_predictive

    for suite in suites:
        todo = [t for t in tasks(suite, per_domain) if not _file(t, likelihood).exists()]
        print(f"{suite}: {len(todo)} curves to fit", file=sys.stderr, flush=True)
        for law_name in sorted({t["law"] for t in todo}):
            group = [t for t in todo if t["law"] == law_name]
            law = bs.get_law(law_name)
            names = list(law.input_names)
            for t in group:
                t0 = time.perf_counter()
                f = _refit(law, likelihood)(t["ctx"], seed)
                pd_ = f.posterior_draws(max_draws=KEEP, seed=seed)
                mu_ctx = pd_.mean(t["ctx"][names])
                mu_tgt = pd_.mean(t["tgt"][names])
                boot_log_mu, boot_sigma = np.zeros((0, len(t["tgt"]))), np.zeros(0)
                try:
                    if likelihood != "lognormal":
                        raise LookupError
                    boot = boot_predictive(law, t["ctx"], t["tgt"], seed, n_boot=100)
                    boot_log_mu, boot_sigma = boot["log_mu"], boot["sigma"]
                except LookupError:
                    pass
                except RuntimeError as exc:
                    print(f"  boot failed on {t['curve']}: {exc}", file=sys.stderr)
                p = _file(t, likelihood)
                p.parent.mkdir(parents=True, exist_ok=True)
                np.savez_compressed(
                    p, suite=t["suite"], domain=t["domain"], curve=t["curve"], law=law_name,
                    inputs=np.array(names), ctx=t["ctx"][names + ["y"]].to_numpy(float),
                    tgt=t["tgt"][names + ["y"]].to_numpy(float), mu_ctx=mu_ctx, mu_tgt=mu_tgt, sigma=pd_.sigma,
                    ok=f.ok, likelihood=likelihood, boot_log_mu=boot_log_mu, boot_sigma=boot_sigma,
                    seconds=time.perf_counter() - t0)
                print(f"  {suite} {t['curve']}: {time.perf_counter() - t0:.1f} s ok={f.ok}", file=sys.stderr,
                      flush=True)
        _add_own_errors(suite, likelihood, seed)
    stage_peer(suites, seed, per_domain)


# -- stage score: every curve's held-out errors and bands under each method --------------------------------------
def load_cache(likelihood: str = "lognormal", suites=SUITES) -> list[dict]:
    """The cached fits of ``likelihood`` as dicts with what scoring needs (computed with the package's own
    functions)."""
    import bayescale as bs
    from bayescale import error_model, noise
    from bayescale.runs import distance_beyond, fitted_span, scales_for

    out = []
    for suite in suites:
        for p in sorted((cache_dir(likelihood) / suite).glob("*.npz")):
            z = np.load(p, allow_pickle=False)
            law = bs.get_law(str(z["law"]))
            names = [str(v) for v in z["inputs"]]
            ctx = pd.DataFrame(z["ctx"], columns=names + ["y"])
            tgt = pd.DataFrame(z["tgt"], columns=names + ["y"])
            mu_t, sig = z["mu_tgt"], z["sigma"]
            if (tgt["y"] <= 0).any() or (ctx["y"] <= 0).any():
                continue
            scales = scales_for(law, ctx)
            yc = ctx["y"].to_numpy(float)
            if "own" not in z:
                raise SystemExit(f"{p} has no own leave-future-out errors: run `--stage fits` (it adds them)")
            own, how = pd.DataFrame(z["own"], columns=["r", "s", "beyond", "block"]), str(z["own_how"])
            lmu = np.log(mu_t)
            yt = tgt["y"].to_numpy(float)
            sd_t = noise.log_sd(likelihood, mu_t, sig[:, None], DF)
            heldout = error_model.heldout_errors(yt, lmu, sd_t, distance_beyond(law, tgt, scales))
            pp = _file(dict(suite=suite, domain=str(z["domain"]), curve=str(z["curve"])), likelihood, peer=True)
            peer = np.load(pp) if pp.exists() else None
            out.append(dict(suite=suite, unit=left_out_unit(suite, str(z["domain"])), domain=str(z["domain"]),
                            curve=str(z["curve"]), law=law.name,
                            family=law.name, y=yt, log_mu=lmu, sigma=sig, beyond=heldout["beyond"].to_numpy(),
                            heldout=heldout, own=own, own_how=how, span=fitted_span(law, scales),
                            noise=error_model.noise_level(likelihood, yc, sig, DF), ok=bool(z["ok"]),
                            df=None if likelihood == "lognormal" else DF,
                            boot_log_mu=z["boot_log_mu"], boot_sigma=z["boot_sigma"],
                            peer_draws=None if peer is None else peer["draws"].astype(float),
                            peer_version=None if peer is None else str(peer["version"])))
    return out


def left_out_unit(suite: str, domain: str) -> str:
    """What is left out together: a suite, or one domain of the revisiting suite (its domains are separate
    collections of curves, so each counts as a suite, as issue 16 asks)."""
    return f"revisiting {domain}" if suite == "revisiting" else suite


def corpus(curves: list[dict]) -> pd.DataFrame:
    """The held-out errors of ``curves`` as :func:`bayescale.error_model.learn` takes them."""
    rows = []
    for c in curves:
        tag = dict(curve=f"{c['suite']}/{c['domain']}/{c['curve']}", family=c["family"], span=c["span"],
                   noise=c["noise"], suite=c["unit"])
        rows.append(c["heldout"].assign(kind="target", **tag))
        if len(c["own"]):
            rows.append(c["own"][["r", "s", "beyond", "block"]].astype(float).assign(kind="own", **tag))
    return pd.concat(rows, ignore_index=True)


def _scores(y, log_mu, sigma, rng, df=None, beyond=None) -> dict:
    """:func:`_draw_scores` of lognormal-mixture predictions (components ``log_mu`` (S, m), ``sigma`` (S,);
    log-Student-t components with ``df``) of the targets ``y``, with their exact log density."""
    from bayescale import scoring

    eps = rng.standard_normal(log_mu.shape) if df is None else rng.standard_t(df, log_mu.shape)
    return _draw_scores(y, np.exp(log_mu + sigma[:, None] * eps), beyond,
                        ll=scoring.lognormal_mixture_logpdf(y, log_mu, sigma, df=df))


def _draw_scores(y, draws, beyond=None, ll=None) -> dict:
    """Coverage, log density, RMSLE and CRPS of predictive draws ``(S, m)`` of the targets ``y``. ``ll``: the
    targets' log densities when known, else a Gaussian kernel density estimate of each point's draws (Scott's
    bandwidth). With the targets' distances ``beyond`` (decades), also the counts [points, inside 50%, inside 90%]
    per :data:`DISTANCE_BINS` bin."""
    from scipy.stats import gaussian_kde

    from bayescale import scoring

    q = np.quantile(draws, [(1 - lv) / 2 for lv in LEVELS] + [(1 + lv) / 2 for lv in LEVELS], axis=0)
    inside = [(y >= lo) & (y <= hi) for lo, hi in zip(q[:len(LEVELS)], q[len(LEVELS):])]
    if ll is None:
        ll = [float(gaussian_kde(draws[:, j]).logpdf(y[j])[0]) for j in range(len(y))]
    out = {"coverage": [float(np.mean(v)) for v in inside], "ll": float(np.mean(ll)),
           "rmsle": float(scoring.rmsle(np.maximum(np.median(draws, axis=0), 1e-300), y)),
           "crps": float(np.mean(scoring.crps_from_draws(draws, y)))}
    if beyond is not None:
        b = np.asarray(beyond, float)
        i50, i90 = inside[LEVELS.index(0.5)], inside[LEVELS.index(0.9)]
        out["by_distance"] = {}
        for name, lo, hi in DISTANCE_BINS:
            sel = (b == 0) if hi == 0 else (b > lo) & (b <= hi)
            out["by_distance"][name] = [int(sel.sum()), int(i50[sel].sum()), int(i90[sel].sum())]
    return out


def score_suite(left_out: str, curves: list[dict], seed: int) -> tuple[dict, object]:
    """Every method on the curves of ``left_out``, the error model learned on the other suites' curves."""
    from bayescale.calibration import estimate_tau
    from bayescale.error_model import learn

    train = [c for c in curves if c["unit"] != left_out]
    test = [c for c in curves if c["unit"] == left_out]
    model = learn(corpus(train), domain="suite", source=f"leave-one-suite-out: all suites but {left_out}")
    pooled = {}
    for dom in sorted({c["domain"] for c in test}):   # today's calibrate() estimator, pooled per domain
        own = pd.concat([c["own"] for c in test if c["domain"] == dom], ignore_index=True)
        pooled[dom] = estimate_tau(own["r"], own["s"], own["beyond"]) if len(own) else 0.0
    fleet = {}  # FitMany.pool_errors: each domain's curves pool their own errors
    for dom in sorted({c["domain"] for c in test}):
        cs = [k for k, c in enumerate(test) if c["domain"] == dom]
        errs = model.posterior_many([dict(family=test[k]["family"], span=test[k]["span"], noise=test[k]["noise"],
                                          errors=test[k]["own"]) for k in cs], "refits")
        fleet.update(zip(cs, errs))
    rows: dict = {m: [] for m in ("default", FLEET, "prior only", "raw", "calibrate() estimator", "boot", PEER)}
    for k, c in enumerate(test):
        rng = np.random.default_rng(seed + k)
        lm, sig, b = c["log_mu"], c["sigma"], c["beyond"]
        z = rng.standard_normal(len(sig))[:, None]
        for name, own in (("default", c["own"]), ("prior only", None)):
            err = model.posterior(c["family"], c["span"], c["noise"], own, c["own_how"])
            tau = err.draws(len(sig), seed + k)[:, None]
            rows[name].append(_scores(c["y"], lm + tau * b[None, :] ** err.gamma * z, sig, rng, c["df"], b))
        rows["raw"].append(_scores(c["y"], lm, sig, rng, c["df"], b))
        rows["calibrate() estimator"].append(_scores(c["y"], lm + pooled[c["domain"]] * b[None, :] * z, sig, rng,
                                                     c["df"]))
        if len(c["boot_sigma"]):
            rows["boot"].append(_scores(c["y"], c["boot_log_mu"], c["boot_sigma"], rng))
        if c.get("peer_draws") is not None and len(c["peer_draws"]):
            rows[PEER].append(_draw_scores(c["y"], c["peer_draws"]))
        # the same bends z as the default's, its own stream for the noise (the other rows' draws stay as they were)
        tau = fleet[k].draws(len(sig), seed + k)[:, None]
        rows[FLEET].append(_scores(c["y"], lm + tau * b[None, :] ** fleet[k].gamma * z, sig,
                                   np.random.default_rng([seed, k, 1]), c["df"], b))
        for m in rows:   # which curve each row scores, so methods can be compared on the curves they share
            if rows[m] and "curve" not in rows[m][-1]:
                rows[m][-1]["curve"] = k
    return rows, model


def summarize(rows: list[dict]) -> dict:
    from bayescale import scoring

    if not rows:
        return {}
    cov = np.mean([r["coverage"] for r in rows], axis=0)
    out = {"curves": len(rows), "coverage": {str(lv): float(c) for lv, c in zip(LEVELS, cov)},
           "msce": float(scoring.msce(LEVELS, cov)), "ll": float(np.mean([r["ll"] for r in rows])),
           "rmsle": float(np.mean([r["rmsle"] for r in rows])), "crps": float(np.mean([r["crps"] for r in rows]))}
    if all("by_distance" in r for r in rows):  # points pooled over the suite's curves
        out["by_distance"] = {name: np.sum([r["by_distance"][name] for r in rows], axis=0).tolist()
                              for name, _, _ in DISTANCE_BINS}
    return out


def stage_score(seed: int, out: Path, likelihood: str) -> dict:
    curves = load_cache(likelihood)
    res = {"command": command(likelihood), "likelihood": likelihood, "suites": {}, "models": {}}
    pooled_rows: dict = {}
    for suite in dict.fromkeys(c["unit"] for c in curves):
        rows, model = score_suite(suite, curves, seed)
        res["suites"][suite] = {m: summarize(r) for m, r in rows.items()}
        if rows[PEER]:   # the default against the peer on the curves both score
            shared = {r["curve"] for r in rows[PEER]}
            res.setdefault("peer", {})[suite] = {
                "default": summarize([r for r in rows["default"] if r["curve"] in shared]),
                PEER: summarize(rows[PEER]),
                "version": next(c["peer_version"] for c in curves if c["unit"] == suite and c.get("peer_version"))}
        res["models"][suite] = model.to_dict()
        for m, r in rows.items():
            pooled_rows.setdefault(m, []).extend(r)
        print(f"{suite} (covariates {model.covariates}): " + ", ".join(
            f"{m} cov90 {v['coverage']['0.9']:.2f}" for m, v in res["suites"][suite].items() if v), file=sys.stderr)
    # pooled: every suite weighs the same (the mean of the suites' summaries)
    res["pooled"] = {}
    for m in pooled_rows:
        per = [res["suites"][s][m] for s in res["suites"] if res["suites"][s].get(m)]
        if not per:  # e.g. the bootstrap, which only the lognormal cache runs
            continue
        res["pooled"][m] = {"suites": len(per),
                            "coverage": {str(lv): float(np.mean([p["coverage"][str(lv)] for p in per]))
                                         for lv in LEVELS},
                            **{k: float(np.mean([p[k] for p in per])) for k in ("msce", "ll", "rmsle", "crps")}}
    res["own_errors"] = {s: f"{sum(len(c['own']) > 0 for c in curves if c['unit'] == s)}/"
                            f"{sum(c['unit'] == s for c in curves)} curves" for s in res["suites"]}
    save_json(out / f"honest_bands{suffix(likelihood)}.json", res)
    return res


def tables(out: Path):
    from benchmarks._common import Table, load_json, shown

    return [t for lik in NOISE_MODELS for t in _table(out, lik)]


def _table(out: Path, likelihood: str):
    from benchmarks._common import Table, load_json, shown

    path = out / f"honest_bands{suffix(likelihood)}.json"
    if not path.exists():
        return []
    res = load_json(path)
    head = ["left-out suite", "method", "curves", *(f"cov {int(lv * 100)}%" for lv in LEVELS), "MSCE", "log density",
            "RMSLE", "CRPS"]
    rows = []
    for suite, per in [*res["suites"].items(), ("pooled (suites alike)", res["pooled"])]:
        for m, v in per.items():
            if not v:
                continue
            n = v.get("curves", f"{v.get('suites')} suites")
            rows.append([suite, m, n, *(f"{v['coverage'][str(lv)]:.2f}" for lv in LEVELS), f"{v['msce']:.4f}",
                         f"{v['ll']:.3f}", f"{v['rmsle']:.4f}", f"{v['crps']:.4f}"])
    covs = "; ".join(f"{s}: {'+'.join(m.get('covariates', ['span', 'noise'])) or 'none'}"
                     for s, m in res["models"].items())
    units = ("revisiting's four domains count as four; own errors by refits"
             if any(s.startswith("revisiting ") for s in res["suites"]) else
             "the earlier protocol, before 2026-12-06: the revisiting suite as one, own errors by importance sampling")
    opt = "" if likelihood == "lognormal" else f" --likelihood {likelihood}"
    noise = "lognormal noise" if likelihood == "lognormal" else f"{likelihood} noise (df {DF:g})"
    source = (f"NUTS fits ({noise}) cached by `python -m benchmarks.honest_bands --stage fits{opt}` "
              f"({NUTS['chains']} chains x "
              f"({NUTS['warmup']} warm-up + {NUTS['samples']} draws), one law per suite: M4, chinchilla, downstream); "
              f"error model learned on the other suites each time ({units}), its "
              f"covariates of ln tau chosen by leave-one-suite-out within those ({covs}); own leave-future-out "
              f"errors available for "
              f"{', '.join(f'{k} {v}' for k, v in res['own_errors'].items())}; {shown(path)}")
    tables_ = [Table(f"honest_bands{suffix(likelihood)}", res["command"], source, head, rows)]
    if res.get("peer"):
        prow = []
        for suite, v in res["peer"].items():
            d, p = v["default"], v[PEER]
            prow.append([suite, d["curves"],
                         *(f"{d['coverage'][lv]:.2f} / {p['coverage'][lv]:.2f}" for lv in ("0.5", "0.9")),
                         f"{d['msce']:.4f} / {p['msce']:.4f}", f"{d['ll']:.3f} / {p['ll']:.3f}",
                         f"{d['rmsle']:.4f} / {p['rmsle']:.4f}", "met" if d["msce"] < p["msce"] else "not met"])
        ver = sorted({v["version"] for v in res["peer"].values()})
        tables_.append(Table(
            f"honest_bands_peer{suffix(likelihood)}", res["command"],
            f"the `default` rows of the table above and `{PEER}` {', '.join(ver)} (its default law "
            "`separable-power`, `new-run` draws; `benchmarks/_peer.py`) on the curves both score (the peer has no law "
            "for the loss -> error link, so Gadre's downstream curves are left out of both); its log density is a "
            f"Gaussian kernel density estimate of its 1000 draws at each point; {shown(path)}",
            ["left-out suite", "curves", "cov 50%: default / peer", "cov 90%: default / peer",
             "MSCE: default / peer", "log density: default / peer", "RMSLE: default / peer",
             "goal: default's MSCE below the peer's"], prow))
    drows = []
    for suite, per in res["suites"].items():
        for m in ("default", FLEET, "raw"):
            counts = per.get(m, {}).get("by_distance")
            if counts:
                drows.append([suite, m, *(f"{c50 / n:.2f} / {c90 / n:.2f} ({n})" if n else ""
                                          for n, c50, c90 in (counts[name] for name, _, _ in DISTANCE_BINS)),
                              f"{res['models'][suite]['gamma']:.2f}" if m == "default" else ""])
    if drows:
        tables_.append(Table(
            f"honest_bands_by_distance{suffix(likelihood)}", res["command"],
            "the held-out points of the table above by their distance beyond the fitted runs (decades, "
            "`bayescale.runs.distance_beyond`; bins fixed in advance), pooled over each suite's curves; "
            f"{shown(path)}",
            ["left-out suite", "method", *(f"cov 50% / 90% (points), {name}" for name, _, _ in DISTANCE_BINS),
             "growth gamma of the error model learned without it"],
            drows))
    return tables_


def stage_ship(seed: int, likelihood: str) -> Path:
    """Learn the package's error model on all six suites' fits of ``likelihood`` and write it where
    :func:`bayescale.error_model.default_error_model` reads it for such fits."""
    import json

    from bayescale.error_model import SHIPPED, learn

    curves = load_cache(likelihood)
    counts = pd.Series([c["unit"] for c in curves]).value_counts().sort_index()
    model = learn(corpus(curves), source=(
        f"learned by `python -m benchmarks.honest_bands --stage ship --likelihood {likelihood}` on the held-out "
        f"errors ({likelihood} fits) of "
        + ", ".join(f"{n} {s}" for s, n in counts.items()) + " curves (bayescale/datasets, provenance in its README)"))
    path = Path(__file__).resolve().parents[1] / "bayescale" / SHIPPED[likelihood]
    path.write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    print(f"wrote {path}: {model}", file=sys.stderr)
    return path


def self_check() -> None:
    """The draw-based scores on draws of a known normal predictive, and the peer's refusal of a non-size law."""
    from scipy.stats import norm

    from benchmarks import _peer

    rng = np.random.default_rng(0)
    y = rng.normal(10.0, 1.0, 400)
    s = _draw_scores(y, rng.normal(10.0, 1.0, (4000, 400)))
    assert all(abs(c - lv) < 0.06 for c, lv in zip(s["coverage"], LEVELS)), s["coverage"]
    assert abs(s["ll"] - norm.logpdf(y, 10.0, 1.0).mean()) < 0.05, s["ll"]
    try:
        _peer.peer_draws(pd.DataFrame({"L": [3.0, 2.5], "y": [0.5, 0.4]}), pd.DataFrame({"L": [2.0]}), ["L"], 0)
        raise AssertionError("the peer has no law for the loss -> error link")
    except LookupError:
        pass
    print("benchmarks.honest_bands: self-check passed", file=sys.stderr)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", choices=("fits", "score", "ship", "self-check"), required=True)
    ap.add_argument("--suite", action="append", help="only these suites (repeatable; default all six)")
    ap.add_argument("--per-domain", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--likelihood", choices=NOISE_MODELS, default="lognormal",
                    help="the fits' noise model (lognormal unless told)")
    output_args(ap)
    args = ap.parse_args(argv)
    suites = tuple(args.suite or SUITES)
    if args.stage == "self-check":
        self_check()
    elif args.stage == "fits":
        stage_fits(suites, args.seed, args.per_domain, args.likelihood)
    elif args.stage == "score":
        stage_score(args.seed, args.out, args.likelihood)
        publish(tables, args)
    else:
        stage_ship(args.seed, args.likelihood)


if __name__ == "__main__":
    main()
