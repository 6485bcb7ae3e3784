"""What the benchmark scripts share: paths and run records, the one renderer of RESULTS.md's tables, and the pieces
of the run-selection replay that ``active_learning`` and ``replay_rescore`` both use.

Tables: a benchmark's ``tables(out)`` turns its result file(s) into :class:`Table` s; :func:`write_tables` puts each
between ``<!-- table: NAME -->`` and ``<!-- /table -->`` in RESULTS.md, the command that produced it on the line
above the table. Everything outside the markers is written by people and never touched.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
RESULTS_MD = ROOT / "benchmarks" / "RESULTS.md"


# -- run records ----------------------------------------------------------------------------------------------
def command_line(module: str, argv=None) -> str:
    """``python -m benchmarks.<module> ...``: the command a result file records, as anyone would type it."""
    args = sys.argv[1:] if argv is None else list(argv)
    return shlex.join(["python", "-m", f"benchmarks.{module}", *args])


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def loadavg() -> list[float]:
    try:
        return [float(v) for v in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def _git(*args) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine_info(command: str) -> dict:
    """CPU model, cores, JAX backend, package versions, git commit, date and the command behind the results."""
    from importlib import metadata

    import jax

    from bayescale.config import cpu_model, usable_cores

    versions = {}
    for p in ("bayescale", "jax", "jaxlib", "numpyro", "optax", "arviz", "scipy", "numpy", "emcee", "pandas"):
        try:
            versions[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            versions[p] = None
    return {
        "date": now(), "command": command, "git_commit": _git("rev-parse", "HEAD"),
        "bayescale_uncommitted_changes": bool(_git("status", "--porcelain", "bayescale")),
        "cpu_model": cpu_model(), "cpu_count": os.cpu_count(), "cpus_usable": usable_cores(),
        "loadavg_start": loadavg(), "python": platform.python_version(), "platform": platform.platform(),
        "jax_backend": jax.default_backend(), "jax_devices": [str(d) for d in jax.devices()],
        "jax_persistent_cache": jax.config.jax_compilation_cache_dir,
        "BAYESCALE_JAX_CACHE": os.environ.get("BAYESCALE_JAX_CACHE"), "versions": versions,
    }


def machine_line() -> str:
    """``AMD EPYC (2 cores, JAX cpu)``: the machine, for result files that keep it in one line."""
    import jax

    from bayescale.config import cpu_model

    return f"{cpu_model()} ({os.cpu_count()} cores, JAX {jax.default_backend()})"


def describe(m: dict) -> str:
    """One line on the machine of :func:`machine_info`: ``AMD EPYC (2 cores, JAX cpu), <date>``."""
    return f"{m['cpu_model']} ({m['cpu_count']} cores, JAX {m['jax_backend']}), {m['date']}"


def shown(path: Path) -> str:
    """``path`` as the tables show it: relative to the repository where it lies inside it."""
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def fresh_process(code: str, args: list, env: dict, cwd: Path = ROOT) -> dict:
    """``code`` run as a fresh Python process in ``cwd`` (first on its import path: the bayescale it imports):
    wall seconds, peak RSS (MiB) and the phases it reports (its last stderr line, JSON)."""
    with tempfile.TemporaryFile("w+") as log:  # a file, not a pipe: a chatty child cannot block on a full pipe
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                             stderr=log)
        _, status, usage = os.wait4(p.pid, 0)  # wait4: this child's own peak memory
        wall = time.perf_counter() - t0
        log.seek(0)
        err = log.read()
    code_ = os.waitstatus_to_exitcode(status)
    if code_:
        raise RuntimeError(f"script failed ({code_}):\n{err[-2000:]}")
    return {"wall": wall, "peak_mib": usage.ru_maxrss / 1024, **json.loads(err.strip().splitlines()[-1])}


def save_json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1, default=float) + "\n")


def load_json(path: Path):
    return json.loads(path.read_text()) if path.exists() else None


def output_args(ap) -> None:
    """``--out`` (result files) and ``--md`` (where the tables go; RESULTS.md unless ``--out`` is elsewhere)."""
    ap.add_argument("--out", type=Path, default=RESULTS, help="folder for the result files (default %(default)s)")
    ap.add_argument("--md", type=Path, help="Markdown file whose tables to update (default benchmarks/RESULTS.md "
                                            "when --out is the default, else none)")


def publish(tables, args) -> None:
    """Write the tables ``tables(args.out)`` renders to ``args.md`` (see :func:`output_args`)."""
    md = args.md or (RESULTS_MD if args.out.resolve() == RESULTS.resolve() else None)
    if md is not None:
        names = write_tables(tables(args.out), md)
        print(f"tables {', '.join(names)} -> {md}")


def thin_log(d: pd.DataFrame, col: str, k: int) -> pd.DataFrame:
    """At most ``k`` rows of ``d``, the nearest to ``k`` points evenly spaced in ln ``col`` (index reset)."""
    if len(d) <= k:
        return d.reset_index(drop=True)
    x = np.log(d[col].to_numpy(float))
    idx = np.unique(np.abs(x[None, :] - np.linspace(x.min(), x.max(), k)[:, None]).argmin(axis=1))
    return d.iloc[idx].reset_index(drop=True)


# -- tables ---------------------------------------------------------------------------------------------------
TABLE_START, TABLE_END = "<!-- table: {} -->", "<!-- /table -->"


@dataclass
class Table:
    """One Markdown table of RESULTS.md. ``command`` regenerates it; ``source`` says where and when it was measured
    and which file holds the numbers; ``history`` (when not empty) says why no single command produced it."""

    name: str
    command: str
    source: str
    header: list
    rows: list
    history: str = ""


def render(t: Table) -> str:
    head = (f"To be regenerated by: `{t.command}`. No single command produced these numbers: they come from "
            f"{t.history}. Source: {t.source}." if t.history else f"Command: `{t.command}`. Source: {t.source}.")
    lines = [TABLE_START.format(t.name), head, "", "| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    for row in t.rows:
        if len(row) != len(t.header):
            raise ValueError(f"table {t.name}: a row of {len(row)} cells under {len(t.header)} columns")
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join([*lines, TABLE_END])


def _replace(text: str, t: Table) -> str:
    start, block = TABLE_START.format(t.name), render(t)
    if start not in text:  # a new table: appended, for a person to move and introduce
        return text.rstrip("\n") + "\n\n" + block + "\n"
    head, rest = text.split(start, 1)
    if TABLE_END not in rest:
        raise ValueError(f"table {t.name}: no {TABLE_END} after its start marker")
    return head + block + rest.split(TABLE_END, 1)[1]


def write_tables(tables, md: Path) -> list[str]:
    """Put each table between its markers in ``md`` (appended at the end if new); returns their names."""
    text = md.read_text() if md.exists() else "# Benchmark results\n"
    names = []
    for t in tables:
        text = _replace(text, t)
        names.append(t.name)
    md.write_text(text)
    return names


def stale_tables(tables, md: Path) -> list[str]:
    """Names of the tables whose block in ``md`` is missing or differs from what their result files give."""
    text = md.read_text() if md.exists() else ""
    return [t.name for t in tables if _replace(text, t) != text]


# -- the run-selection replay ---------------------------------------------------------------------------------
BASELINES = ("random", "cheapest", "grid", "uncertain")
OURS = ("ours", "ours_goal", "ours_cool", "ours_plan", "ours_cal", "ours_tau", "ours_local")
LEVELS = (0.5, 0.3, 0.2)  # looser accuracy levels: fractions of the starting fit's error
HOFFMANN = {"E": 1.69, "A": 406.4, "alpha": 0.34, "B": 410.7, "beta": 0.28}  # Hoffmann et al. 2022


def hoffmann_loss(N, D):
    p = HOFFMANN
    return p["E"] + p["A"] / N ** p["alpha"] + p["B"] / D ** p["beta"]


def simulated_chinchilla(world: int, noise: float = 0.01) -> pd.DataFrame:
    """The real Chinchilla design (N, D, C) with ``loss`` = Hoffmann et al.'s law x lognormal noise (seed ``world``);
    ``truth`` is the noise-free law."""
    import bayescale as bs

    runs = bs.datasets.chinchilla()
    truth = hoffmann_loss(runs["N"], runs["D"])
    return runs.assign(loss=truth * np.exp(np.random.default_rng(world).normal(0, noise, len(runs))), truth=truth)


# The noise model of the tables measured before robust noise became bs.fit's default (2026-12-06): the scripts not
# rerun since fit with it, so that their commands still reproduce their tables (RESULTS.md says which)
LEGACY_LIKELIHOOD = "lognormal"
NOISE_MODELS = ("lognormal", "logstudentt")  # the noise models the benchmarks compare (the default and the one before)


def suffix(likelihood: str) -> str:
    """File and table name suffix of a likelihood's results (none for lognormal, the default before 2026-12-06)."""
    return "" if likelihood == LEGACY_LIKELIHOOD else f"_{likelihood}"


