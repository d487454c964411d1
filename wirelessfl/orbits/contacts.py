"""When each federated-learning client can upload, and at what rate: the contact plan of a run.

A client is a satellite (``clients = "satellites"``: it uploads to whichever ground station sees it)
or a ground site (``clients = "ground"``: it uploads through whichever satellite it sees, a bent pipe
to the server). Either way a client may send only inside its contact windows: the union, over its
partners, of the passes above the elevation mask (passes.py, exact rises and sets). Inside a window
the rate is piecewise constant on the orbit grid: on [t_k, t_k+1) it is the rate of the link budget
at t_k to the partner of highest elevation (Shannon on the budget's SNR, or the best DVB-S2 MODCOD).

``upload(client, ready_s, bits)``: an upload ready at ``ready_s`` waits for the next window, then
sends; a window that ends first cuts it: ``pass_end = "lose"`` loses it there, ``"resume"`` carries
the bits left to the next window. With inter-satellite links (satellite clients of a Walker
layout), a satellite out of view may instead hand the upload along its plane to one in view, each
hop at ``isl_rate_bps`` plus the light time (isl.py), which then sends it as its own. Deterministic:
no random draws, so a resumed run recomputes exactly what it had.

With ``edges = True`` (ground stations as edge servers) every satellite belongs to one station for the
whole run (association.py, ``home``): its windows are its passes over that station only, and its
grid rates and geometry are to that station.
"""
from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .constellation import Constellation
from .ephemeris import Ephemeris
from .geometry import Station, look
from .isl import plane_view, route_in_view
from .association import home_stations
from .link_budget import DVBS2_MODCODS, LinkBudget
from .passes import Pass, find_passes

__all__ = ["ContactPlan", "OrbitUpload", "dvbs2_rates"]

VIEWS = 20_000
"""Plane views kept for relaying (a few kB each): the grid times the uploads of a plane scan."""


def dvbs2_rates(es_n0_db: np.ndarray, symbol_rate_baud: float, margin_db: float = 0.0) -> np.ndarray:
    """link_budget.dvbs2_rate_bps over a whole grid at once: the best efficiency among the MODCODs whose
    threshold + margin is at most Es/N0 (a running maximum over the thresholds in order), times the
    symbol rate; 0 where none closes."""
    thresholds = np.array([m.es_n0_db for m in DVBS2_MODCODS]) + margin_db
    order = np.argsort(thresholds, kind="stable")
    best = np.maximum.accumulate(np.array([m.efficiency for m in DVBS2_MODCODS])[order])
    i = np.searchsorted(thresholds[order], np.asarray(es_n0_db, dtype=float), side="right") - 1
    return np.where(i >= 0, best[np.maximum(i, 0)] * symbol_rate_baud, 0.0)


@dataclass(frozen=True)
class OrbitUpload:
    """One upload's fate: when it went on the air (NaN: never), when it ended (arrived or cut), whether
    it arrived, its seconds on the air, the passes it used, and the geometry as it started (the partner
    of highest elevation: elevation, slant range, Doppler at the carrier), and the ISL hops it took."""

    start_s: float
    end_s: float
    ok: bool
    on_air_s: float
    passes: int
    elevation_deg: float
    range_km: float
    doppler_hz: float
    gain: float
    hops: int = 0


