"""The PFN's extrapolation error on real curves (issue 17: honest 50% bands; issue 16: every band producer carries
the error a prediction makes beyond the data), learned on fit splits and scored leave-one-domain-out.

Domains: the four of the revisiting benchmark (IC, NMT, LM, BB), ColPret, datablations, multipower.

- *corpus*: each curve's fit split cut at its 70% quantile of ln x (:func:`benchmarks.pfn_views.selection_task`):
  the PFN (default views and recalibration, no extrapolation error) predicts the later part from the earlier one;
  its errors ``r = ln y - E[ln y]``, predictive sds and distances beyond the context are the corpus's target rows
  of :func:`bayescale.error_model.learn` (family ``pfn``, covariates chosen by that function's own
  leave-one-domain-out selection). Its own rows: that earlier part cut again the same way, the errors a prediction
  from it would read (:func:`bayescale.pfn.infer.own_errors_many`), from which the model learns ``kappa``. No
  held-out run of any suite enters it.
- *score*: for each domain, the model learned on the other domains' corpus only; the PFN with that error updated
  with each curve's own errors (the default), with the corpus prior alone (``own_errors=False``), and without it
  (``error="raw"``) predicts the domain's own held-out runs from its fit split (targets thinned to 20, log-spaced).
  Coverage of central 50/80/90/95% intervals (mean over curves), MSCE over 50-99%, mean log density of ln y, RMSLE
  of the median.
- ``--ship``: learn on every domain's corpus and write ``bayescale/pfn/error_model.json``.

    python -m benchmarks.pfn_error [--ship]
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks._common import Table, command_line, load_json, machine_info, output_args, publish, save_json, shown
from benchmarks.pfn_views import LEVELS, curves, selection_task, summarize
from benchmarks.pfn_views import score as score_curves

COVERAGE = (0.5, 0.8, 0.9, 0.95)
SHIP_PATH = Path(__file__).resolve().parents[1] / "bayescale" / "pfn" / "error_model.json"


def domains() -> dict:
    """domain -> list of curves (curve, fit, held), the revisiting suite split by its domain."""
    import bayescale as bs

    out = {}
    r = bs.datasets.revisiting()
    dom_of = r.groupby("curve")["domain"].first()
    for c in curves("revisiting"):
        out.setdefault(str(dom_of[c["curve"]]), []).append(c)
    for s in ("colpret", "datablations", "multipower"):
        out[s] = curves(s)
    return out


def _span(x) -> float:
    return math.log10(float(np.max(x)) / float(np.min(x)))


def corpus(data: dict) -> pd.DataFrame:
    """Held-out errors of the PFN (no extrapolation error) on every curve's fit split, cut in two."""
    from bayescale.pfn import own_errors_many, predictive_many
    from bayescale.pfn.error import FAMILY, context_noise, held_out_errors

    rows = []
    for dom, cs in data.items():
        tasks = [(c["curve"], t) for c in cs if (t := selection_task(c["fit"])) is not None]
        ctxs = [(ctx["x"].to_numpy(float), ctx["y"].to_numpy(float)) for _, (ctx, _) in tasks]
        preds = predictive_many([(*c, tgt["x"].to_numpy(float)) for c, (_, (_, tgt)) in zip(ctxs, tasks)],
                                error="raw")
        for (curve, (ctx, tgt)), p, own in zip(tasks, preds, own_errors_many(ctxs)):
            e = pd.concat([held_out_errors(p, tgt["y"].to_numpy(float)).assign(kind="target"),
                           own.assign(kind="own", block=0)], ignore_index=True)
            rows.append(e.assign(curve=f"{dom}/{curve}", domain=dom, family=FAMILY, span=_span(ctx["x"]),
                                 noise=context_noise(ctx.sort_values("x")["y"])))
    return pd.concat(rows, ignore_index=True)


def score(cs: list, error, own_errors: bool = True) -> dict:
    """:func:`benchmarks.pfn_views.summarize` of the PFN (default views) on the curves' held-out runs."""
    from bayescale.pfn.infer import DEFAULT_VIEWS

    pairs = [(c["fit"], c["held"]) for c in cs if len(c["held"]) and c["fit"]["x"].nunique() >= 3]
    return summarize(score_curves(pairs, DEFAULT_VIEWS, error, own_errors))


KINDS = {"default": "with error, own runs (default)", "prior": "with error, corpus prior only",
         "raw": "raw (no error)"}