def fit_short(train: pd.DataFrame, law: str, inputs: list, draws: int, seed: int,
              likelihood: str = LEGACY_LIKELIHOOD):
    """The replay's refit after each acquisition: 2 chains x (draws + draws), as a user deciding quickly would
    (lognormal noise unless told: :data:`LEGACY_LIKELIHOOD`)."""
    import bayescale as bs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bs.fit(train, law, inputs={c: c for c in inputs}, y="y", chains=2, warmup=draws, samples=draws,
                      seed=seed, progress=False, likelihood=likelihood)


def score_fit(fit, target: pd.DataFrame, y_true: np.ndarray, seed: int) -> tuple[float, float, float, float]:
    """RMSLE of the predictive median, mean log predictive density, the posterior sd of the log mean curve (mean
    over targets: the uncertainty the acquisition narrows) and the mean squared z of the truth under it (~1 when
    calibrated; meaningful where ``y_true`` is a noise-free curve)."""
    from bayescale.scoring import rmsle

    _, mu, obs = fit.predictive_draws(target, seed=seed)
    lpd = float(np.mean(fit.log_predictive_density(target, y_true)))
    lmu = np.log(np.maximum(mu, 1e-300))
    sd = lmu.std(axis=0)
    z2 = float(np.mean(((np.median(lmu, axis=0) - np.log(y_true)) / np.maximum(sd, 1e-12)) ** 2))
    return float(rmsle(np.median(obs, axis=0), y_true)), lpd, float(sd.mean()), z2


