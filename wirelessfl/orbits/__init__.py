"""The orbital layer for federated learning over LEO satellites: a physical model, like path_loss.

``constellation`` builds the satellites (a Walker-delta/star layout or a TLE file), ``ephemeris``
propagates them with SGP4 onto a time grid in the Earth-fixed frame, ``geometry`` places ground
stations and gives range, elevation, azimuth and Doppler, ``passes`` finds the contact windows,
``link_budget`` turns range and elevation into SNR and rates, ``isl`` routes along a plane.
docs/satellites.md has the models, their sources and what is left out.

Needs the optional extra ``orbits`` (``pip install wirelessfl[orbits]``: sgp4; skyfield is the
tests' reference). Imports numpy, sgp4 and the foundation (fields, units) only: no torch, SimPy,
sim, learning or config.
"""
from __future__ import annotations

from .constellation import SAMPLE_TLE, Constellation, WalkerOptions, from_tle_file, walker
from .ephemeris import Ephemeris, propagate_ecef
from .geometry import STATIONS, Look, Station, doppler_hz, look, station, stations
from .isl import IslRoute, light_time_s, neighbours, route_to_station
from .link_budget import DVBS2_MODCODS, LinkBudget, dvbs2_modcod, dvbs2_rate_bps, free_space_loss_db, gas_loss_db, \
    path_gain
from .passes import Pass, find_passes, passes_csv

__all__ = ["DVBS2_MODCODS", "SAMPLE_TLE", "STATIONS", "Constellation", "Ephemeris", "IslRoute", "LinkBudget", "Look",
           "Pass", "Station", "WalkerOptions", "doppler_hz", "dvbs2_modcod", "dvbs2_rate_bps", "find_passes",
           "free_space_loss_db", "from_tle_file", "gas_loss_db", "light_time_s", "look", "neighbours", "passes_csv",
           "path_gain", "propagate_ecef", "route_to_station", "station", "stations", "walker"]
