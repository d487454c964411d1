"""Inter-satellite links along an orbital plane: neighbours, light-time latency, hops to a ground station.

In a Walker plane of per_plane satellites (constellation.py), satellite k * per_plane + j has the
neighbours j + 1 (ahead: larger mean anomaly, it passes a point first) and j - 1 (behind), modulo
per_plane: the "+Grid" intra-plane links of e.g. Handley 2018 ("Delay is not an option: low latency
routing in space", HotNets) and del Portillo et al. 2019 (Acta Astronautica 159). The range between
two satellites comes from their Earth-fixed positions (the same in any frame); one-way latency is
the light time |r_a - r_b| / c (no processing or queueing). A link is usable while the straight line
between the two clears the Earth plus ``grazing_km`` of atmosphere (80 km by default).

``route_to_station``: from a satellite, the fewest hops along its own plane to a satellite of that
plane which the station sees above ``min_elevation_deg`` at time t, the satellites on the way and
the summed light time. Cross-plane links, routing over several planes and link switching are left
for the engine integration.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..fields import ConfigError
from .constellation import Constellation
from .ephemeris import Ephemeris
from .geometry import SPEED_OF_LIGHT_M_S, look, station as as_station

__all__ = ["IslRoute", "PlaneView", "clears_earth", "light_time_s", "neighbours", "plane_view", "route_in_view",
           "route_to_station"]

_MEAN_EARTH_RADIUS_KM = 6371.0


def neighbours(constellation: Constellation, satellite: int) -> tuple[int, int]:
    """(ahead, behind): the satellites next to ``satellite`` in its plane (a Walker layout only)."""
    plane, slot = constellation.plane_and_slot(satellite)
    n = constellation.per_plane
    return plane * n + (slot + 1) % n, plane * n + (slot - 1) % n


def light_time_s(ephemeris: Ephemeris, a, b, times_s):
    """One-way light time |r_a - r_b| / c in seconds between satellites ``a`` and ``b`` at ``times_s``
    (arrays broadcast)."""
    pa, _ = ephemeris.state(a, times_s)
    pb, _ = ephemeris.state(b, times_s)
    return np.linalg.norm(pa - pb, axis=-1) * 1000.0 / SPEED_OF_LIGHT_M_S


def clears_earth(pos_a_km, pos_b_km, grazing_km: float = 80.0):
    """Whether the segment between two positions (..., 3) stays above a sphere of the mean Earth
    radius plus ``grazing_km``."""
    a, b = np.asarray(pos_a_km, dtype=float), np.asarray(pos_b_km, dtype=float)
    d = b - a
    s = np.clip(-np.einsum("...i,...i->...", a, d) / np.maximum(np.einsum("...i,...i->...", d, d), 1e-30), 0.0, 1.0)
    closest = a + s[..., None] * d
    return np.linalg.norm(closest, axis=-1) > _MEAN_EARTH_RADIUS_KM + grazing_km


@dataclass(frozen=True)
class IslRoute:
    """A path along a plane: the satellites from the source to the gateway (both included), the
    hop count, the summed inter-satellite light time, and the gateway's elevation at the station."""

    satellites: tuple[int, ...]
    hops: int
    latency_s: float
    gateway_elevation_deg: float

    @property
    def gateway(self) -> int:
        return self.satellites[-1]


def route_to_station(constellation: Constellation, ephemeris: Ephemeris, site, satellite: int, time_s: float,
                     min_elevation_deg: float = 10.0, grazing_km: float = 80.0) -> IslRoute | None:
    """The fewest-hop route along ``satellite``'s plane to a satellite in view of ``site`` (a preset
    name or Station) at ``time_s``; None when no satellite of the plane is in view or every way to
    one crosses a link that does not clear the Earth. Ties go to the higher gateway elevation."""
    if isinstance(min_elevation_deg, bool) or not isinstance(min_elevation_deg, (int, float)) \
            or not 0.0 <= min_elevation_deg < 90.0:
        raise ConfigError(f"orbits.min_elevation_deg = {min_elevation_deg!r}: must be in [0, 90)")
    plane, slot = constellation.plane_and_slot(satellite)
    return route_in_view(plane_view(constellation, ephemeris, site, plane, time_s, grazing_km), slot,
                         min_elevation_deg)


@dataclass(frozen=True)
class PlaneView:
    """One plane as a station sees it at one time: its satellites, their Earth-fixed positions (km),
    their elevations at the station and which links (slot j -> j + 1) clear the Earth. What every
    satellite of the plane routes over at that time (wirelessfl.orbits.contacts keeps it)."""

    members: np.ndarray
    pos: np.ndarray
    elevation: np.ndarray
    link_ok: np.ndarray


def plane_view(constellation: Constellation, ephemeris: Ephemeris, site, plane: int, time_s: float,
               grazing_km: float = 80.0) -> PlaneView:
    """The :class:`PlaneView` of ``plane`` from ``site`` at ``time_s``."""
    n = constellation.per_plane
    members = plane * n + np.arange(n)
    pos, _ = ephemeris.state(members, np.full(n, float(time_s)))
    return PlaneView(members, pos, look(as_station(site), pos).elevation_deg,
                     clears_earth(pos, np.roll(pos, -1, axis=0), grazing_km))


def route_in_view(view: PlaneView, slot: int, min_elevation_deg: float) -> IslRoute | None:
    """:func:`route_to_station` from slot ``slot`` of the plane in ``view``."""
    n, elevation, link_ok, pos = len(view.members), view.elevation, view.link_ok, view.pos
    best = None
    for step in (1, -1):
        path, j = [slot], slot
        for _ in range(n):
            if elevation[j] >= min_elevation_deg:
                key = (len(path) - 1, -elevation[j])
                if best is None or key < best[0]:
                    best = (key, list(path))
                break
            nxt = (j + step) % n
            if not link_ok[j if step == 1 else nxt] or nxt == slot:
                break
            path.append(nxt)
            j = nxt
    if best is None:
        return None
    slots = best[1]
    latency = float(sum(np.linalg.norm(pos[a] - pos[b]) for a, b in zip(slots, slots[1:])) * 1000.0
                    / SPEED_OF_LIGHT_M_S)
    return IslRoute(tuple(int(view.members[j]) for j in slots), len(slots) - 1, latency, float(elevation[slots[-1]]))