_TAU: dict = {}


def pool_tau(pool: pd.DataFrame, law: str, inputs: list, likelihood: str = LEGACY_LIKELIHOOD) -> float:
    """tau (ln-units per decade beyond the runs) by leave-future-out on the whole pool: the fit split, never the
    targets. What a user would know about the domain's extrapolation error from earlier runs of that kind."""
    key = (law, likelihood, int(pd.util.hash_pandas_object(pool[inputs + ["y"]], index=False).sum()))
    if key not in _TAU:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = fit_short(pool, law, inputs, 300, 0, likelihood)
            _TAU[key] = f.calibrate(seed=0, chains=2, warmup=300, samples=300, progress=False).discrepancy
    return _TAU[key]


def is_local(strategy: str) -> bool:
    """Strategies that fit the law locally around the targets: ours_local, and each baseline's rule with that fit
    ("grid+local", ...), so that the fit's own gain is not credited to the choice of runs."""
    return strategy == "ours_local" or strategy.endswith("+local")


def chinchilla_setup(min_tokens_per_param: float = 0.0, runs: pd.DataFrame | None = None) -> dict:
    """The replay on Chinchilla runs (real unless ``runs`` given): pool below 1e21 FLOP (D/N at least
    ``min_tokens_per_param``), start the 8 cheapest, 12 acquisitions (ours up to 60), target the runs >= 1e21."""
    import bayescale as bs

    runs = bs.datasets.chinchilla() if runs is None else runs
    runs = runs.rename(columns={"loss": "y"}).assign(cost=runs["C"])
    pool = runs[(runs["C"] < 1e21) & (runs["D"] >= min_tokens_per_param * runs["N"])].reset_index(drop=True)
    target = runs[runs["C"] >= 1e21].reset_index(drop=True)
    y_true = (target["truth"] if "truth" in target else target["y"]).to_numpy()
    return dict(pool=pool, start=list(pool["cost"].nsmallest(8).index), n_acquire=12, max_acquire=60,
                target=target[["N", "D"]], y_true=y_true, target_q=target[["N", "D"]], law="chinchilla",
                inputs=["N", "D"])


def starts_setup(k: int, min_tokens_per_param: float = 0.0) -> dict:
    """Start set ``k`` of the real Chinchilla pool: 8 runs drawn (seed k) from its 20 cheapest."""
    st = chinchilla_setup(min_tokens_per_param)
    cheap = st["pool"]["cost"].nsmallest(20).index.to_numpy()
    st["start"] = sorted(int(i) for i in np.random.default_rng(k).choice(cheap, size=8, replace=False))
    return st


def compute_to_reach(steps: list[dict], threshold: float) -> float:
    """Compute spent when the error first falls to ``threshold`` or below (inf if never)."""
    for s in steps:
        if s["rmsle"] <= threshold * (1 + 1e-12):
            return s["compute"]
    return float("inf")


