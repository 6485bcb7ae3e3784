"""Real scaling-law measurements bundled with the package (provenance in ``README.md`` beside this file).

Each loader returns a tidy pandas DataFrame with documented columns; nothing is downloaded.
"""

from __future__ import annotations

from importlib import resources

import pandas as pd

from bayescale.laws import FLOP_PER_PARAM_TOKEN

__all__ = ["chinchilla", "colpret", "datablations", "gadre", "gadre_downstream", "multipower", "path", "revisiting"]


def path(name: str):
    """Filesystem path of a bundled file."""
    return resources.files(__name__).joinpath(name)


def chinchilla() -> pd.DataFrame:
    """Chinchilla runs (Epoch AI re-extraction): columns ``N`` (parameters), ``D`` (tokens, C/6N), ``C`` (FLOP), ``loss``."""
    raw = pd.read_csv(path("chinchilla_epoch.csv"))
    out = pd.DataFrame({"N": raw["Model Size"], "C": raw["Training FLOP"], "loss": raw["loss"]})
    out["D"] = out["C"] / (FLOP_PER_PARAM_TOKEN * out["N"])
    return out[["N", "D", "C", "loss"]]


def revisiting() -> pd.DataFrame:
    """Alabdulmohsin et al. 2022 benchmark, 92 curves: ``domain, task, model, curve, x, y, train`` (LM duplicates dropped).

    ``x`` is the number of seen examples, ``y`` the error/loss, ``train`` the official fit split; ``curve`` is
    ``domain/task/model``.
    """
    frames = [pd.read_csv(path(f)) for f in ("revisiting_vision.csv", "revisiting_lang.csv")]
    raw = pd.concat(frames, ignore_index=True).drop_duplicates().reset_index(drop=True)
    out = pd.DataFrame({"domain": raw["Domain"], "task": raw["Task"], "model": raw["Model"],
                        "x": raw["Seen Examples"].astype(float), "y": raw["Loss"].astype(float),
                        "train": raw["Training"].astype(int).astype(bool)})
    out.insert(3, "curve", out["domain"] + "/" + out["task"] + "/" + out["model"])
    return out


def colpret() -> pd.DataFrame:
    """ColPret loss curves: ``curve, i, tokens, loss, context`` (context = the first half, the fit split)."""
    raw = pd.read_csv(path("colpret_curves.csv"))
    return raw.rename(columns={"nslpfn_context": "context"}).assign(context=lambda d: d["context"].astype(bool))


def gadre(val_set: str = "c4_val") -> pd.DataFrame:
    """Gadre et al. 2024 over-training runs: ``name, dataset, N, D, C, M, loss, loss_lo95, loss_hi95`` for ``val_set``.

    ``C`` = 6ND FLOP, ``M`` = D/N tokens per parameter; lo/hi are the token-level 95% interval of the loss.
    """
    raw = pd.read_csv(path("gadre_models_losses_wide.csv"))
    col = f"loss_{val_set}"
    if col not in raw:
        sets = sorted(c[5:] for c in raw.columns if c.startswith("loss_") and not c.endswith("95"))
        raise KeyError(f"unknown validation set {val_set!r}; choose one of {sets}")
    return pd.DataFrame({
        "name": raw["name"], "dataset": raw["dataset"], "N": raw["params"].astype(float),
        "D": raw["tokens"].astype(float), "C": raw["flops_6ND"].astype(float),
        "M": raw["tokens_per_param"].astype(float), "loss": raw[col],
        "loss_lo95": raw[f"{col}_tok_lo95"], "loss_hi95": raw[f"{col}_tok_hi95"],
    })


def gadre_downstream(val_set: str = "c4_val") -> pd.DataFrame:
    """Per model: loss on ``val_set`` and the average top-1 error over the 46 downstream tasks (``err``)."""
    acc = pd.read_csv(path("gadre_downstream_long.csv"))
    err = (1.0 - acc.groupby("name")["accuracy"].mean()).rename("err")
    return gadre(val_set).merge(err, left_on="name", right_index=True, how="inner")


def datablations() -> pd.DataFrame:
    """Repeated-data training (Muennighoff et al. 2023, via ColPret): 48 loss-vs-tokens curves.

    Columns ``curve, data, N, epochs, tokens, loss, tokens_per_epoch``: corpus ``data`` (c4/oscar), ``N`` parameters,
    the unique-token budget repeated for ``epochs`` epochs, ``tokens`` seen so far; ``curve`` is ``data/N/epochs``.
    """
    raw = pd.read_csv(path("datablations_losses.csv"))
    n = raw["num_params"].str.rstrip("B").astype(float) * 1e9
    out = pd.DataFrame({"data": raw["data"], "N": n, "epochs": raw["epochs"].astype(int),
                        "tokens": raw["token_num"].astype(float), "loss": raw["loss"].astype(float),
                        "tokens_per_epoch": raw["tokens_per_epoch"].astype(float)})
    out.insert(0, "curve", out["data"] + "/" + raw["num_params"] + "/" + out["epochs"].astype(str) + "ep")
    return out.sort_values(["curve", "tokens"], kind="stable").reset_index(drop=True)


def multipower() -> pd.DataFrame:
    """Loss curves under nine learning-rate schedules (Luo et al. 2025): 27 curves (3 sizes x 9 schedules).

    Columns ``curve, N, schedule, fit_set, step, lr, loss``: ``N`` parameters (25M/100M/400M), ``fit_set`` the
    authors' training schedules; ``curve`` is ``<size>M/<schedule>``.
    """
    raw = pd.read_csv(path("multipower_loss_curves.csv"))
    out = pd.DataFrame({"N": raw["model_size_m"].astype(float) * 1e6, "schedule": raw["schedule"],
                        "fit_set": raw["fit_set"].astype(bool), "step": raw["step"].astype(float),
                        "lr": raw["lr"].astype(float), "loss": raw["loss"].astype(float)})
    out.insert(0, "curve", raw["model_size_m"].astype(str) + "M/" + out["schedule"])
    return out.sort_values(["curve", "step"], kind="stable").reset_index(drop=True)
