"""Which ground station each satellite belongs to when the stations are edge servers
(``hierarchy.tiers = "edge"`` with [orbits]): a static association, fixed for the whole run.

The stations share the satellites evenly, each taking at most ceil(satellites / stations), and
each satellite goes to the station it has the most contact time with (the sum of set_s - rise_s
over their passes, passes.csv) among those with room: the (satellite, station) pairs are dealt in
order of contact time, longest first, ties to the lower satellite and then the lower station. Even
shares because on a Walker shell contact time grows with the station's latitude up to the
inclination: by contact time alone the highest station would take every satellite and the others
none. The result is stable: a satellite is at a station other than its favourite only where that
favourite is full of satellites that see it at least as long. Static because an edge server keeps
its devices (as cells do on the ground); a satellite passing over another station does not upload
there.
"""
from __future__ import annotations

import numpy as np

from .passes import Pass

__all__ = ["contact_seconds", "home_stations"]


def contact_seconds(passes: list[Pass], satellites: int, station_names: list[str]) -> np.ndarray:
    """(satellites, stations): the seconds each satellite spends in view of each station."""
    index = {name: g for g, name in enumerate(station_names)}
    seconds = np.zeros((satellites, len(station_names)))
    for p in passes:
        seconds[p.satellite, index[p.station]] += p.set_s - p.rise_s
    return seconds


def home_stations(passes: list[Pass], satellites: int, station_names: list[str]) -> np.ndarray:
    """Each satellite's station (satellites,): even shares, the most contact time among stations with room."""
    seconds = contact_seconds(passes, satellites, station_names)
    stations = len(station_names)
    room = np.full(stations, -(-satellites // stations))
    home = np.full(satellites, -1, dtype=np.int64)
    # (satellite, station) pairs, longest contact first; lexsort's last key is the primary one
    sat, sta = np.divmod(np.lexsort((np.tile(np.arange(stations), satellites),
                                     np.repeat(np.arange(satellites), stations), -seconds.reshape(-1))), stations)
    for s, g in zip(sat.tolist(), sta.tolist()):
        if home[s] < 0 and room[g] > 0:
            home[s], room[g] = g, room[g] - 1
    return home
