"""Coverage beyond the runs on simulated misspecification: curves whose power law breaks beyond the fitted runs
(:func:`bayescale.simulate.broken_power_law`), fitted with M2; at the four predicted runs of each curve, the bands
of the raw posterior, of the default (the extrapolation-error model shipped with the package, learned on real
curves) and of an error model learned the way a lab would learn one from its own past curves: on the held-out
errors of other curves of the same simulator (another seed; :meth:`bayescale.Fit.heldout_errors`,
:func:`bayescale.error_model.learn`).

    python -m benchmarks.misspecified [--curves 192] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown

LEVELS = (0.5, 0.8, 0.9, 0.95)
METHODS = ("raw", "default", "learned on simulated curves")


def _fits(n_curves: int, seed: int):
    import bayescale as bs
    from bayescale.simulate import broken_power_law

    data = broken_power_law(n_curves, seed)
    fits = bs.fit_many(data[~data.target], "M2", group="curve", x="x", y="y", seed=seed, progress=False)
    return {c: (f, data[(data.curve == c) & data.target]) for c, f in fits.items()}


def run(n_curves: int, seed: int) -> dict:
    from bayescale.error_model import learn

    test, other = _fits(n_curves, seed), _fits(n_curves, seed + 1)
    rows = pd.concat([f.heldout_errors(t["x"].to_numpy(), t["y"].to_numpy(), curve=c) for c, (f, t) in other.items()],
                     ignore_index=True)
    learned = learn(rows, domain=None, source=f"{n_curves} simulated curves, seed {seed + 1}")
    errors = {"raw": None, "default": "default", "learned on simulated curves": learned}
    cover = {m: {lv: [] for lv in LEVELS} for m in METHODS}
    for c, (f, t) in test.items():
        for m, err in errors.items():
            b = f.with_error(err).predict(t["x"].to_numpy(), levels=LEVELS, seed=seed)
            for lv in LEVELS:
                cover[m][lv].extend(b.covers(t["y"].to_numpy(), lv))
    return {m: {str(lv): float(np.mean(v)) for lv, v in per.items()} for m, per in cover.items()} | {
        "ok": int(sum(f.ok for f, _ in test.values())), "curves": n_curves, "points": 4 * n_curves,
        "learned": learned.to_dict()}


def tables(out):
    path = out / "misspecified.json"
    if not path.exists():
        return []
    res = load_json(path)
    r = res["results"]
    lm = r.get("learned", {})
    source = (f"M2 fitted to {r['curves']} simulated curves whose law breaks beyond the runs "
              f"(bayescale.simulate.broken_power_law, 20 fitted runs each, 4 predicted 0.5-1.5 decades beyond; "
              f"the package's default NUTS settings, flagged fits refitted, {r['ok']}/{r['curves']} pass the gate); "
              f"coverage of the {r.get('points', 4 * r['curves'])} predicted runs; 'learned on simulated curves': "
              f"`learn(domain=None)` on the held-out errors of {r['curves']} other curves of the simulator (next "
              f"seed), gamma {lm.get('gamma', float('nan')):.2f}, omega {lm.get('omega', float('nan')):.2f}; "
              f"{shown(path)}")
    head = ["bands", *(f"cov {int(lv * 100)}%" for lv in LEVELS), "90% within 5 points of nominal"]
    body = [[m, *(f"{r[m][str(lv)]:.2f}" for lv in LEVELS), "yes" if abs(r[m]["0.9"] - 0.9) <= 0.05 else "no"]
            for m in METHODS if m in r]
    return [Table("misspecified", res["machine"]["command"], source, head, body)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.misspecified", description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=192)
    ap.add_argument("--seed", type=int, default=0)
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("misspecified", argv))
    save_json(args.out / "misspecified.json", {"machine": meta, "results": run(args.curves, args.seed)})
    publish(tables, args)


if __name__ == "__main__":
    main()
