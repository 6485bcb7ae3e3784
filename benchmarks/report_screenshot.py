"""The risk report in a real browser: ``bayescale.risk_report`` on the Chinchilla runs below 1e21 FLOP
(families chinchilla + kaplan, options 70B/1.4T and 35B/2.8T, target loss 2.0), rendered in headless Chromium.

    python -m benchmarks.report_screenshot [--draws 300]

Writes ``benchmarks/results/report_screenshot.png``, ``report_screenshot.json`` (what the browser saw) and the
``report_screenshot`` table of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

from benchmarks._common import (RESULTS, Table, command_line, load_json, machine_line, now, output_args, publish,
                                save_json, shown)


def tables(out: Path = RESULTS) -> list[Table]:
    res = load_json(out / "report_screenshot.json")
    if res is None:
        return []
    c = res["check"]
    return [Table("report_screenshot", res["command"], f"{res['machine']}, {res['timestamp']}; fits 2 chains x "
                  f"({res['draws']} + {res['draws']}); {shown(out / 'report_screenshot.json')}",
                  ["images decoded", "script errors", "embedded PNGs in the DOM"],
                  [[f"{c['images_ok']}/{c['images']}", c["script_errors"], c["img_tags_with_data"]]])]


def main(argv=None) -> dict:
    import bayescale as bs
    from bayescale.decisions import check_in_browser

    ap = argparse.ArgumentParser(prog="python -m benchmarks.report_screenshot", description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=300)
    output_args(ap)
    args = ap.parse_args(argv)
    runs = bs.datasets.chinchilla()
    with warnings.catch_warnings(), tempfile.TemporaryDirectory(prefix="bayescale_report_") as folder:
        warnings.simplefilter("ignore")
        fits = {law: bs.fit(runs[runs["C"] < 1e21], law, inputs={"N": "N", "D": "D"}, y="loss", chains=2,
                            warmup=args.draws, samples=args.draws, seed=0, progress=False)
                for law in ("chinchilla", "kaplan")}
        rep = bs.risk_report(fits=fits, options=["70B,1.4T", "35B,2.8T"], target_loss=2.0, out=folder, seed=0)
        args.out.mkdir(parents=True, exist_ok=True)
        chk = check_in_browser(rep.files["html"], args.out / "report_screenshot.png")
    res = {"command": command_line("report_screenshot", argv), "timestamp": now(), "machine": machine_line(),
           "draws": args.draws, "check": chk}
    save_json(args.out / "report_screenshot.json", res)
    publish(tables, args)
    return res


if __name__ == "__main__":
    main()