def held(steps: list[dict], cgrid: np.ndarray, key: str = "rmsle") -> np.ndarray:
    """``key`` after the last acquisition within each compute of ``cgrid`` (held after the last one)."""
    comp = np.array([s["compute"] for s in steps])
    val = np.array([s[key] for s in steps])
    i = np.searchsorted(comp, cgrid * (1 + 1e-12), side="right") - 1
    return np.where(i >= 0, val[np.clip(i, 0, None)], np.nan)


def pooled_summary(worlds: list[dict], n_acquire: int = 12) -> dict:
    """Error pooled over the worlds (root mean square of the worlds' RMSLE) against compute; compute to reach the
    threshold (the best baseline's pooled error after the protocol's acquisitions) and looser levels on those
    pooled curves, and from where the pooled curve stays at or below each; per world, how often ours needs <= half
    the best baseline's compute. The same for the posterior sd of the target, with its calibration (mean z^2 of
    the true curve, ~1 when the bands are honest)."""
    strats = [s for s in worlds[0] if all(s in w for w in worlds)]
    comps = [s["compute"] for w in worlds for t in w.values() for s in t]
    cgrid = np.geomspace(min(comps), max(comps), 600)

    def rms(v, axis=None):
        return np.sqrt(np.nanmean(np.square(v), axis=axis))

    def at_n(w, s):
        return w[s][min(n_acquire, len(w[s]) - 1)]

    curve = {s: rms([held(w[s], cgrid) for w in worlds], axis=0) for s in strats}
    sd_curve = {s: rms([held(w[s], cgrid, "sd") for w in worlds], axis=0) for s in strats}
    err_n = {s: float(rms([at_n(w, s)["rmsle"] for w in worlds])) for s in strats}
    base = {s: v for s, v in err_n.items() if s not in OURS}
    thr_from = min(base, key=base.get)
    start = float(rms([w[strats[0]][0]["rmsle"] for w in worlds]))
    levels = {"threshold": base[thr_from], **{f"{f:g}": f * start for f in LEVELS}}
    ours = [s for s in strats if s in OURS]

    def first_at(c, lev):
        hit = c <= lev * (1 + 1e-12)
        return float(cgrid[np.argmax(hit)]) if hit.any() else float("inf")

    def stays_at(c, lev):
        above = np.flatnonzero(~(c <= lev * (1 + 1e-12)))
        if not len(above):
            return float(cgrid[0])
        return float(cgrid[above[-1] + 1]) if above[-1] + 1 < len(cgrid) else float("inf")

    def over(v, b):
        return {o: (v[o] / b if np.isfinite(b) else float("nan")) for o in ours}

    out = {}
    for name, lev in levels.items():
        hit = {s: first_at(curve[s], lev) for s in strats}
        best = min((v, k) for k, v in hit.items() if k not in OURS)
        stay = {s: stays_at(curve[s], lev) for s in strats}
        best_stay = min((v, k) for k, v in stay.items() if k not in OURS)
        per_world = {o: [] for o in ours}
        for w in worlds:
            r_ = {s: compute_to_reach(w[s], lev) for s in strats}
            b_ = min(v for k, v in r_.items() if k not in OURS)
            for o in ours:
                per_world[o].append(r_[o] / b_ if np.isfinite(b_) else float("nan"))
        ratio = over(hit, best[0])
        out[name] = {"rmsle": lev, "compute_to_reach": hit, "best_baseline": best[1], "ratio": ratio,
                     "compute_to_stay": stay, "best_baseline_stay": best_stay[1],
                     "ratio_stay": over(stay, best_stay[0]),
                     "met": {o: bool(ratio[o] <= 0.5) for o in ours}, "per_world_ratio": per_world,
                     "per_world_met": {o: int(sum(r <= 0.5 for r in v)) for o, v in per_world.items()}}
    sd_base = {s: float(rms([at_n(w, s)["sd"] for w in worlds])) for s in strats}
    sd_start = float(rms([w[strats[0]][0]["sd"] for w in worlds]))
    sd_levels = {}
    for name, lev in (("threshold", min(v for k, v in sd_base.items() if k not in OURS)),
                      *((f"{f:g}", f * sd_start) for f in LEVELS)):
        hit = {s: first_at(sd_curve[s], lev) for s in strats}
        best = min((v, k) for k, v in hit.items() if k not in OURS)
        sd_levels[name] = {"sd": lev, "compute_to_reach": hit, "best_baseline": best[1], "ratio": over(hit, best[0])}
    return {"worlds": len(worlds), "error_after_n": err_n,
            "compute_after_n": {s: float(np.mean([at_n(w, s)["compute"] for w in worlds])) for s in strats},
            "start_error": start, "threshold_from": thr_from, "levels": out, "sd_after_n": sd_base,
            "sd_levels": sd_levels,
            "z2": {s: float(np.mean([st["z2"] for w in worlds for st in w[s][1:]])) for s in strats},
            "final": {s: float(rms([w[s][-1]["rmsle"] for w in worlds])) for s in strats},
            "runs_at_end": {s: float(np.mean([w[s][-1]["n"] for w in worlds])) for s in strats},
            "curve_grid": cgrid.tolist(), "curves": {s: v.tolist() for s, v in curve.items()},
            "sd_curves": {s: v.tolist() for s, v in sd_curve.items()}}


