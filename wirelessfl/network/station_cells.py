"""Ground stations as the cells of an edge run over satellites (``hierarchy.tiers = "edge"`` with
[orbits], docs/satellites.md): a :class:`~wirelessfl.network.cells.Cells` whose sites are the
stations, whose association is the static one of wirelessfl.orbits.association (even shares, each
satellite to the station it sees longest among those with room), and whose per-cell access scheme is the orbit access of that station (one
shared contact plan, in which each satellite's windows are its passes over its own station).

The stations do not share a band (each pass has the link budget's own bandwidth), so the cells do
not interfere; they have no position on the ground's plane, so summary.json's cell entries name the
station and its coordinates instead of ``site_m`` and ``band``.
"""
from __future__ import annotations

import numpy as np

from ..fields import ConfigError
from .cells import Cells, build_cells
from .sites import Sites

__all__ = ["StationCells", "build_run_cells", "build_station_cells"]


class StationCells(Cells):
    """The stations of an [orbits] run as the cells of edge servers (see the module docstring)."""

    def __init__(self, stations, serving: np.ndarray, accesses: list):
        count = len(stations)
        sites = Sites(positions_m=np.full((count, 2), np.nan), bands=np.arange(count), radius_m=float("nan"), reuse=1)
        super().__init__(sites, serving, accesses)
        self.stations = tuple(stations)

    def site_row(self, cell: int) -> dict:
        """summary.json's description of a cell's site: the station's name and coordinates."""
        s = self.stations[cell]
        return {"station": s.name, "latitude_deg": float(s.latitude_deg), "longitude_deg": float(s.longitude_deg)}


def build_station_cells(scenario) -> StationCells:
    """The stations of ``scenario``'s [orbits] as the cells of its edge servers: one contact plan for
    the run, one orbit access per station sharing it. A station that none of its satellites ever sees
    would be an edge that never aggregates: refused in one line."""
    from ..access.link import Link
    from ..access.orbit import OrbitAccess, contact_plan

    from ..orbits.association import contact_seconds

    plan = contact_plan(scenario)
    serving = plan.home
    seconds = contact_seconds(plan.passes, serving.size, [site.name for site in plan.sites])
    for g, site in enumerate(plan.sites):
        if not seconds[serving == g, g].any():
            raise ConfigError(f"orbits.ground_stations[{g}] ({site.name!r}) with hierarchy.tiers = 'edge': none of the "
                              "satellites it is given ever sees it, so its edge server would never aggregate; "
                              "drop it, or use hierarchy.tiers = 'cloud'")
    accesses = [OrbitAccess(Link(scenario.link), plan) for _ in plan.sites]
    return StationCells(plan.sites, serving, accesses)


def build_run_cells(scenario, channel) -> Cells | None:
    """The cells of a run: an [orbits] run's ground stations when they are edge servers, else
    wirelessfl.network.cells.build_cells (None for one cell)."""
    if scenario.orbits is not None and scenario.hierarchy.tiers == "edge":
        return build_station_cells(scenario)
    return build_cells(scenario, channel)
