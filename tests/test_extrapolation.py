"""The bundled real data the extrapolation benchmark splits (bayescale.datasets), and scores of a perfect
predictor (bayescale.scoring). The benchmark's own bookkeeping: ``python -m benchmarks.extrapolation --self-check``."""

import numpy as np

import bayescale as bs
from bayescale import scoring


def test_bundled_datasets_and_their_extrapolation_splits():
    rev = bs.datasets.revisiting()
    domains = rev.groupby("curve")["domain"].first()
    assert len(domains) == 92 and domains.value_counts().to_dict() == {"IC": 72, "BB": 10, "LM": 5, "NMT": 5}
    for _, d in rev.groupby("curve"):  # the official split: every curve's held-out points lie beyond its fitted ones
        assert (~d.train).any() and d[~d.train].x.min() > d[d.train].x.max()
    ch = bs.datasets.chinchilla()
    assert len(ch) == 245 and (ch.C >= 1e21).sum() == 23
    gad = bs.datasets.gadre_downstream()
    assert gad.dataset.nunique() == 3 and sorted(gad.N[gad.N > 4.2e8].unique()) == [1439795200.0, 6889410560.0]
    assert {"loss", "err"} <= set(gad.columns)
    col = bs.datasets.colpret()
    assert col.curve.nunique() == 192
    for _, d in col.groupby("curve"):  # the context is each curve's first half: no target comes before it
        assert d.context.any() and (~d.context).any() and d[~d.context].tokens.min() >= d[d.context].tokens.max()


def test_a_perfect_predictor_scores_perfectly():
    y = np.array([0.8, 0.5, 0.3])
    draws = np.tile(y, (50, 1))
    assert scoring.rmsle(np.median(draws, axis=0), y) == 0
    assert np.all(scoring.coverage(draws[:7], draws[:7], y) == 1)  # interval bounds count as inside
    assert np.allclose(scoring.crps_from_draws(draws, y), 0)
