"""Which ground station each satellite belongs to when the stations are edge servers
(``hierarchy.tiers = "edge"`` with [orbits]): a static association, fixed for the whole run.

Satellite s belongs to the station with the most contact time with it over the run's horizon, the
sum of (set_s - rise_s) over their passes (passes.csv); ties go to the lower station index, so a
satellite that sees no station at all belongs to station 0 (and never uploads). Static because an
edge server keeps its devices (as cells do on the ground); a satellite passing over another
station does not upload there.
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
    """Each satellite's station (satellites,): the most contact time, ties to the lower index."""
    return np.argmax(contact_seconds(passes, satellites, station_names), axis=1).astype(np.int64)