def run() -> dict:
    from bayescale.error_model import learn

    data = domains()
    t0 = time.perf_counter()
    errs = corpus(data)
    n = errs.groupby("kind").size()
    print(f"corpus: {errs['curve'].nunique()} curves, {n['target']} errors beyond their context and {n['own']} own "
          f"errors ({time.perf_counter() - t0:.0f} s)", flush=True)
    tgt = errs[errs["kind"] == "target"]
    res = {"corpus": {d: {"curves": int(g["curve"].nunique()), "errors": int((g["beyond"] > 0).sum())}
                      for d, g in tgt.groupby("domain")}, "domains": {}}
    for dom, cs in data.items():
        model = learn(errs[errs["domain"] != dom], domain="domain", source=f"all domains but {dom}")
        res["domains"][dom] = d = {"model": model.to_dict(), "default": score(cs, model),
                                   "prior": score(cs, model, own_errors=False), "raw": score(cs, "raw")}
        print(f"{dom}: covariates {model.covariates}, kappa {model.kappa:.2f}, "
              + ", ".join(f"{k} cov50/90 {d[k]['cov50']:.2f}/{d[k]['cov90']:.2f} LL {d[k]['ll']:.3f}" for k in KINDS),
              flush=True)
    for kind in KINDS:  # pooled: every curve counts once
        ds = res["domains"].values()
        n = sum(d[kind]["curves"] for d in ds)
        res.setdefault("pooled", {})[kind] = {
            k: sum(d[kind][k] * d[kind]["curves"] for d in ds) / n
            for k in ("rmsle", "ll", *(f"cov{round(v * 100)}" for v in LEVELS))} | {"curves": n}
        p = res["pooled"][kind]
        p["msce"] = float(np.mean([(p[f"cov{round(v * 100)}"] - v) ** 2 for v in LEVELS]))
    return res


def ship() -> Path:
    from bayescale.error_model import learn

    errs = corpus(domains())
    n = errs[errs["beyond"] > 0].groupby("kind").size()
    model = learn(errs, domain="domain", source=(
        "learned by `python -m benchmarks.pfn_error --ship` on the PFN's held-out errors on the fit splits of the "
        "revisiting (IC, NMT, LM, BB), ColPret, datablations and multipower suites, each fit split cut at its 70% "
        f"quantile of ln x ({errs['curve'].nunique()} curves, {n['target']} errors beyond the earlier part, and "
        f"{n['own']} own errors of that part cut again); no held-out run of any suite"))
    SHIP_PATH.write_text(json.dumps(model.to_dict(), indent=1) + "\n")
    print(f"wrote {SHIP_PATH}: covariates {model.covariates}, a {model.a:.3f}, gamma {model.gamma:.3f}, "
          f"omega {model.omega:.3f}, omega_domain {model.omega_domain:.3f}, kappa {model.kappa:.3f}")
    return SHIP_PATH


def tables(out):
    path = out / "pfn_error.json"
    res = load_json(path)
    if res is None:
        return []
    head = ["left-out domain", "curves", "bands", "cov 50%", "cov 80%", "cov 90%", "cov 95%", "MSCE",
            "log density ln y", "RMSLE", "covariates of ln tau; kappa"]
    rows = []
    for dom, d in [*res["domains"].items(), ("pooled", res["pooled"])]:
        for kind in [k for k in KINDS if k in d]:
            m = d[kind]
            cov = "" if dom == "pooled" or kind != "default" else (
                f"{', '.join(d['model']['covariates']) or 'none'}; {d['model']['kappa']:.2f}")
            ll = f"{m['ll']:.3f}" + (f" ± {m['ll_se']:.3f}" if "ll_se" in m else "")
            rows.append([dom, m["curves"], KINDS[kind],
                         *(f"{m[f'cov{round(v * 100)}']:.2f}" for v in COVERAGE), f"{m['msce']:.4f}", ll,
                         f"{m['rmsle']:.4f}", cov])
    corpus_ = ", ".join(f"{k} {v['curves']}" for k, v in res["corpus"].items())
    source = (f"shipped PFN weights, default views and recalibration; error model learned on the other domains' fit "
              f"splits only (curves per domain: {corpus_}), scored on the left-out domain's held-out runs; "
              f"{shown(path)}")
    return [Table("pfn_error", res["machine"]["command"], source, head, rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pfn_error", description=__doc__.split("\n\n")[0])
    ap.add_argument("--ship", action="store_true", help="learn on every domain and write the package's model")
    output_args(ap)
    args = ap.parse_args(argv)
    if args.ship:
        ship()
        return
    meta = machine_info(command_line("pfn_error", argv))
    save_json(args.out / "pfn_error.json", {"machine": meta, **run()})
    publish(tables, args)


if __name__ == "__main__":
    main()
