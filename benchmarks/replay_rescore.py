"""The real Chinchilla replay re-scored with careful fits: is the choice of runs better, or the short fits' luck?

The replay (``benchmarks/active_learning.py``, suites ``starts``/``starts_dn1``) refits after every acquisition with
2 chains x (300 + 300) NUTS draws, as a user deciding the next run quickly would, and scores those fits. A short fit
of a local fit sometimes has a chain stuck in another mode (r-hat near 2, hundreds of divergences), and then the
step's error jumps; do the replay's conclusions survive careful fits? Here the runs each
strategy chose are kept as they were, and the run set it holds at each of ``--checkpoints`` compute levels is
refitted as a user would fit the runs they have before deciding on a big run: 4 chains x (``--draws`` + ``--draws``),
refitted with a new seed (at most ``--retries`` times, the lowest r-hat kept) while r-hat > 1.05. Local strategies
(``+local``, ``ours_local``) are refitted locally (``Fit.localize``) with the replay's pool tau. Error: RMSLE of
the posterior predictive median at the 23 held-out runs; pooled over the start sets like the replay.

    python -m benchmarks.replay_rescore [--suite starts,starts_dn1] [--checkpoints 12] [--draws 500] [--workers 2]
    python -m benchmarks.replay_rescore --table   # summary and RESULTS.md section again from the JSON
    python -m benchmarks.replay_rescore --table --feasibility 320   # + random designs: can any choice do it?
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone

import numpy as np

from benchmarks._common import RESULTS_MD, ROOT, update_markdown

OUT = ROOT / "benchmarks" / "results"
START, END = "<!-- rescore:start -->", "<!-- rescore:end -->"
STRATEGIES = ("ours_local", "grid+local", "uncertain+local", "random+local", "cheapest+local",
              "ours", "grid", "uncertain", "random", "cheapest")
RHAT_RETRY = 1.05


def _run_sets(steps: list[dict], start: list[int], checkpoints: np.ndarray) -> list[int]:
    """Indices of the steps held at each checkpoint compute (the last step at or below it), the first and last step
    always included; step k's run set is the start plus the first k acquisitions."""
    comp = np.array([s["compute"] for s in steps])
    keep = {0, len(steps) - 1}
    for c in checkpoints:
        i = int(np.searchsorted(comp, c * (1 + 1e-12), side="right") - 1)
        if i >= 0:
            keep.add(i)
    return sorted(keep)


