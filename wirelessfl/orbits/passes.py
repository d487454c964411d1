"""Contact windows: when each satellite is above ``min_elevation_deg`` at each ground station.

From the ephemeris grid, per station and satellite (vectorised over both):

1. s(t) = sin(elevation) - sin(min_elevation) on the grid (sin is monotonic on [-90, 90] deg, so the
   sign of s is the sign of elevation - min_elevation); its time derivative from the velocities,
   d sin(el) / dt = (v . up) / |rho| - (rho . up)(rho . v) / |rho|^3.
2. A rise lies between grid points k and k+1 where s goes from < 0 to >= 0, a set where it goes back.
   A pass that starts and ends between two grid points (both below, the elevation rate turning from
   rising to falling) is caught too: its peak is found first, and kept if it clears the mask.
3. Each rise and set is refined by bisection (40 halvings: below a microsecond) on the elevation of
   the cubic-Hermite interpolated position (ephemeris.py); the peak elevation by golden-section
   search around the highest grid point of the pass.

A pass already in progress at t = 0 starts at 0; one still in progress at the end of the grid ends
there. Compared with skyfield over a day (tests/test_orbits.py, 24 Walker satellites, one station,
a 60 s grid): rise and set within 0.2 s of ``EarthSatellite.find_events`` (which stops refining at
half a second) and within 2 ms of skyfield's altitude root found to a microsecond; the peak
elevation within 3e-5 deg of skyfield's altitude at our peak time.
"""
from __future__ import annotations

import csv
import math
from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from ..fields import ConfigError
from .ephemeris import Ephemeris
from .geometry import Station, stations as as_stations

__all__ = ["Pass", "find_passes", "passes_csv", "sin_elevation"]

_BISECTIONS = 40
_GOLDEN = 60


@dataclass(frozen=True)
class Pass:
    """One contact window: seconds from the ephemeris epoch, elevations in degrees."""

    station: str
    satellite: int
    rise_s: float
    set_s: float
    max_elevation_deg: float
    max_s: float


def sin_elevation(ephemeris: Ephemeris, site: Station, satellites, times_s) -> np.ndarray:
    """sin(elevation) of ``satellites[i]`` at ``times_s[i]`` (interpolated; arrays broadcast)."""
    pos, _ = ephemeris.state(satellites, times_s)
    rho = pos - site.ecef_km()
    return (rho @ site.enu()[2]) / np.sqrt(np.einsum("...i,...i->...", rho, rho))


def _bisect(fn, sat, below, above):
    """Roots of fn(sat, t) = 0 with fn(sat, below) < 0 <= fn(sat, above) (either order in time)."""
    below, above = below.astype(float).copy(), above.astype(float).copy()
    for _ in range(_BISECTIONS):
        mid = 0.5 * (below + above)
        neg = fn(sat, mid) < 0.0
        below = np.where(neg, mid, below)
        above = np.where(neg, above, mid)
    return 0.5 * (below + above)


def _golden_max(fn, sat, lo, hi):
    """argmax and max of fn(sat, .) on [lo, hi] (unimodal there), by golden-section search."""
    inv = (math.sqrt(5.0) - 1.0) / 2.0
    lo, hi = lo.astype(float).copy(), hi.astype(float).copy()
    c, d = hi - inv * (hi - lo), lo + inv * (hi - lo)
    fc, fd = fn(sat, c), fn(sat, d)
    for _ in range(_GOLDEN):
        left = fc > fd  # the max is in [lo, d]
        hi = np.where(left, d, hi)
        lo = np.where(left, lo, c)
        c_new = np.where(left, hi - inv * (hi - lo), d)
        d_new = np.where(left, c, lo + inv * (hi - lo))
        fc_new = np.where(left, np.nan, fd)
        fd_new = np.where(left, fc, np.nan)
        todo = np.isnan(fc_new)
        if todo.any():
            fc_new[todo] = fn(sat[todo], c_new[todo])
        todo = np.isnan(fd_new)
        if todo.any():
            fd_new[todo] = fn(sat[todo], d_new[todo])
        c, d, fc, fd = c_new, d_new, fc_new, fd_new
    t = 0.5 * (lo + hi)
    return t, fn(sat, t)