def levels_table(name: str, sm: dict, unit: str, command: str, source: str, history: str = "") -> Table:
    """Ours / the best baseline at each error level of a :func:`pooled_summary`: compute to first reach (and in how
    many ``unit`` ours needed at most half the best baseline's compute there) and to stay at or below."""
    ours = [o for o in OURS if o in sm["curves"]]
    header = ["level", "error", "best baseline to reach", "its compute",
              *(f"{o} / best ({unit} <= 0.5x)" for o in ours), "best baseline to stay", "its compute",
              *(f"{o} / best, to stay" for o in ours)]
    rows = []
    for k, v in sm["levels"].items():
        b, bs_ = v["best_baseline"], v["best_baseline_stay"]
        rows.append([k, f"{v['rmsle']:.4f}", b, f"{v['compute_to_reach'][b]:.3g}",
                     *(f"{v['ratio'][o]:.3g} ({v['per_world_met'][o]}/{sm['worlds']})" for o in ours),
                     bs_, f"{v['compute_to_stay'][bs_]:.3g}", *(f"{v['ratio_stay'][o]:.3g}" for o in ours)])
    return Table(name, command, source, header, rows, history)


# -- self-check -----------------------------------------------------------------------------------------------
def self_check() -> None:
    """The renderer keeps everything outside the markers; the pooled summary reads reach and stay off the curves."""
    t = Table("demo", "python -m benchmarks.demo", "here, now", ["a", "b"], [[1, "x"]])
    with tempfile.TemporaryDirectory() as d:
        md = Path(d) / "R.md"
        md.write_text("# R\n\nwritten by a person\n\n<!-- table: demo -->\nold\n<!-- /table -->\n\nafter\n")
        for _ in range(2):  # idempotent
            write_tables([t], md)
        text = md.read_text()
        assert text.count(TABLE_START.format("demo")) == 1 and "old" not in text, text
        assert "written by a person" in text and text.rstrip().endswith("after") and "| 1 | x |" in text, text
        assert "Command: `python -m benchmarks.demo`. Source: here, now." in text and not stale_tables([t], md)
        write_tables([Table("new", "c", "s", ["a"], [[2]], history="2 runs")], md)
        assert md.read_text().rstrip().endswith(TABLE_END) and "To be regenerated by: `c`" in md.read_text()

    def steps(compute, rmsle):
        return [{"n": 8 + i, "compute": c, "rmsle": e, "lpd": 0.0, "sd": e, "z2": 1.0, "ok": True, "last": i}
                for i, (c, e) in enumerate(zip(compute, rmsle))]

    # ours dips below 0.02 at compute 3, comes back above, and stays below only from compute 30
    ours = steps([1, 3, 10, 30, 60], [0.05, 0.015, 0.04, 0.015, 0.012])
    grid = steps([1, 20, 40, 60], [0.05, 0.03, 0.018, 0.016])
    sm = pooled_summary([{"grid": grid, "ours": ours}] * 2, n_acquire=3)
    thr = sm["levels"]["threshold"]
    assert thr["best_baseline"] == "grid" and np.isclose(thr["rmsle"], 0.016)
    assert 3 <= thr["compute_to_reach"]["ours"] < 10 and 30 <= thr["compute_to_stay"]["ours"] < 60
    assert np.isclose(thr["ratio"]["ours"], thr["compute_to_reach"]["ours"] / thr["compute_to_reach"]["grid"])
    assert not np.isfinite(sm["levels"]["0.2"]["compute_to_reach"]["grid"])  # 0.2 x the start (0.01): nobody
    rows = levels_table("x", sm, "worlds", "c", "s").rows
    assert rows[-1][:2] == ["0.2", "0.0100"] and rows[-1][3] == "inf"
    print("benchmarks._common: self-check passed")
