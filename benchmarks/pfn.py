"""Is the shipped PFN right? Calibration on held-out prior draws, agreement with NUTS, speed, size.

(a) Held-out prior draws (seeds disjoint from training, validation and the recalibration draws), prefix
    (extrapolation) and random-subset (interpolation) splits: coverage of central 50/60/70/80/90/95/99% intervals of
    every target point, and the NLL of ln y per target (nats; the density of y is the density of ln y divided by y),
    for the recalibrated predictive (the default) and the raw network's.
(b) A single-family prior (M2 only, no bumps, no extra noise spread): NUTS samples *that same prior*
    (:func:`bayescale.pfn.prior.family_model`) on each curve's context points; its posterior predictive quantiles
    of ln y at the held-out extrapolation points are compared with those of a PFN trained on that prior alone
    (``--family-weights``, trained by the command in ``FAMILY_TRAIN``) and with the shipped mixture PFN's. Gaps
    are in ln-y units and relative to the NUTS predictive sd of ln y.
(c) CPU milliseconds per curve for one batched call on 72 curves, beside one NUTS fit (M4, default settings).
(d) Parameter count.

Writes ``benchmarks/results/pfn.json``, ``benchmarks/results/pfn_calibration.png`` and the ``pfn_*`` tables of
``benchmarks/RESULTS.md``.

    python -m benchmarks.pfn [--curves 1024] [--nuts-curves 64] [--draws 1000] [--nuts-cache FILE [--nuts-only]]
                             [--family-weights NPZ]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks._common import LEGACY_LIKELIHOOD, ROOT, Table, describe, load_json, output_args, publish, shown

LEVELS = (0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99)
# disjoint from training (fold_in of seed 0), validation (10_000_000+) and recalibration (30_000_000+)
TEST_SEED = 20_000_000


def _curves(d, i):
    c, tg = d["ctx"][i], d["target"][i]
    x = np.exp(d["t"][i])
    return x[c], d["y"][i][c], x[tg], d["y"][i][tg]


def calibration(n_curves: int, split: str, seed: int, calibrated: bool = True) -> dict:
    from bayescale.pfn import predictive_many, sample_prior
    from bayescale.pfn.prior import FAMILIES

    d = {k: np.asarray(v) for k, v in sample_prior(seed, n_curves, 48, split=split).items()}
    keep = [i for i in range(n_curves) if d["target"][i].any()]
    items = [_curves(d, i) for i in keep]
    t0 = time.perf_counter()
    preds = predictive_many([(xc, yc, xq) for xc, yc, xq, _ in items], calibrated=calibrated, error="raw")
    secs = time.perf_counter() - t0
    inside = {lv: [] for lv in LEVELS}
    nll, fam, pit = [], [], []
    for i, p, (_, _, _, yq) in zip(keep, preds, items):
        for lv in LEVELS:
            lo, hi = p.quantile(np.array([(1 - lv) / 2, (1 + lv) / 2]))
            inside[lv].append((yq >= lo) & (yq <= hi))
        nll.append(-(p.logpdf(yq) + np.log(yq)))  # density of ln y
        pit.append(p.cdf(yq))
        fam.append(np.full(len(yq), d["family"][i]))
    inside = {lv: np.concatenate(v) for lv, v in inside.items()}
    nll, fam, pit = np.concatenate(nll), np.concatenate(fam), np.concatenate(pit)
    per_family = {}
    for k, name in enumerate(FAMILIES):
        m = fam == k
        if m.any():
            per_family[name] = {"targets": int(m.sum()), "nll": float(np.median(nll[m])),
                                "coverage": {str(lv): float(inside[lv][m].mean()) for lv in LEVELS}}
    return {"split": split, "calibrated": calibrated, "curves": len(keep), "targets": int(len(nll)),
            "coverage": {str(lv): float(inside[lv].mean()) for lv in LEVELS},
            "max_abs_gap_pts": float(max(abs(inside[lv].mean() - lv) for lv in LEVELS) * 100),
            "nll_mean": float(nll.mean()), "nll_median": float(np.median(nll)),
            "nll_mean_trimmed_1pct": float(np.mean(np.sort(nll)[: int(len(nll) * 0.99)])),
            "seconds": secs, "per_family": per_family, "pit_hist": np.histogram(pit, bins=20, range=(0, 1))[0].tolist()}


FAMILY = "M2"
NUTS_Q = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
FAMILY_WEIGHTS = ROOT / "benchmarks" / "results" / f"pfn_{FAMILY}" / "pfn_small.npz"
FAMILY_TRAIN = (f"bayescale pfn train --config small --families {FAMILY} --bump-share 0 --wide-noise-share 0 "
                f"--calibration-curves 0 --out benchmarks/results/pfn_{FAMILY} --steps 8000`, then the same with "
                "`--resume --steps 16000")


def nuts_reference(n_curves: int, draws: int, seed: int, cache: Path | None = None) -> dict:
    """Single-family prior curves and NUTS under *that same prior* (:func:`bayescale.pfn.prior.family_model`).

    Returns per curve the context/targets and the NUTS posterior predictive quantiles and sd of ln y at the
    targets. Independent of any PFN, so it may be computed once and cached (``cache``, an .npz keyed by the
    arguments).
    """
    import arviz as az
    import jax
    from numpyro.infer import Predictive

    from bayescale.pfn import sample_prior
    from bayescale.pfn.prior import family_model
    from bayescale.sampler import SamplerSettings, run_nuts

    key = f"matched-{FAMILY}-{n_curves}-{draws}-{seed}"
    if cache is not None and Path(cache).exists():
        with np.load(cache, allow_pickle=False) as f:
            if str(f["key"]) == key:
                out = {k: f[k] for k in f.files if k != "key"}
                n = int(out["n"])
                return {"items": [(out[f"xc{j}"], out[f"yc{j}"], out[f"xq{j}"], out[f"yq{j}"]) for j in range(n)],
                        "lq": [out[f"lq{j}"] for j in range(n)], "sd": [out[f"sd{j}"] for j in range(n)],
                        "ok": out["ok"].tolist(), "secs": out["secs"].tolist(), "div": out["div"].tolist()}
    d = {k: np.asarray(v) for k, v in sample_prior(seed, 2 * n_curves, 20, split="prefix", families=[FAMILY],
                                                     bump_share=0.0, wide_noise_share=0.0).items()}
    keep = [i for i in range(len(d["y"])) if d["target"][i].any()][:n_curves]
    fm = family_model(FAMILY)

    def model(data):  # bayescale's sampler: one data pytree, observed site "y"; one compile for every curve
        fm(data["t"], data["ctx"], data["y"])

    settings = SamplerSettings(num_chains=4, num_warmup=draws, num_samples=draws, target_accept=0.99)
    items, lq, sds, ok, secs, divs = [], [], [], [], [], []
    for j, i in enumerate(keep):
        data = {"t": d["t"][i], "ctx": d["ctx"][i], "y": d["y"][i]}
        t0 = time.perf_counter()
        post, _, stats, _ = run_nuts(model, data, jax.random.PRNGKey(seed + j), settings, n_params=6, progress=False)
        secs.append(time.perf_counter() - t0)
        div = int(np.asarray(stats["diverging"]).sum())
        rhat = max(float(np.max(np.asarray(az.rhat(np.asarray(v))))) for v in post.values())
        ok.append(bool(div == 0 and rhat < 1.01))
        divs.append(div)
        flat = {k: np.asarray(v).reshape(-1, *np.shape(v)[2:]) for k, v in post.items()}
        mu = np.asarray(Predictive(fm, posterior_samples=flat, return_sites=["mu"])(
            jax.random.PRNGKey(0), d["t"][i], d["ctx"][i])["mu"])[:, d["target"][i]]
        eps = np.random.default_rng(seed + j).standard_normal(mu.shape)
        ly = np.log(mu) + flat["sigma"][:, None] * eps  # the prior's multiplicative noise: ln y ~ N(ln mu, sigma)
        items.append(_curves(d, i))
        lq.append(np.quantile(ly, NUTS_Q, axis=0))
        sds.append(ly.std(axis=0))
        print(f"  nuts {j + 1}/{len(keep)}: {secs[-1]:.1f}s divergences={div} r-hat={rhat:.3f}", flush=True)
    ref = {"items": items, "lq": lq, "sd": sds, "ok": ok, "secs": secs, "div": divs}
    if cache is not None:
        arrays = {"key": np.array(key), "n": np.array(len(items)), "ok": np.array(ok), "secs": np.array(secs),
                  "div": np.array(divs)}
        for j, (xc, yc, xq, yq) in enumerate(items):
            arrays.update({f"xc{j}": xc, f"yc{j}": yc, f"xq{j}": xq, f"yq{j}": yq, f"lq{j}": lq[j], f"sd{j}": sds[j]})
        np.savez(cache, **arrays)
    return ref


def _gap(ref: dict, preds) -> dict:
    gaps, gaps_sd, cov, width, ok, sd_z, wratio = [], [], [], [], [], [], []
    for (xc, yc, xq, yq), p, lq_nuts, sd, good in zip(ref["items"], preds, ref["lq"], ref["sd"], ref["ok"]):
        ok.append(np.full(len(yq), good))
        sd_z.append(sd / max(np.log(yc).std(), 1e-3))  # NUTS predictive sd in the PFN's normalised units
        lq_pfn = np.log(p.quantile(NUTS_Q))
        gaps.append(np.abs(lq_pfn - lq_nuts))
        gaps_sd.append(np.abs(lq_pfn - lq_nuts) / sd)
        cov.append((yq >= np.exp(lq_pfn[0])) & (yq <= np.exp(lq_pfn[-1])))
        width.append(lq_pfn[-1] - lq_pfn[0])
        wratio.append(width[-1] / (lq_nuts[-1] - lq_nuts[0]))
    g, gs, ok = np.concatenate(gaps, axis=1), np.concatenate(gaps_sd, axis=1), np.concatenate(ok)
    sd_z, wratio = np.concatenate(sd_z), np.concatenate(wratio)
    edges = np.quantile(sd_z, [0, 0.25, 0.5, 0.75, 1])
    by_sd = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (sd_z >= lo) & (sd_z <= hi)
        by_sd.append({"nuts_sd_z": [float(lo), float(hi)], "median_abs_gap50_in_nuts_sd": float(np.median(gs[2, m])),
                      "median_width90_ratio_pfn_to_nuts": float(np.median(wratio[m]))})
    def per_q(v):
        return dict(zip(map(str, NUTS_Q), np.asarray(v).tolist()))

    return {"median_abs_gap_ln_y": per_q(np.median(g, axis=1)),
            "median_abs_gap_in_nuts_sd": per_q(np.median(gs, axis=1)),
            "median_abs_gap_in_nuts_sd_gate_passed": per_q(np.median(gs[:, ok], axis=1)),
            "p90_abs_gap_in_nuts_sd": per_q(np.quantile(gs, 0.9, axis=1)),
            "by_nuts_sd_quartile": by_sd, "coverage90": float(np.concatenate(cov).mean()),
            "median_width90_ln_y": float(np.median(np.concatenate(width)))}


def nuts_agreement(n_curves: int, draws: int, seed: int, cache: Path | None = None,
                   family_weights: Path = FAMILY_WEIGHTS) -> dict:
    """PFN quantiles against the matched-prior NUTS ones: the single-family PFN (raw network) and the shipped one."""
    from bayescale.pfn import predictive_many
    from bayescale.pfn.infer import load

    ref = nuts_reference(n_curves, draws, seed, cache)
    queries = [(xc, yc, xq) for xc, yc, xq, _ in ref["items"]]
    cov_n, w_n = [], []
    for (xc, yc, xq, yq), lq in zip(ref["items"], ref["lq"]):
        cov_n.append((yq >= np.exp(lq[0])) & (yq <= np.exp(lq[-1])))
        w_n.append(lq[-1] - lq[0])
    res = {"family": FAMILY, "curves": len(ref["items"]), "targets": int(sum(len(q) for *_, q in queries)),
           "context_points": [int(min(len(c) for _, c, _ in queries)), int(max(len(c) for _, c, _ in queries))],
           "nuts_draws": f"4 chains x ({draws} warm-up + {draws}) draws, target_accept 0.99, dense mass, "
                         "bayescale's multi-start MAP init",
           "quantiles": NUTS_Q.tolist(), "nuts_ok_share": float(np.mean(ref["ok"])),
           "nuts_divergent_fits": int(np.sum(np.asarray(ref["div"]) > 0)),
           "nuts_seconds_median": float(np.median(ref["secs"])),
           "coverage90_nuts": float(np.concatenate(cov_n).mean()),
           "median_width90_ln_y_nuts": float(np.median(np.concatenate(w_n)))}
    fw = Path(family_weights)
    if fw.exists():
        fam = load(fw)
        fpreds = predictive_many(queries, weights=fw, calibrated=False, error="raw")
        bw = np.diff(fpreds[0].borders)
        res["family_pfn"] = {"weights": str(fw.relative_to(ROOT) if fw.is_relative_to(ROOT) else fw),
                             "train_command": FAMILY_TRAIN, "step": fam.info["step"], "val_nll": fam.info["val_nll"],
                             "train_seconds": fam.info["train_seconds"], "prior": fam.info.get("prior"),
                             "bin_width_z": [float(bw.min()), float(np.median(bw))], **_gap(ref, fpreds)}
    res["shipped_pfn"] = _gap(ref, predictive_many(queries, error="raw"))
    return res


def speed(seed: int) -> dict:
    import bayescale as bs
    from bayescale.pfn import predictive_many

    from benchmarks.pfn_speed import batch

    rev = bs.datasets.revisiting()
    curves = batch()
    predictive_many(curves)  # compile
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        preds = predictive_many(curves)
        for p in preds:
            p.quantile(np.array([0.05, 0.5, 0.95]))
        times.append(time.perf_counter() - t0)
    c = rev[rev.curve == rev.curve.iloc[0]]
    tr = c[c.train]
    fits = []
    for k in range(2):  # the first call compiles (cached on disk afterwards); report both
        t0 = time.perf_counter()
        bs.fit(tr, "M4", x="x", y="y", seed=seed + k, progress=False, likelihood=LEGACY_LIKELIHOOD)
        fits.append(time.perf_counter() - t0)
    ms = 1000 * min(times) / 72
    return {"pfn_batch72_seconds": min(times), "pfn_ms_per_curve": ms, "pfn_queries": int(sum(len(q) for *_, q in curves)),
            "nuts_M4_fit_seconds_first": fits[0], "nuts_M4_fit_seconds_warm": fits[1],
            "nuts_settings": "4 chains x (1000 warm-up + 1000 draws), default multi-start init",
            "speedup_per_curve_vs_warm_nuts": fits[1] / (ms / 1000)}


def plot(results: dict, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axs = plt.subplots(1, 2, figsize=(10, 4))
    ax = axs[0]
    for r, mk in zip(results["calibration"], "os"):
        ax.plot(LEVELS, [r["coverage"][str(lv)] for lv in LEVELS], mk + "-", label=f"{r['split']} split")
    for r, mk, c in zip(results.get("calibration_raw", []), "os", ("C0", "C1")):
        ax.plot(LEVELS, [r["coverage"][str(lv)] for lv in LEVELS], mk + "--", color=c, alpha=0.5, mfc="none",
                label=f"{r['split']}, raw network")
    ax.plot([0.45, 1], [0.45, 1], "k:", lw=1)
    ax.set_xlabel("nominal central interval")
    ax.set_ylabel("share of held-out prior targets inside")
    ax.set_title("PFN (recalibrated) on held-out prior draws")
    ax.legend()
    ax = axs[1]
    for r in results["calibration"]:
        h = np.asarray(r["pit_hist"], float)
        ax.step(np.linspace(0, 1, 21)[:-1], h / h.mean(), where="post", label=f"{r['split']} split")
    ax.axhline(1, color="k", ls=":", lw=1)
    ax.set_xlabel("PIT = predictive CDF at the true value")
    ax.set_ylabel("density (uniform = 1)")
    ax.set_title("PIT histogram (recalibrated)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def tables(out: Path) -> list:
    """The PFN's tables from ``pfn.json``: (a) prior-draw calibration and per family, (b) agreement with NUTS and by
    NUTS predictive sd, (c, d) speed and size."""
    path = Path(out) / "pfn.json"
    res = load_json(path)
    if res is None:
        return []
    meta, info, cmd = res["machine"], res["weights"], res["machine"]["command"]
    weights = (f"weights `bayescale/pfn/weights/pfn_{info['config_name']}.npz` ({info['n_params']:,} parameters; "
               f"{info['step']} steps of {info['config']['batch']} curves, {info['train_seconds'] / 60:.0f} min on "
               f"{info['hardware']}; validation NLL {info['val_nll']:.3f} in normalised units)")
    src = f"{describe(meta)}; {weights}; {shown(path)}"
    rows = [(r, "recalibrated" if r.get("calibrated", True) else "raw network") for r in res["calibration"]]
    rows += [(r, "raw network") for r in res.get("calibration_raw", [])]
    out_tables = [Table("pfn_prior_calibration", cmd, src,
                        ["split", "predictive", "curves", "targets", *(f"{int(lv * 100)}%" for lv in LEVELS),
                         "max gap (pts)", "NLL mean", "NLL mean, 1% trimmed", "NLL median"],
                        [[r["split"], kind, r["curves"], r["targets"],
                          *(f"{r['coverage'][str(lv)]:.3f}" for lv in LEVELS), f"{r['max_abs_gap_pts']:.1f}",
                          f"{r['nll_mean']:.3f}", f"{r['nll_mean_trimmed_1pct']:.3f}", f"{r['nll_median']:.3f}"]
                         for r, kind in sorted(rows, key=lambda rk: rk[0]["split"] != "prefix")])]
    out_tables.append(Table("pfn_prior_families", cmd, f"the prefix split of the table above, recalibrated; {src}",
                            ["family", "90% coverage", "median NLL"],
                            [[k, f"{v['coverage']['0.9']:.2f}", f"{v['nll']:.2f}"]
                             for k, v in res["calibration"][0]["per_family"].items()]))
    a = res.get("nuts")
    if a and "shipped_pfn" in a:
        def q(g, key="median_abs_gap_in_nuts_sd"):
            return ", ".join(f"q{float(k) * 100:g} {v:.2f}" for k, v in g[key].items())

        def row(name, g):
            return [name, q(g), q(g, "p90_abs_gap_in_nuts_sd"), q(g, "median_abs_gap_in_nuts_sd_gate_passed"),
                    f"{g['coverage90']:.3f}", f"{g['median_width90_ln_y']:.3f}"]

        nsrc = (f"{a['curves']} curves of the {a['family']}-only prior ({a['context_points'][0]}-"
                f"{a['context_points'][1]} context points, {a['targets']} extrapolated points); "
                f"NUTS {a['nuts_draws']}, "
                f"{a['nuts_ok_share']:.0%} of its fits without divergence and with r-hat < 1.01; {src}")
        nrows = []
        f = a.get("family_pfn")
        if f:
            nrows.append(row(f"PFN trained on the {a['family']}-only prior (raw network; {f['step']} steps, "
                             f"validation NLL {f['val_nll']:.3f})", f))
        nrows += [row("shipped PFN (mixture prior, recalibrated)", a["shipped_pfn"]),
                  ["NUTS (the reference)", "0", "0", "0", f"{a['coverage90_nuts']:.3f}",
                   f"{a['median_width90_ln_y_nuts']:.3f}"]]
        out_tables.append(Table("pfn_nuts", cmd, nsrc,
                                ["predictive", "gap, median over points", "gap, 90th percentile",
                                 "gap, median over the gate-passing fits", "90% coverage of the true values",
                                 "median 90% width (ln y)"], nrows))
        if f:
            out_tables.append(Table(
                "pfn_nuts_by_sd", cmd, f"the single-family PFN of the table above, trained by `{f['train_command']}`;"
                f" its bins are {f['bin_width_z'][0]:.3f} (narrowest) to {f['bin_width_z'][1]:.3f} (median) wide in "
                f"these units; {shown(path)}",
                ["NUTS predictive sd of ln y / sd of the context's ln y", "median gap at q50 (NUTS sds)",
                 "90% width / NUTS's"],
                [[f"{b['nuts_sd_z'][0]:.2f}-{b['nuts_sd_z'][1]:.2f}", f"{b['median_abs_gap50_in_nuts_sd']:.2f}",
                  f"{b['median_width90_ratio_pfn_to_nuts']:.2f}"] for b in f["by_nuts_sd_quartile"]]))
    s = res["speed"]
    out_tables.append(Table(
        "pfn_speed_size", cmd, f"{src}; load average at the start of the run {meta.get('loadavg_start', '?')}",
        ["what", "value"],
        [["one batched call on 72 revisiting curves (default predictive: 8 views, extrapolation error)",
          f"{s['pfn_batch72_seconds']:.2f} s for {s['pfn_queries']} query points"],
         ["per curve", f"{s['pfn_ms_per_curve']:.1f} ms"],
         [f"one NUTS fit of M4 ({s['nuts_settings']})", f"{s['nuts_M4_fit_seconds_warm']:.1f} s warm, "
          f"{s['nuts_M4_fit_seconds_first']:.1f} s with compilation"],
         ["NUTS / PFN, per curve", f"{s['speedup_per_curve_vs_warm_nuts']:.0f}x"],
         ["parameters", f"{info['n_params']:,} ({info['config']['n_layers']} layers, d_model "
          f"{info['config']['d_model']}, {info['config']['n_heads']} heads, {info['config']['n_bins']} bins)"],
         ["weights file", f"{res['weights_mb']:.1f} MB"]]))
    return out_tables


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pfn", description=__doc__.split("\n")[0])
    ap.add_argument("--curves", type=int, default=1024, help="held-out prior curves per split")
    ap.add_argument("--nuts-curves", type=int, default=64, help="single-family curves compared with NUTS (0: skip)")
    ap.add_argument("--draws", type=int, default=1000, help="NUTS warm-up and draws per chain for (b)")
    ap.add_argument("--seed", type=int, default=TEST_SEED)
    ap.add_argument("--nuts-cache", help="cache file (.npz) for the NUTS reference of (b); it does not depend on the PFN")
    ap.add_argument("--nuts-only", action="store_true", help="only compute (and cache) the NUTS reference of (b)")
    ap.add_argument("--family-weights", default=str(FAMILY_WEIGHTS),
                    help=f"the {FAMILY}-only PFN of (b) (default: {FAMILY_WEIGHTS.relative_to(ROOT)}; skipped if absent)")
    output_args(ap)
    args = ap.parse_args(argv)

    import bayescale as bs
    from bayescale.pfn.infer import load
    from benchmarks.speed import machine_info

    meta = machine_info("python -m benchmarks.pfn " + " ".join(argv if argv is not None else sys.argv[1:]))
    if args.nuts_only:
        nuts_reference(args.nuts_curves, args.draws, args.seed + 2, args.nuts_cache)
        return
    if not bs.pfn.available():
        raise SystemExit("no valid bundled PFN weights: train them first (bayescale pfn train --config small ...)")
    L = load()
    info = {k: v for k, v in L.info.items() if k != "history_rows"}
    res = {"machine": meta, "weights": info, "weights_mb": L.path.stat().st_size / 1e6, "calibration": [],
           "calibration_raw": []}
    for split, off in (("prefix", 0), ("random", 1)):
        for cal, key in ((True, "calibration"), (False, "calibration_raw")):
            res[key].append(calibration(args.curves, split, args.seed + off, calibrated=cal))
            r = res[key][-1]
            print(f"{split} {key}: coverage {r['coverage']} NLL {r['nll_mean']:.3f}", flush=True)
    res["speed"] = speed(0)
    print("speed", res["speed"], flush=True)
    if args.nuts_curves > 0:
        res["nuts"] = nuts_agreement(args.nuts_curves, args.draws, args.seed + 2, args.nuts_cache,
                                     Path(args.family_weights))
        print("nuts", {k: v for k, v in res["nuts"].items()}, flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pfn.json").write_text(json.dumps(res, indent=2, default=float) + "\n")
    plot(res, out / "pfn_calibration.png")
    publish(tables, args)


if __name__ == "__main__":
    main()
