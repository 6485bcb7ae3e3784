"""Coverage beyond the runs on simulated misspecification: curves whose power law breaks beyond the fitted runs
(:func:`bayescale.simulate.broken_power_law`), fitted with M2; the default bands (corpus-learned extrapolation error)
against the raw posterior's, at the four predicted runs of each curve.

    python -m benchmarks.misspecified [--curves 24] [--seed 0]
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown

LEVELS = (0.5, 0.8, 0.9, 0.95)
NUTS = dict(chains=2, warmup=300, samples=300)


def run(n_curves: int, seed: int) -> dict:
    import bayescale as bs
    from bayescale.simulate import broken_power_law

    data = broken_power_law(n_curves, seed)
    fits = bs.fit_many(data[~data.target], "M2", group="curve", x="x", y="y", refit_flagged=False, seed=seed,
                       progress=False, **NUTS)
    cover = {"default": {lv: [] for lv in LEVELS}, "raw": {lv: [] for lv in LEVELS}}
    for c, f in fits.items():
        t = data[(data.curve == c) & data.target]
        for kind, per in cover.items():
            b = f.predict(t["x"].to_numpy(), levels=LEVELS, seed=seed, raw=kind == "raw")
            for lv in LEVELS:
                per[lv].extend(b.covers(t["y"].to_numpy(), lv))
    return {kind: {str(lv): float(np.mean(v)) for lv, v in per.items()} for kind, per in cover.items()} | {
        "ok": int(sum(f.ok for f in fits.values())), "curves": n_curves}


def tables(out):
    path = out / "misspecified.json"
    if not path.exists():
        return []
    res = load_json(path)
    r = res["results"]
    source = (f"M2 fitted to {r['curves']} simulated curves whose law breaks beyond the runs "
              f"(bayescale.simulate.broken_power_law, 20 fitted runs each, 4 predicted 0.5-1.5 decades beyond), "
              f"{NUTS['chains']} chains x ({NUTS['warmup']} + {NUTS['samples']}), {r['ok']}/{r['curves']} fits pass "
              f"the gate; coverage of the predicted runs; {shown(path)}")
    return [Table("misspecified", res["machine"]["command"], source, ["bands", *(f"cov {int(lv * 100)}%" for lv in LEVELS)],
                  [[k, *(f"{r[k][str(lv)]:.2f}" for lv in LEVELS)] for k in ("default", "raw")])]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.misspecified", description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    output_args(ap)
    args = ap.parse_args(argv)
    meta = machine_info(command_line("misspecified", argv))
    save_json(args.out / "misspecified.json", {"machine": meta, "results": run(args.curves, args.seed)})
    publish(tables, args)


if __name__ == "__main__":
    main()