def _careful_fit(train, st: dict, local_tau: float | None, draws: int, seed: int, retries: int):
    """4 chains; refit with a new seed while r-hat > 1.05 (at most ``retries`` times), keeping the lowest r-hat."""
    import bayescale as bs

    best = None
    for r in range(retries + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kw = dict(chains=4, warmup=draws, samples=draws, seed=seed + 7919 * r, progress=False)
            f = bs.fit(train, st["law"], inputs={c: c for c in st["inputs"]}, y="y", **kw)
            if local_tau:
                f = f.localize(st["target_q"], tau=local_tau, **kw)
        rhat = float(f.diagnostics["max_rhat"])
        if best is None or rhat < best[1]:
            best = (f, rhat, r)
        if rhat <= RHAT_RETRY:
            break
    return best


def rescore_world(args) -> dict:
    """Every strategy's run sets at the checkpoints of one start set, refitted carefully and scored."""
    w, suite, traces, checkpoints, draws, retries = args
    from benchmarks.active_learning import _is_local, _pool_tau, _score, _starts_setup

    st = _starts_setup(w, 1.0 if suite == "starts_dn1" else 0.0)
    tau = _pool_tau(st["pool"], st["law"], st["inputs"])
    out, cache = {}, {}
    for strat, steps in traces.items():
        rows = []
        local = _is_local(strat)
        for k in _run_sets(steps, st["start"], checkpoints):
            chosen = list(st["start"]) + [s["last"] for s in steps[1:k + 1]]
            key = (local, tuple(sorted(chosen)))
            if key not in cache:
                t0 = time.perf_counter()
                f, rhat, tries = _careful_fit(st["pool"].loc[chosen], st, tau if local else None, draws, 1000 * w + k,
                                              retries)
                err, lpd, sd, _ = _score(f, st["target"], st["y_true"], 0)
                cache[key] = {"rmsle": err, "lpd": lpd, "sd": sd, "max_rhat": rhat, "retries": tries,
                              "seconds": time.perf_counter() - t0}
            rows.append({"step": k, "n": steps[k]["n"], "compute": steps[k]["compute"],
                         "replay_rmsle": steps[k]["rmsle"], **cache[key]})
        out[strat] = rows
    print(f"start set {w}: " + ", ".join(f"{s} {r[-1]['rmsle']:.4f} (replay {r[-1]['replay_rmsle']:.4f})"
                                         for s, r in out.items()), flush=True)
    return out


def _design(args) -> dict:
    """One random design from start set ``w``: the start plus pool runs in random order while the total stays under
    ``cap``, fitted locally like the local strategies' careful fits."""
    i, w, cap, suite, draws, retries = args
    from benchmarks.active_learning import _pool_tau, _score, _starts_setup

    st = _starts_setup(w, 1.0 if suite == "starts_dn1" else 0.0)
    pool, chosen = st["pool"], list(st["start"])
    total = float(pool.loc[chosen, "cost"].sum())
    for j in np.random.default_rng(10_000 + i).permutation([k for k in pool.index if k not in chosen]):
        if total + pool.loc[j, "cost"] <= cap:
            chosen.append(int(j))
            total += float(pool.loc[j, "cost"])
    f, rhat, _ = _careful_fit(pool.loc[chosen], st, _pool_tau(pool, st["law"], st["inputs"]), draws, 5000 + i, retries)
    err = _score(f, st["target"], st["y_true"], 0)[0]
    return {"start_set": w, "compute": total, "runs": len(chosen), "rmsle": err, "max_rhat": rhat}


def feasibility(res: dict, suite: str, n: int, draws: int, retries: int, workers: int) -> dict:
    """Is the threshold reachable with half the best baseline's compute by *any* choice of runs? ``n`` random
    designs (start set i mod 16; budget log-uniform from twice the start's compute to twice the best baseline's
    compute to stay at the threshold), each fitted locally and carefully; the share at or below the threshold among those spending
    at most half the best baseline's compute to first reach / to stay."""
    thr = res["suites"][suite]["summary"]["rescored"]["levels"]["threshold"]
    stay = thr["compute_to_stay"][thr["best_baseline_stay"]]
    worlds = len(res["suites"][suite]["worlds"])
    rng = np.random.default_rng(0)
    base = min(t[0]["compute"] for w in res["suites"][suite]["worlds"] for t in w.values())
    jobs = [(i, i % worlds, float(np.exp(rng.uniform(np.log(2 * base), np.log(2 * stay)))), suite, draws, retries)
            for i in range(n)]
    if workers > 1:
        import multiprocessing as mp

        with mp.get_context("spawn").Pool(workers) as pool:
            rows = pool.map(_design, jobs, chunksize=4)
    else:
        rows = [_design(j) for j in jobs]
    return {"designs": rows, "threshold": thr["rmsle"], "reach": thr["compute_to_reach"][thr["best_baseline"]],
            "stay": stay, "draws": draws}


def _feasibility_text(fz: dict) -> str:
    rm = np.array([r["rmsle"] for r in fz["designs"]])
    comp = np.array([r["compute"] for r in fz["designs"]])
    parts = []
    for name in ("reach", "stay"):
        half = comp <= 0.5 * fz[name]
        if half.any():
            q5, q50 = np.quantile(rm[half], [0.05, 0.5])
            parts.append(f"of the {int(half.sum())} spending at most half the best baseline's compute to "
                         f"{'reach' if name == 'reach' else 'stay at'} it "
                         f"({0.5 * fz[name]:.3g} FLOP), {int((rm[half] <= fz['threshold']).sum())} reach it (5th "
                         f"percentile {q5:.4f}, median {q50:.4f})")
    more = comp > fz["stay"]
    if more.any():
        parts.append(f"of the {int(more.sum())} spending more than the best baseline's compute to stay at it, "
                     f"{int((rm[more] <= fz['threshold']).sum())} reach it (median {np.median(rm[more]):.4f})")
    return (f"Any choice of runs (`{fz['command']}`): {len(rm)} random designs (a start set plus pool runs in random "
            f"order under a log-uniform budget), each fitted locally with careful fits; threshold {fz['threshold']:.4f}: "
            + "; ".join(parts) + ".")


def summarize(worlds: list[dict]) -> dict:
    """Pooled curves (root mean square over start sets of the error held at each compute), the threshold (the best
    baseline's pooled error at the end of its protocol), and each strategy's compute to first reach and to stay at
    it and at looser levels, as in the replay."""
    from benchmarks.active_learning import OURS, _sim_summary

    # the replay's summary on the re-scored traces; n_acquire past the end: "after n" = each trace's last step
    sm = _sim_summary([{s: [{**r, "sd": r["sd"], "z2": np.nan, "ok": True} for r in t] for s, t in w.items()}
                       for w in worlds], n_acquire=10**6)
    replay = _sim_summary([{s: [{**r, "rmsle": r["replay_rmsle"], "z2": np.nan, "ok": True} for r in t]
                            for s, t in w.items()} for w in worlds], n_acquire=10**6)
    fits = [r for w in worlds for t in w.values() for r in t]
    gap = np.abs(np.log([r["rmsle"] / r["replay_rmsle"] for r in fits]))
    return {"replay_gap": {"median": float(np.median(gap)), "p90": float(np.quantile(gap, 0.9)),
                           "share_over_1.5x": float(np.mean(gap > np.log(1.5)))},"rescored": sm, "replay_same_steps": replay, "ours": [s for s in sm["curves"] if s in OURS],
            "fits": len({(r["rmsle"], r["compute"]) for r in fits}),
            "share_rhat_ok": float(np.mean([r["max_rhat"] <= RHAT_RETRY for r in fits])),
            "share_retried": float(np.mean([r["retries"] > 0 for r in fits]))}


def _ratio_text(lv: dict, ours: list[str], key: str) -> str:
    reach, best, ratio = (("compute_to_reach", "best_baseline", "ratio") if key == "reach" else
                          ("compute_to_stay", "best_baseline_stay", "ratio_stay"))
    parts = []
    for k, v in lv.items():
        if not np.isfinite(v[reach][v[best]]):
            parts.append(f"{k} ({v['rmsle']:.4f}): no baseline " + ("reaches" if key == "reach" else "stays at")
                         + " it; " + ", ".join(f"{o} {'does' if np.isfinite(v[reach][o]) else 'does not'}"
                                               for o in ours))
            continue
        parts.append(f"{k} ({v['rmsle']:.4f}, best {v[best]} {v[reach][v[best]]:.3g}): " + ", ".join(
            f"{o} {v[ratio][o]:.3g}x" if np.isfinite(v[ratio][o]) else f"{o} never" for o in ours))
    return "; ".join(parts)


def markdown(res: dict) -> str:
    lines = [START, "## Replay re-scored with careful fits (`benchmarks/replay_rescore.py`)", "",
             f"`{res['command']}` on {res['machine']}, {res['timestamp']}; {res['elapsed_s']:.0f} s. " + __doc__.split(
                 "\n\n")[1].replace("\n", " ").strip(), ""]
    for suite, r in res["suites"].items():
        sm, rp = r["summary"]["rescored"], r["summary"]["replay_same_steps"]
        ours = r["summary"]["ours"]
        lines += [f"**{suite}** ({sm['worlds']} start sets; {r['summary']['fits']} careful fits, "
                  f"{r['summary']['share_rhat_ok']:.0%} with r-hat <= {RHAT_RETRY} after retries, "
                  f"{r['summary']['share_retried']:.0%} retried). The careful and the replay's fit of the same runs "
                  f"differ by a median {np.expm1(r['summary']['replay_gap']['median']):.0%} in RMSLE (90th percentile "
                  f"{np.expm1(r['summary']['replay_gap']['p90']):.0%}; "
                  f"{r['summary']['replay_gap']['share_over_1.5x']:.0%} by more than 1.5x).", "",
                  "| strategy | runs at the end | compute at the end | error at the end, careful fit | "
                  "same runs, replay's fit | " + " | ".join(
                      f"to reach {k} ({v['rmsle']:.4f})" for k, v in sm["levels"].items()) + " |",
                  "|---|---|---|---|---|" + "---|" * len(sm["levels"])]
        for s in sm["curves"]:
            lines.append(f"| {s} | {sm['runs_at_end'][s]:.0f} | {sm['compute_after_n'][s]:.3g} | "
                         f"{sm['final'][s]:.4f} | {rp['final'][s]:.4f} | " + " | ".join(
                             f"{v['compute_to_reach'][s]:.3g}" for v in sm["levels"].values()) + " |")
        lines += ["", f"Threshold: the best baseline's pooled error at the end, careful fits ({sm['threshold_from']}); "
                  "looser levels: 0.5, 0.3, 0.2 x the start's. Ours / best baseline, compute to first reach: "
                  + _ratio_text(sm["levels"], ours, "reach") + ". To stay at or below (to the end of every "
                  "strategy's budget): " + _ratio_text(sm["levels"], ours, "stay") + ". Goal: <= 0.5x.", ""]
        if r.get("feasibility"):
            lines += [_feasibility_text(r["feasibility"]), ""]
    lines.append(END)
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="starts", help="comma list of replay suites: starts, starts_dn1")
    ap.add_argument("--checkpoints", type=int, default=12)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worlds", type=int, default=None, help="first N start sets only (quick checks)")
    ap.add_argument("--table", action="store_true", help="rebuild the summary and RESULTS.md section from the JSON")
    ap.add_argument("--feasibility", type=int, default=0,
                    help="with --table: add this many random designs per suite (fitted like the local strategies)")
    args = ap.parse_args(argv)
    if args.table:
        res = json.loads((OUT / "replay_rescore.json").read_text())
        for suite, r in res["suites"].items():
            r["summary"] = summarize(r["worlds"])
            if args.feasibility and suite in args.suite.split(","):
                r["feasibility"] = feasibility(res, suite, args.feasibility, args.draws, args.retries, args.workers)
                r["feasibility"]["command"] = ("python -m benchmarks.replay_rescore "
                                               + " ".join(sys.argv[1:] if argv is None else argv))
        (OUT / "replay_rescore.json").write_text(json.dumps(res, indent=1, default=float))
        update_markdown(RESULTS_MD, markdown(res), START, END)
        return res
    t0 = time.perf_counter()
    src = json.loads((OUT / "active_learning.json").read_text())
    res = {"command": "python -m benchmarks.replay_rescore " + " ".join(sys.argv[1:] if argv is None else argv),
           "timestamp": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "machine": f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores, JAX cpu)",
           "settings": vars(args), "suites": {}}
    for suite in args.suite.split(","):
        worlds = src["suites"][suite]["worlds"][:args.worlds]
        comps = [s["compute"] for w in worlds for t in w.values() for s in t]
        checkpoints = np.geomspace(min(comps), max(comps), args.checkpoints)
        # the replay's order (its first strategy's start sets the looser levels: the global fit's start error)
        jobs = [(i, suite, {s: t for s, t in w.items() if s in STRATEGIES}, checkpoints, args.draws, args.retries)
                for i, w in enumerate(worlds)]
        if args.workers > 1:
            import multiprocessing as mp

            with mp.get_context("spawn").Pool(args.workers) as pool:
                per_world = pool.map(rescore_world, jobs, chunksize=1)
        else:
            per_world = [rescore_world(j) for j in jobs]
        res["suites"][suite] = {"worlds": per_world, "summary": summarize(per_world),
                                "checkpoints": checkpoints.tolist()}
    res["elapsed_s"] = time.perf_counter() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "replay_rescore.json").write_text(json.dumps(res, indent=1, default=float))
    update_markdown(RESULTS_MD, markdown(res), START, END)
    print(markdown(res))
    return res


if __name__ == "__main__":
    main()
