"""The backhaul between the sites and the cloud: a model (or a site's updates) takes bits / rate
plus a latency each way. Under the sync rounds' closed form a site forwards a round's updates in one
transfer (:meth:`Backhaul.forward_end_s`); under the event protocols each site's link is a queue in
each direction (:class:`SiteLinks`)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Backhaul", "NO_BACKHAUL", "NoBackhaul", "SiteLinks", "or_no_backhaul"]


@dataclass(frozen=True)
class Backhaul:
    """Each site's link to the cloud, both directions alike: ``rate_bps`` (None: no time per bit)
    and ``latency_s`` per transfer."""

    rate_bps: float | None
    latency_s: float
    timed = True
    """It takes time (the records then have its columns; NoBackhaul: False)."""

    @classmethod
    def of(cls, cfg) -> "Backhaul | NoBackhaul":
        """The [hierarchy] table's backhaul; NO_BACKHAUL when it takes no time."""
        if cfg.backhaul_rate_bps is None and cfg.backhaul_latency_s == 0:
            return NO_BACKHAUL
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


class NoBackhaul:
    """A backhaul that takes no time (none configured, or the server at the sites): nothing to
    forward, nothing to wait for, so the engines ask it as they ask a timed one."""

    timed = False

    def transfer_s(self, bits: float) -> float:
        """No time."""
        return 0.0

    def forward_end_s(self, cells, selected: np.ndarray, arrived: np.ndarray, ends_s: np.ndarray,
                      bits: float) -> float:
        """Nothing to wait for: -inf (the round ends with its uploads)."""
        return -math.inf


NO_BACKHAUL = NoBackhaul()
"""The one backhaul that takes no time (Parts.backhaul's default)."""


def or_no_backhaul(backhaul: "Backhaul | NoBackhaul | None") -> "Backhaul | NoBackhaul":
    """A backhaul handed over by a caller, with None (the old spelling of "none") as NO_BACKHAUL."""
    return NO_BACKHAUL if backhaul is None else backhaul


class SiteLinks:
    """Each site's backhaul under the event protocols: one link up and one down per site, each
    sending one transfer at a time, first come first served, bits / rate each, every transfer then
    taking the latency on its way (transfers overlap in flight, as on a pipe):

        start = max(asked, the link's last transfer sent),   delivered = start + bits / rate + latency

    Up, each update a site received goes to the cloud as it arrives. Down, a site receives each
    model version once (the first device it starts from that version asks for it; later ones wait for
    the same transfer) and starts its devices from there; every site holds the initial model at the
    start."""

    def __init__(self, backhaul: Backhaul, sites: int):
        self.backhaul = backhaul
        self.up_free = np.zeros(sites)  # when each site's up link has sent its last transfer
        self.down_free = np.zeros(sites)
        self.version_at = np.zeros(sites, dtype=np.int64)  # the newest model version each site was sent
        self.version_in_s = np.zeros(sites)  # when that version is (or was) at the site

    def _send(self, free: np.ndarray, site: int, now: float, bits: float) -> float:
        start = max(now, float(free[site]))
        free[site] = start + (bits / self.backhaul.rate_bps if self.backhaul.rate_bps else 0.0)
        return float(free[site]) + self.backhaul.latency_s

    def forward(self, site: int, now: float, bits: float) -> float:
        """An update of ``bits`` reached ``site`` at ``now``: when it reaches the cloud."""
        return self._send(self.up_free, site, now, bits)

    def model_at_site(self, site: int, now: float, version: int, bits: float) -> float:
        """When ``site`` holds model ``version`` (of ``bits``) for a device started now: sent down
        now unless the site already has it or has it on the way."""
        if self.version_at[site] != version:
            self.version_at[site] = version
            self.version_in_s[site] = self._send(self.down_free, site, now, bits)
        return max(now, float(self.version_in_s[site]))

    def state_dict(self) -> dict:
        return {"up_free": self.up_free.tolist(), "down_free": self.down_free.tolist(),
                "version_at": self.version_at.tolist(), "version_in_s": self.version_in_s.tolist()}

    def load_state(self, state: dict) -> None:
        self.up_free = np.array(state["up_free"], dtype=float)
        self.down_free = np.array(state["down_free"], dtype=float)
        self.version_at = np.array(state["version_at"], dtype=np.int64)
        self.version_in_s = np.array(state["version_in_s"], dtype=float)
