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
                                        [--feasibility 320]
    python -m benchmarks.replay_rescore --self-check

It reads the replay's ``benchmarks/results/active_learning.json`` (``--replay``) and writes
``benchmarks/results/replay_rescore.json`` and the ``rescore_*`` tables of ``benchmarks/RESULTS.md``. ``--feasibility
N``: N random designs per suite (a start set plus pool runs in random order under a log-uniform budget), fitted like
the local strategies: can any choice of runs reach the threshold with half the best baseline's compute?
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks._common import (LEGACY_LIKELIHOOD, OURS, RESULTS, Table, command_line, is_local, levels_table,
                                load_json, machine_line, now, output_args, pool_tau, pooled_summary, publish, save_json,
                                score_fit, shown, starts_setup)

STRATEGIES = ("ours_local", "grid+local", "uncertain+local", "random+local", "cheapest+local",
              "ours", "grid", "uncertain", "random", "cheapest")
RHAT_RETRY = 1.05
FILE = "replay_rescore.json"


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
            f = bs.fit(train, st["law"], inputs={c: c for c in st["inputs"]}, y="y", likelihood=LEGACY_LIKELIHOOD, **kw)
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
    st = starts_setup(w, 1.0 if suite == "starts_dn1" else 0.0)
    tau = pool_tau(st["pool"], st["law"], st["inputs"])
    out, cache = {}, {}
    for strat, steps in traces.items():
        rows = []
        local = is_local(strat)
        for k in _run_sets(steps, st["start"], checkpoints):
            chosen = list(st["start"]) + [s["last"] for s in steps[1:k + 1]]
            key = (local, tuple(sorted(chosen)))
            if key not in cache:
                t0 = time.perf_counter()
                f, rhat, tries = _careful_fit(st["pool"].loc[chosen], st, tau if local else None, draws, 1000 * w + k,
                                              retries)
                err, lpd, sd, _ = score_fit(f, st["target"], st["y_true"], 0)
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
    st = starts_setup(w, 1.0 if suite == "starts_dn1" else 0.0)
    pool, chosen = st["pool"], list(st["start"])
    total = float(pool.loc[chosen, "cost"].sum())
    for j in np.random.default_rng(10_000 + i).permutation([k for k in pool.index if k not in chosen]):
        if total + pool.loc[j, "cost"] <= cap:
            chosen.append(int(j))
            total += float(pool.loc[j, "cost"])
    f, rhat, _ = _careful_fit(pool.loc[chosen], st, pool_tau(pool, st["law"], st["inputs"]), draws, 5000 + i, retries)
    err = score_fit(f, st["target"], st["y_true"], 0)[0]
    return {"start_set": w, "compute": total, "runs": len(chosen), "rmsle": err, "max_rhat": rhat}


def feasibility(r: dict, suite: str, n: int, draws: int, retries: int, workers: int) -> dict:
    """Is the threshold reachable with half the best baseline's compute by *any* choice of runs? ``n`` random
    designs (start set i mod 16; budget log-uniform from twice the start's compute to twice the best baseline's
    compute to stay at the threshold), each fitted locally and carefully; the share at or below the threshold among those spending
    at most half the best baseline's compute to first reach / to stay."""
    thr = r["summary"]["rescored"]["levels"]["threshold"]
    stay = thr["compute_to_stay"][thr["best_baseline_stay"]]
    worlds = len(r["worlds"])
    rng = np.random.default_rng(0)
    base = min(t[0]["compute"] for w in r["worlds"] for t in w.values())
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


