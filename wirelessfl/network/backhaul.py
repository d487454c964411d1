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

    def forward_end_s(self, cells, selected: np.ndarray, uplink, airtime: np.ndarray, bits: float) -> float:
        """A round under one server in the cloud: when the last site has forwarded the updates that
        reached it, each site from the end of its last one, its k updates in one transfer of k bits
        (``cells``: None for one site). -inf when no update arrived."""
        arrived = np.asarray(uplink.arrived, dtype=bool)
        if not arrived.any():
            return -math.inf
        ends = (uplink.tx_start + airtime) if uplink.tx_end is None else uplink.tx_end
        site = np.zeros(len(selected), dtype=np.int64) if cells is None else cells.serving[selected]
        last = -math.inf
        for c in np.unique(site[arrived]):
            mine = arrived & (site == c)
            last = max(last, float(ends[mine].max()) + self.transfer_s(float(mine.sum()) * bits))
        return last
