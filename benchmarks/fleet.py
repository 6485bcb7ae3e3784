"""``fit_many`` on a Dask cluster of this machine: the 72 IC curves with 1 and 2 worker processes.

    python -m benchmarks.fleet [--workers 1,2] [--curves N] [--chains 4] [--draws 1000] [--out DIR] [--md PATH]

For each number of workers: a fresh ``LocalCluster`` (worker processes, one thread each), bayescale imported in the
workers, then a first ``fit_many`` (each worker compiles the program once, then samples) and a second with another
seed (sampling only). This process runs with one CPU device (``BAYESCALE_CPU_DEVICES=1``), which the workers copy,
so each worker samples on one core; the persistent compilation cache is off, so compile time is visible. M4, fit
split of the revisiting benchmark's IC curves, ``chains`` x (``draws`` warm-up + ``draws``), no refits (as in
``benchmarks/speed.py``). The speed-up is the second call's against one worker's; the draws of the first call are
checked to be the same whatever the number of workers. Writes ``DIR/fleet.json`` and the ``fleet`` table.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # before bayescale is imported (the workers inherit the environment)
    os.environ["BAYESCALE_JAX_CACHE"] = "off"
    os.environ["BAYESCALE_CPU_DEVICES"] = "1"

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (LEGACY_LIKELIHOOD, RESULTS, Table, command_line, describe, load_json, loadavg,
                                machine_info, output_args, publish, save_json, shown)


def ic_curves(n: int | None):
    """Fit split of the revisiting benchmark's IC curves (the first ``n``; all 72 when None)."""
    import bayescale as bs

    r = bs.datasets.revisiting()
    ic = r[(r.domain == "IC") & r.train]
    curves = list(ic["curve"].unique())[:n]
    return ic[ic["curve"].isin(curves)].reset_index(drop=True)


def draws_digest(fits) -> str:
    """A hash of every curve's posterior draws: equal digests, identical draws."""
    h = hashlib.sha256()
    for g, f in fits.items():
        h.update(str(g).encode())
        for k in f.param_names:
            h.update(np.ascontiguousarray(f.posterior[k].values).tobytes())
    return h.hexdigest()[:16]


def import_bayescale() -> None:
    """Import bayescale's fitting code in a worker: JAX is imported, no backend started (the set-up still applies)."""
    import bayescale.fit  # noqa: F401


def run_workers(n_workers: int, runs, chains: int, draws: int) -> dict:
    import bayescale as bs
    from dask.distributed import Client, LocalCluster

    kw = dict(group="curve", x="x", y="y", chains=chains, warmup=draws, samples=draws, progress=False,
              refit_flagged=False, likelihood=LEGACY_LIKELIHOOD)
    with LocalCluster(n_workers=n_workers, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(import_bayescale)  # not timed below
        times = []
        for seed in (0, 1):
            t0 = time.perf_counter()
            out = bs.fit_many(runs, "M4", seed=seed, executor=client, **kw)
            times.append(time.perf_counter() - t0)
            if seed == 0:
                fits = out
    return {"workers": n_workers, "curves": len(fits), "first_s": times[0], "second_s": times[1],
            "ok": int(sum(f.ok for f in fits.values())), "digest": draws_digest(fits)}


def run(workers, n_curves: int | None, chains: int, draws: int) -> list[dict]:
    runs = ic_curves(n_curves)
    rows = []
    for w in workers:
        rows.append(run_workers(w, runs, chains, draws))
        print(json.dumps(rows[-1]), flush=True)
    base = rows[0]
    for r in rows:
        r["speedup"] = base["second_s"] / r["second_s"]
        r["efficiency"] = r["speedup"] * base["workers"] / r["workers"]
        r["same_draws"] = r["digest"] == base["digest"]
    return rows


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "fleet.json")
    if res is None:
        return []
    m, c = res["machine"], res["config"]
    base = res["results"][0]["workers"]
    source = (f"{describe(m)} (load average {m['loadavg_start']} at start, {m.get('loadavg_end')} at end); "
              f"Dask LocalCluster, one process and one thread per worker, {len(m['jax_devices'])} CPU device(s) "
              f"each; M4, {res['results'][0]['curves']} IC curves, {c['chains']} chains x ({c['draws']} warm-up + "
              f"{c['draws']} draws), no refits, persistent compilation cache off; speed-up and efficiency of the "
              f"second call against {base} worker(s); {shown(out / 'fleet.json')}")
    return [Table("fleet", m["command"], source,
                  ["workers", "first call s (compile + sampling)", "second call s", "speed-up", "efficiency", "ok",
                   f"same draws as {base} worker(s)"],
                  [[r["workers"], f"{r['first_s']:.1f}", f"{r['second_s']:.1f}", f"{r['speedup']:.2f}x",
                    f"{r['efficiency']:.0%}", f"{r['ok']}/{r['curves']}", "yes" if r["same_draws"] else "no"]
                   for r in res["results"]])]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.fleet", description=__doc__.split("\n")[0])
    ap.add_argument("--workers", default="1,2", help="numbers of worker processes, comma-separated")
    ap.add_argument("--curves", type=int, default=None, help="first N IC curves (default: all 72)")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--draws", type=int, default=1000, help="warm-up steps and draws per chain")
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("fleet", argv))
    rows = run([int(v) for v in args.workers.split(",")], args.curves, args.chains, args.draws)
    meta["loadavg_end"] = loadavg()
    save_json(args.out / "fleet.json", {"machine": meta, "config": {"chains": args.chains, "draws": args.draws},
                                        "results": rows})
    print(f"wrote {args.out / 'fleet.json'}")
    publish(tables, args)


if __name__ == "__main__":
    main()