def _station_passes(ephemeris: Ephemeris, site: Station, min_elevation_deg: float) -> list[Pass]:
    times, h = ephemeris.times_s, ephemeris.step_s
    threshold = math.sin(math.radians(min_elevation_deg))
    rho = ephemeris.position_km - site.ecef_km()
    vel = ephemeris.velocity_km_s
    up = site.enu()[2]
    dist = np.sqrt(np.einsum("stk,stk->st", rho, rho))
    z = rho @ up
    f = z / dist - threshold
    rate = (vel @ up) / dist - z * np.einsum("stk,stk->st", rho, vel) / dist ** 3

    def fn(sat, t):
        return sin_elevation(ephemeris, site, sat, t) - threshold

    above = f >= 0.0
    sat_r, k_r = np.nonzero(~above[:, :-1] & above[:, 1:])
    sat_s, k_s = np.nonzero(above[:, :-1] & ~above[:, 1:])
    rise = _bisect(fn, sat_r, times[k_r], times[k_r + 1])
    sets = _bisect(fn, sat_s, times[k_s + 1], times[k_s])
    # a whole pass between two grid points: below at both, rising at k and falling at k+1
    sat_h, k_h = np.nonzero(~above[:, :-1] & ~above[:, 1:] & (rate[:, :-1] > 0.0) & (rate[:, 1:] < 0.0))
    if sat_h.size:
        t_peak, f_peak = _golden_max(fn, sat_h, times[k_h], times[k_h + 1])
        keep = f_peak >= 0.0
        sat_h, k_h, t_peak = sat_h[keep], k_h[keep], t_peak[keep]
        rise = np.concatenate([rise, _bisect(fn, sat_h, times[k_h], t_peak)])
        sets = np.concatenate([sets, _bisect(fn, sat_h, times[k_h + 1], t_peak)])
        sat_r, sat_s = np.concatenate([sat_r, sat_h]), np.concatenate([sat_s, sat_h])
    first, last = np.nonzero(above[:, 0])[0], np.nonzero(above[:, -1])[0]
    sat_r, rise = np.concatenate([sat_r, first]), np.concatenate([rise, np.zeros(first.size)])
    sat_s, sets = np.concatenate([sat_s, last]), np.concatenate([sets, np.full(last.size, times[-1])])
    order_r, order_s = np.lexsort((rise, sat_r)), np.lexsort((sets, sat_s))
    sat_r, rise, sat_s, sets = sat_r[order_r], rise[order_r], sat_s[order_s], sets[order_s]
    if not (np.array_equal(sat_r, sat_s) and np.all(rise <= sets)):  # rises and sets alternate per satellite
        raise AssertionError(f"station {site.name}: rises and sets do not pair up")
    if not rise.size:
        return []
    # the peak: golden section around the highest grid point inside the pass (or the whole pass)
    lo, hi = rise.copy(), sets.copy()
    k0 = np.ceil(rise / h - 1e-9).astype(np.int64)
    k1 = np.floor(sets / h + 1e-9).astype(np.int64)
    for i in np.nonzero(k1 >= k0)[0]:
        k = k0[i] + int(np.argmax(f[sat_r[i], k0[i]:k1[i] + 1]))
        lo[i], hi[i] = max(rise[i], times[max(k - 1, 0)]), min(sets[i], times[min(k + 1, len(times) - 1)])
    t_max, f_max = _golden_max(fn, sat_r, lo, hi)
    max_el = np.degrees(np.arcsin(np.clip(f_max + threshold, -1.0, 1.0)))
    return [Pass(site.name, int(s), float(r), float(e), float(m), float(t))
            for s, r, e, m, t in zip(sat_r, rise, sets, max_el, t_max)]


def find_passes(ephemeris: Ephemeris, stations, min_elevation_deg: float = 10.0, *,
                require_each_station: bool = True) -> list[Pass]:
    """Every contact window of every satellite above ``min_elevation_deg`` at each of ``stations``
    (presets, mappings or Stations), sorted by rise time. A station that sees no pass in the grid's
    time is a one-line ConfigError unless ``require_each_station`` is False."""
    if isinstance(min_elevation_deg, bool) or not isinstance(min_elevation_deg, (int, float)) \
            or not 0.0 <= min_elevation_deg < 90.0:
        raise ConfigError(f"orbits.min_elevation_deg = {min_elevation_deg!r}: must be in [0, 90)")
    rows: list[Pass] = []
    for site in as_stations(stations):
        found = _station_passes(ephemeris, site, float(min_elevation_deg))
        if not found and require_each_station:
            raise ConfigError(
                f"orbits.ground_stations: {site.name} ({site.latitude_deg:g} N, {site.longitude_deg:g} E) sees no satellite "
                f"above {min_elevation_deg:g} deg in the {ephemeris.duration_s:g} s from "
                f"{ephemeris.epoch.isoformat()}: "
                "lower orbits.min_elevation_deg, run longer, or move the station")
        rows.extend(found)
    rows.sort(key=lambda p: (p.rise_s, p.station, p.satellite))
    return rows


def passes_csv(rows, path: str | Path) -> Path:
    """Write pass rows to a CSV file (header: the Pass fields; times to the millisecond)."""
    path = Path(path)
    names = [f.name for f in fields(Pass)]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for row in rows:
            values = astuple(row)
            writer.writerow([f"{v:.3f}" if isinstance(v, float) else v for v in values])
    return path