def summarize(worlds: list[dict]) -> dict:
    """Pooled curves (root mean square over start sets of the error held at each compute), the threshold (the best
    baseline's pooled error at the end of its protocol), and each strategy's compute to first reach and to stay at
    it and at looser levels, as in the replay."""
    # the replay's summary on the re-scored traces; n_acquire past the end: "after n" = each trace's last step
    sm = pooled_summary([{s: [{**r, "z2": np.nan, "ok": True} for r in t] for s, t in w.items()}
                       for w in worlds], n_acquire=10**6)
    replay = pooled_summary([{s: [{**r, "rmsle": r["replay_rmsle"], "z2": np.nan, "ok": True} for r in t]
                            for s, t in w.items()} for w in worlds], n_acquire=10**6)
    fits = [r for w in worlds for t in w.values() for r in t]
    gap = np.abs(np.log([r["rmsle"] / r["replay_rmsle"] for r in fits]))
    return {"replay_gap": {"median": float(np.median(gap)), "p90": float(np.quantile(gap, 0.9)),
                           "share_over_1.5x": float(np.mean(gap > np.log(1.5)))},
            "rescored": sm, "replay_same_steps": replay, "ours": [s for s in sm["curves"] if s in OURS],
            "fits": len({(r["rmsle"], r["compute"]) for r in fits}),
            "share_rhat_ok": float(np.mean([r["max_rhat"] <= RHAT_RETRY for r in fits])),
            "share_retried": float(np.mean([r["retries"] > 0 for r in fits]))}


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / FILE)
    if res is None:
        return []
    extra = sorted({r["feasibility"]["command"] for r in res["suites"].values()
                    if r.get("feasibility", {}).get("command", res["command"]) != res["command"]})
    history = ""  # an earlier version of this script added the random designs to the saved file
    if extra:
        history = f"{1 + len(extra)} invocations: " + "; ".join(f"`{c}`" for c in [res["command"], *extra])
    cmd = "python -m benchmarks.replay_rescore" if history else res["command"]
    src = f"{res['machine']}, {res['timestamp']}; {res['elapsed_s']:.0f} s; {shown(out / FILE)}"
    fits = []
    out_tables = [Table("rescore_fits", cmd, src, [
        "suite", "start sets", "careful fits", f"r-hat <= {RHAT_RETRY} after retries", "retried",
        "careful / replay's fit of the same runs, RMSLE: median gap", "90th percentile", "share over 1.5x"], fits,
        history)]
    for suite, r in res["suites"].items():
        s_ = r["summary"]
        sm, rp, gap = s_["rescored"], s_["replay_same_steps"], s_["replay_gap"]
        fits.append([suite, sm["worlds"], s_["fits"], f"{s_['share_rhat_ok']:.0%}", f"{s_['share_retried']:.0%}",
                     f"{np.expm1(gap['median']):.0%}", f"{np.expm1(gap['p90']):.0%}", f"{gap['share_over_1.5x']:.0%}"])
        out_tables.append(Table(f"rescore_{suite}", cmd, src, [
            "strategy", "runs at the end", "compute at the end", "error at the end, careful fit",
            "same runs, replay's fit", *(f"to reach {k} ({v['rmsle']:.4f})" for k, v in sm["levels"].items())], [
            [s, f"{sm['runs_at_end'][s]:.0f}", f"{sm['compute_after_n'][s]:.3g}", f"{sm['final'][s]:.4f}",
             f"{rp['final'][s]:.4f}", *(f"{v['compute_to_reach'][s]:.3g}" for v in sm["levels"].values())]
            for s in sm["curves"]], history))
        out_tables.append(levels_table(f"rescore_{suite}_levels", sm, "start sets", cmd, src, history))
        fz = r.get("feasibility")
        if fz:
            rm = np.array([d["rmsle"] for d in fz["designs"]])
            comp = np.array([d["compute"] for d in fz["designs"]])
            rows = []
            for label, sel in ((f"at most half the best baseline's compute to reach it ({0.5 * fz['reach']:.3g})",
                                comp <= 0.5 * fz["reach"]),
                               (f"at most half the best baseline's compute to stay at it ({0.5 * fz['stay']:.3g})",
                                comp <= 0.5 * fz["stay"]),
                               (f"more than the best baseline's compute to stay at it ({fz['stay']:.3g})",
                                comp > fz["stay"])):
                q = np.quantile(rm[sel], [0.05, 0.5]) if sel.any() else [np.nan, np.nan]
                rows.append([label, int(sel.sum()), int((rm[sel] <= fz["threshold"]).sum()), f"{q[0]:.4f}",
                             f"{q[1]:.4f}"])
            out_tables.append(Table(f"rescore_{suite}_feasibility", cmd, src, [
                "random designs spending (FLOP)", "designs", f"reach the threshold {fz['threshold']:.4f}",
                "RMSLE, 5th percentile", "RMSLE, median"], rows, history))
    return out_tables


def self_check() -> None:
    """The run sets re-scored are the ones held at each checkpoint, the first and the last always included."""
    steps = [{"compute": c} for c in (1.0, 2.0, 5.0, 10.0, 50.0)]
    assert _run_sets(steps, [], np.array([1.5, 6.0, 100.0])) == [0, 2, 4]
    assert _run_sets(steps, [], np.array([0.5])) == [0, 4]
    print("benchmarks.replay_rescore: self-check passed")


def main(argv=None) -> dict | None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.replay_rescore", description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="starts,starts_dn1", help="comma list of replay suites: starts, starts_dn1")
    ap.add_argument("--checkpoints", type=int, default=12)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worlds", type=int, default=None, help="first N start sets only (quick checks)")
    ap.add_argument("--feasibility", type=int, default=320, help="random designs per suite (0: none)")
    ap.add_argument("--replay", type=Path, default=RESULTS / "active_learning.json", help="the replay's result file")
    ap.add_argument("--self-check", action="store_true")
    output_args(ap)
    args = ap.parse_args(argv)
    if args.self_check:
        self_check()
        return None
    t0 = time.perf_counter()
    src = json.loads(args.replay.read_text())
    res = {"command": command_line("replay_rescore", argv), "timestamp": now(), "machine": machine_line(),
           "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "suites": {}}
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
        r = {"worlds": per_world, "summary": summarize(per_world), "checkpoints": checkpoints.tolist()}
        if args.feasibility:
            r["feasibility"] = feasibility(r, suite, args.feasibility, args.draws, args.retries, args.workers)
        res["suites"][suite] = r
    res["elapsed_s"] = time.perf_counter() - t0
    save_json(args.out / FILE, res)
    publish(tables, args)
    return res


if __name__ == "__main__":
    main()