def _merge(intervals: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The union of [rise, set] intervals as sorted starts and ends."""
    starts, ends = [], []
    for rise, end in sorted(intervals):
        if starts and rise <= ends[-1]:
            ends[-1] = max(ends[-1], end)
        else:
            starts.append(rise)
            ends.append(end)
    return starts, ends


class ContactPlan:
    """Contact windows and grid rates of every client (see the module docstring).

    ``clients``: "satellites" (one client per satellite) or "ground" (one per ground station; a run's
    device n sits at station n mod stations, ``client_of``). ``rate``: "shannon" or "dvbs2" (symbol
    rate B / (1 + roll_off), ``margin_db`` on the thresholds). ``tx_power_w`` and ``noise_w``: the
    simulator's power and noise, which turn the budget's SNR into an equivalent gain |h|^2 for the
    records (SNR = p |h|^2 / N).
    """

    def __init__(self, constellation: Constellation, sites: tuple[Station, ...], duration_s: float, *,
                 orbit_step_s: float = 30.0, min_elevation_deg: float = 10.0, clients: str = "satellites",
                 budget: LinkBudget | None = None, rate: str = "shannon", roll_off: float = 0.2,
                 margin_db: float = 0.0, pass_end: str = "lose", isl: bool = False, isl_rate_bps: float = 1e9, isl_grazing_km: float = 80.0,
                 tx_power_w: float = 1.0, noise_w: float = 1.0, edges: bool = False):
        self.constellation, self.sites, self.clients = constellation, tuple(sites), clients
        self.min_elevation_deg, self.pass_end = float(min_elevation_deg), pass_end
        self.budget = budget if budget is not None else LinkBudget()
        self.isl, self.isl_rate_bps, self.isl_grazing_km = bool(isl), float(isl_rate_bps), float(isl_grazing_km)
        self._views: OrderedDict = OrderedDict()  # (plane, station, t) -> its PlaneView, for relaying
        self.ephemeris = Ephemeris(constellation, duration_s, orbit_step_s)
        self.horizon_s = self.ephemeris.duration_s
        self.step_s = self.ephemeris.step_s
        self.passes: list[Pass] = find_passes(self.ephemeris, self.sites, self.min_elevation_deg)
        self.home: np.ndarray | None = None  # stations as edges: each satellite's own station
        if edges:
            if clients != "satellites" or self.isl:
                raise ValueError("stations as edges serve satellite clients without inter-satellite links")
            self.home = home_stations(self.passes, len(constellation), [s.name for s in self.sites])
        self._windows()
        self._grid(rate, roll_off, margin_db, tx_power_w, noise_w)

    def __len__(self) -> int:
        """The number of clients."""
        return len(self.constellation) if self.clients == "satellites" else len(self.sites)

    def client_of(self, device: int) -> int:
        """The client a run's device is (ground sites are shared round robin among the devices)."""
        return int(device) if self.clients == "satellites" else int(device) % len(self.sites)

    def _windows(self) -> None:
        index = {s.name: i for i, s in enumerate(self.sites)}
        per: list[list[tuple[float, float]]] = [[] for _ in range(len(self))]
        for p in self.passes:
            if self.home is not None and index[p.station] != self.home[p.satellite]:
                continue  # a pass over a station not its own: not a window of this satellite
            per[p.satellite if self.clients == "satellites" else index[p.station]].append((p.rise_s, p.set_s))
        merged = [_merge(w) for w in per]
        self.rises = [m[0] for m in merged]
        self.sets = [m[1] for m in merged]

    def _grid(self, rate: str, roll_off: float, margin_db: float, tx_power_w: float, noise_w: float) -> None:
        """Elevation, range, Doppler and rate of every client on the grid, to its best partner."""
        eph = self.ephemeris
        views = [look(site, eph.position_km, eph.velocity_km_s) for site in self.sites]  # each (S, T)
        elevation = np.stack([v.elevation_deg for v in views])  # (G, S, T)
        range_km = np.stack([v.range_km for v in views])
        doppler = np.stack([v.doppler_hz(self.budget.frequency_hz) for v in views])
        axis = 0 if self.clients == "satellites" else 1  # the partners: stations, or satellites
        best = np.expand_dims(np.argmax(elevation, axis=axis), axis)
        if self.home is not None:  # each satellite's own station, at every grid point
            best = np.broadcast_to(self.home[None, :, None], (1, *elevation.shape[1:]))
        pick = lambda a: np.squeeze(np.take_along_axis(a, best, axis=axis), axis)  # noqa: E731
        self.elevation_deg, self.range_km, self.doppler_hz = pick(elevation), pick(range_km), pick(doppler)
        snr_db = self.budget.snr_db(self.range_km, self.elevation_deg)
        if rate == "dvbs2":
            symbol_rate = self.budget.bandwidth_hz / (1.0 + roll_off)
            # Es/N0 over the symbol rate: SNR over B plus 10 log10(B / R_s)
            self.rate_bps = dvbs2_rates(snr_db + 10.0 * math.log10(1.0 + roll_off), symbol_rate, margin_db)
        else:
            self.rate_bps = self.budget.bandwidth_hz * np.log2(1.0 + 10.0 ** (snr_db / 10.0))
        self.gain = 10.0 ** (snr_db / 10.0) * noise_w / tx_power_w

    def in_view(self, client: int, t: float) -> bool:
        """Whether ``client`` is inside a contact window at ``t``."""
        i = bisect.bisect_right(self.rises[client], t) - 1
        return i >= 0 and t < self.sets[client][i]

    def _step(self, t: float) -> int:
        return min(int(math.floor(t / self.step_s + 1e-12)), self.rate_bps.shape[1] - 1)

    def upload(self, client: int, ready_s: float, bits: float) -> OrbitUpload:
        """The upload of ``bits`` by ``client`` ready at ``ready_s`` (see the module docstring)."""
        direct = self._send(client, ready_s, bits)
        if not self.isl or self.clients != "satellites" or self.in_view(client, ready_s):
            return direct
        relayed = self._relayed(client, ready_s, bits, direct.start_s if direct.start_s == direct.start_s
                                else self.horizon_s)
        return relayed if relayed is not None and relayed.end_s < direct.end_s else direct

    def _relayed(self, client: int, ready_s: float, bits: float, until_s: float) -> OrbitUpload | None:
        """The upload handed along the plane to a satellite in view, at the first grid point from
        ``ready_s`` (before ``until_s``, when the satellite's own pass begins) where one is."""
        if self.constellation.per_plane is None:
            return None
        plane, slot = self.constellation.plane_and_slot(client)
        k = int(math.ceil(ready_s / self.step_s - 1e-12))
        times = [ready_s] + [j * self.step_s for j in range(k, self._step(until_s) + 1) if j * self.step_s > ready_s]
        for t in times:
            if t >= until_s:
                return None
            for g in range(len(self.sites)):
                route = route_in_view(self._plane_view(plane, g, t), slot, self.min_elevation_deg)
                if route is None:
                    continue
                handed = t + route.hops * bits / self.isl_rate_bps + route.latency_s
                sent = self._send(route.gateway, handed, bits)
                if sent.ok:
                    return OrbitUpload(sent.start_s, sent.end_s, True, sent.on_air_s, sent.passes, sent.elevation_deg,
                                       sent.range_km, sent.doppler_hz, sent.gain, route.hops)
        return None

    def _plane_view(self, plane: int, g: int, t: float):
        """The plane as station g sees it at t, kept for the next uploads of the plane's satellites
        (they scan the same grid times): the same numbers, computed once (at most VIEWS kept)."""
        key = (plane, g, t)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = plane_view(self.constellation, self.ephemeris, self.sites[g], plane, t,
                                                 self.isl_grazing_km)
            if len(self._views) > VIEWS:
                self._views.popitem(last=False)
        else:
            self._views.move_to_end(key)
        return view

    def _send(self, client: int, ready_s: float, bits: float) -> OrbitUpload:
        """Sent directly by ``client``: wait for a window, send at the grid's rates."""
        rises, sets = self.rises[client], self.sets[client]
        i = max(bisect.bisect_right(rises, ready_s) - 1, 0)
        left, t, on_air, used, first = float(bits), float(ready_s), 0.0, 0, None
        while i < len(rises):
            if sets[i] <= t:
                i += 1
                continue
            t = max(t, rises[i])
            if t >= self.horizon_s:
                break
            used += 1
            if first is None:
                first = t
            while t < sets[i]:
                k = self._step(t)
                seg_end = min((k + 1) * self.step_s, sets[i])
                rate = float(self.rate_bps[client, k])
                if rate * (seg_end - t) >= left:
                    end = t + left / rate
                    return self._result(client, first, end, True, on_air + end - t, used)
                left -= rate * (seg_end - t)
                on_air += seg_end - t
                t = seg_end
            if self.pass_end == "lose":  # the window closed on it
                return self._result(client, first, t, False, on_air, used)
            i += 1
        # no window left before the horizon: it never gets through (the run ends first)
        end = self.horizon_s if first is not None else math.nan
        return self._result(client, math.nan if first is None else first, end, False, on_air, used)

    def _result(self, client: int, start: float, end: float, ok: bool, on_air: float, used: int) -> OrbitUpload:
        if start != start:
            return OrbitUpload(math.nan, end, False, 0.0, 0, math.nan, math.nan, math.nan, math.nan)
        k = self._step(start)
        return OrbitUpload(start, end, ok, on_air, used, float(self.elevation_deg[client, k]),
                           float(self.range_km[client, k]), float(self.doppler_hz[client, k]),
                           float(self.gain[client, k]))
