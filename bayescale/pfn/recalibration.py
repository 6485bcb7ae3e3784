"""The recalibration map of the PFN predictive CDF (Kuleshov et al. 2018), as stored in the weights' JSON.

With ``F`` the network's predictive CDF, the calibrated predictive is ``cdf = R(F)``,
``quantile(q) = F^{-1}(R^{-1}(q))``, ``logpdf = logpdf_F + ln R'(F)``. ``R`` is a monotone piecewise-linear map of
[0, 1] onto itself through knots ``(pit, level)``, one map per query kind (:data:`KINDS`: inside the context's x
range, or beyond it). This module reads, checks and applies a map; :mod:`bayescale.pfn.calibrate` fits one on
held-out prior draws.
"""

from __future__ import annotations

import numpy as np

__all__ = ["KINDS", "Recalibration"]

KINDS = ("interpolated", "extrapolated")


class Recalibration:
    """Monotone maps ``R`` on [0, 1], one per query kind: ``knots[kind] = (pit, level)``, both from 0 to 1."""

    def __init__(self, knots: dict, meta: dict | None = None):
        try:
            self.knots = {k: (np.asarray(p, np.float64), np.asarray(lv, np.float64)) for k, (p, lv) in knots.items()}
        except (TypeError, ValueError) as exc:
            raise ValueError(f"knots must be lists of numbers ({exc})") from None
        self.meta = dict(meta or {})
        for kind, (p, lv) in self.knots.items():
            if kind not in KINDS:
                raise ValueError(f"unknown query kind {kind!r}; expected {list(KINDS)}")
            if p.ndim != 1 or p.shape != lv.shape or len(p) < 2:
                raise ValueError(f"{kind}: pit and level knots must be 1-d of equal length >= 2")
            if not (np.all(np.isfinite(p)) and np.all(np.isfinite(lv))):
                raise ValueError(f"{kind}: knots must be finite")
            for name, a in (("pit", p), ("level", lv)):
                if a[0] != 0.0 or a[-1] != 1.0:
                    raise ValueError(f"{kind}: {name} knots must start at 0 and end at 1, got {a[0]:g} ... {a[-1]:g}")
                if not np.all(np.diff(a) > 0):
                    raise ValueError(f"{kind}: {name} knots must be strictly increasing")
        missing = [k for k in KINDS if k not in self.knots]
        if missing:
            raise ValueError(f"no map for {missing}")

    @classmethod
    def from_dict(cls, d: dict) -> Recalibration:
        """From the JSON entry; raises ValueError (with the reason) when it is malformed."""
        if not isinstance(d, dict) or not isinstance(d.get("maps"), dict):
            raise ValueError("expected a dict with a 'maps' dict")
        try:
            knots = {k: (m["pit"], m["level"]) for k, m in d["maps"].items()}
        except (KeyError, TypeError) as exc:
            raise ValueError(f"each map needs 'pit' and 'level' lists ({exc})") from None
        return cls(knots, {k: v for k, v in d.items() if k != "maps"})

    def to_dict(self) -> dict:
        maps = {k: {"pit": p.tolist(), "level": lv.tolist()} for k, (p, lv) in self.knots.items()}
        return {**self.meta, "maps": maps}

    def forward(self, kind: str, p):
        """``R(p)``."""
        xk, yk = self.knots[kind]
        return np.interp(p, xk, yk)

    def inverse(self, kind: str, q):
        """``R^{-1}(q)``."""
        xk, yk = self.knots[kind]
        return np.interp(q, yk, xk)

    def log_slope(self, kind: str, p):
        """``ln R'(p)`` (piecewise constant; the right segment at a knot)."""
        xk, yk = self.knots[kind]
        seg = np.clip(np.searchsorted(xk, p, side="right") - 1, 0, len(xk) - 2)
        return np.log(np.diff(yk) / np.diff(xk))[seg]
