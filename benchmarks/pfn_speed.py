"""PFN inference time per curve in a batch of 72 (issue 17's goal: under 10 ms on the CPU).

The 72 revisiting curves of ``benchmarks/pfn.py``'s speed check (their training runs as context, their held-out
runs as queries: 14,981 points), through :func:`bayescale.pfn.predictive_many` and three quantiles per query, for
each number of context views and with and without the real-data extrapolation error, and the default's pass over
each curve's own runs alone (:func:`bayescale.pfn.own_errors_many`). Median of ``--repeats``
timed calls after one untimed call (compilation). ``--label`` names the code measured, so the same script run on an
older checkout (``PYTHONPATH=<checkout>``) adds its rows beside the current ones.

    python -m benchmarks.pfn_speed [--label current] [--repeats 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchmarks._common import (Table, command_line, load_json, loadavg, machine_info, output_args, publish, save_json,
                                shown)

CONFIGS = ((8, "default"), (1, "default"), (8, "raw"), (1, "raw"))  # (views, error)
N_CURVES = 72


def batch() -> list:
    """The first 72 revisiting curves as ``(x_ctx, y_ctx, x_query)`` (repeated if there were fewer)."""
    import bayescale as bs

    rev = bs.datasets.revisiting()
    out = []
    for _, c in list(rev.groupby("curve", sort=False))[:N_CURVES]:
        tr, te = c[c.train], c[~c.train]
        out.append((tr.x.to_numpy(), tr.y.to_numpy(), te.x.to_numpy() if len(te) else tr.x.to_numpy()[-1:] * 2))
    while len(out) < N_CURVES:
        out.append(out[len(out) % len(out)])
    return out


def measure(repeats: int) -> list[dict]:
    import bayescale
    from bayescale.pfn import predictive_many

    curves = batch()
    rows = []
    for views, error in CONFIGS:
        def once():
            t0 = time.perf_counter()
            preds = predictive_many(curves, views=views, error=error)
            t1 = time.perf_counter()
            for p in preds:
                p.quantile(np.array([0.05, 0.5, 0.95]))
            return t1 - t0, time.perf_counter() - t1

        once()
        times = np.array([once() for _ in range(repeats)])
        net, quant = np.median(times[:, 0]), np.median(times[:, 1])
        rows.append({"views": views, "error": error, "predictive_ms": 1000 * net / N_CURVES,
                     "quantiles_ms": 1000 * quant / N_CURVES, "total_ms": 1000 * (net + quant) / N_CURVES})
        print(rows[-1], flush=True)
    try:  # the default's step that reads each curve's own runs (one more pass), alone
        from bayescale.pfn import own_errors_many
    except ImportError:  # code from before it
        return rows + [{"bayescale": bayescale.__file__}]
    contexts = [(x, y) for x, y, _ in curves]
    own_errors_many(contexts)
    t = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        own_errors_many(contexts)
        t.append(time.perf_counter() - t0)
    ms = 1000 * float(np.median(t)) / N_CURVES
    rows.append({"views": 1, "error": "its own-errors pass alone", "predictive_ms": ms, "quantiles_ms": 0.0,
                 "total_ms": ms})
    return rows + [{"bayescale": bayescale.__file__}]


def tables(out):
    path = out / "pfn_speed.json"
    if not path.exists():
        return []
    res = load_json(path)
    head = ["code", "views", "extrapolation error", "predictive_many ms/curve", "3 quantiles ms/curve",
            "total ms/curve (goal < 10)"]
    rows = []
    for label, run in res["runs"].items():
        for r in run["rows"]:
            if "views" in r:
                rows.append([label, r["views"], r["error"], f"{r['predictive_ms']:.1f}", f"{r['quantiles_ms']:.1f}",
                             f"{r['total_ms']:.1f}"])
    src = "; ".join(f"{label}: {run['machine']['cpu_model']}, load average {run['load_start']} at start"
                    for label, run in res["runs"].items())
    return [Table("pfn_speed", "python -m benchmarks.pfn_speed --label <code>", f"{src}; {shown(path)}", head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pfn_speed", description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="current")
    ap.add_argument("--repeats", type=int, default=3)
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("pfn_speed", argv))
    start = loadavg()
    rows = measure(args.repeats)
    path = args.out / "pfn_speed.json"
    res = load_json(path) if path.exists() else {"runs": {}}
    res["runs"][args.label] = {"machine": meta, "load_start": start, "rows": rows}
    save_json(path, res)
    publish(tables, args)


if __name__ == "__main__":
    main()
