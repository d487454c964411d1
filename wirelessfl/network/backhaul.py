"""The backhaul between the sites and the cloud: a model (or a site's updates) takes bits / rate
plus a latency each way."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Backhaul"]


@dataclass(frozen=True)
class Backhaul:
    """Each site's link to the cloud, both directions alike: ``rate_bps`` (None: no time per bit)
    and ``latency_s`` per transfer."""

    rate_bps: float | None
    latency_s: float

    @classmethod
    def of(cls, cfg) -> "Backhaul | None":
        """The [hierarchy] table's backhaul; None when it takes no time."""
        if cfg.backhaul_rate_bps is None and cfg.backhaul_latency_s == 0:
            return None
        return cls(cfg.backhaul_rate_bps, float(cfg.backhaul_latency_s))

    def transfer_s(self, bits: float) -> float:
        """One transfer of ``bits``: bits / rate + latency."""
        return (bits / self.rate_bps if self.rate_bps else 0.0) + self.latency_s

    def forward_end_s(self, cells, selected: np.ndarray, arrived: np.ndarray, ends_s: np.ndarray,
                      bits: float) -> float:
        """A round under one server in the cloud: when the last site has forwarded the updates that
        reached it (``arrived``, uploads ending at ``ends_s``, in ``selected``'s order), each site
        from the end of its last one, its k updates of ``bits`` in one transfer of k bits (``cells``:
        None for one site). -inf when no update arrived."""
        arrived = np.asarray(arrived, dtype=bool)
        if not arrived.any():
            return -math.inf
        site = np.zeros(len(selected), dtype=np.int64) if cells is None else cells.serving[selected]
        last = -math.inf
        for c in np.unique(site[arrived]):
            mine = arrived & (site == c)
            last = max(last, float(np.asarray(ends_s)[mine].max()) + self.transfer_s(float(mine.sum()) * bits))
        return last
