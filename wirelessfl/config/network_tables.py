"""The scenario's tables of networks: the cells ([network]) and who aggregates ([hierarchy]),
frozen dataclasses like the others (wirelessfl.config.tables holds the Scenario that names them)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..fields import FilePath, option

__all__ = ["HierarchyConfig", "NetworkConfig"]


@dataclass(frozen=True)
class NetworkConfig:
    """Cells: base stations (sites), each a cell with its own band and its own instance of the access
    scheme; devices placed among them and served by one (docs/networks.md). One cell, the default, is
    the single uplink of channel.cell_radius_m around the origin."""

    cells: int = option(1, ge=1, le=10_000, doc="number of sites (cells); 1: one cell at the origin")
    layout: str = option("hex", choices=("hex", "line", "file"),
                         doc="where the sites are: hex (a hexagonal grid, rings around the origin), line "
                             "(along x, centred on the origin) or file (sites_file)")
    inter_site_m: float = option(500.0, gt=0, doc="distance between neighbouring sites (hex, line)")
    sites_file: FilePath | None = option(None, doc="layout = 'file': CSV or .npy of one x, y row (metres) per site")
    cell_radius_m: float | None = option(None, gt=0, doc="radius of the disc a cell's devices are placed in "
                                         "(placement = 'per_cell'; default: inter_site_m / sqrt(3), the "
                                         "hexagon's corner)")
    placement: str = option("per_cell", choices=("per_cell", "uniform"),
                            doc="where the devices are: per_cell (device n uniform in the disc of site n mod "
                                "cells) or uniform (uniform over the union of the sites' discs)")
    association: str = option("nearest", doc="the cell serving a device (and, with moving devices, the one it hands "
                              "over to): nearest (its nearest site), strongest (the site of strongest mean gain: path "
                              "loss and shadowing), an installed plugin or 'module:Class' "
                              "(wirelessfl.network.association); options in association_options")
    association_options: Any = field(default=None, metadata={"options_of": "association"})
    reuse: int = option(1, choices=(1, 3, 7), doc="frequency reuse: the band in this many sub-bands, each cell "
                        "on one (B / reuse, N0 / reuse), neighbours on different ones where the layout "
                        "allows; cells on one sub-band interfere")
    handover_hysteresis_db: float = option(3.0, ge=0, le=100, doc="moving devices: a device hands over to the "
                                           "site the association gives it where it is now when that site's mean "
                                           "gain beats its serving site's by more than this")
    handover_upload: str = option("restart", choices=("restart", "complete", "lose"),
                                  doc="an upload queued or on the air at its device's handover (event protocols): "
                                      "restarted in the new cell, completed in the old one, or lost (outcome "
                                      "'handover')")
    interference_fading: str = option("rayleigh", choices=("rayleigh", "none"),
                                      doc="the gain of an interferer to another cell's site: its mean path gain "
                                          "times an Exp(1) factor drawn per upload (rayleigh), or the mean alone")


@dataclass(frozen=True)
class HierarchyConfig:
    """Who aggregates: one server for every device (the cloud, the default), or an edge server per
    cell aggregating its devices and a cloud aggregating the edges (HierFAVG), over a backhaul
    (docs/networks.md)."""

    tiers: str = option("cloud", choices=("cloud", "edge"),
                        doc="cloud: one server aggregates every device's update (each site forwarding its "
                            "devices' updates over the backhaul); edge: each cell's edge server aggregates its "
                            "devices under the round protocol, and the cloud the edges' models every cloud_every "
                            "edge aggregations")
    cloud: str = option("sync", choices=("sync", "async"),
                        doc="tiers = 'edge' under the event protocols: the cloud applies the edges' updates when "
                            "every edge's is in (sync), or each as it arrives (async)")
    cloud_every: int = option(1, ge=1, le=1_000_000, doc="tiers = 'edge': edge aggregations per cloud aggregation "
                              "(HierFAVG's kappa_2)")
    backhaul_rate_bps: float | None = option(None, gt=0, doc="the backhaul between a site and the cloud, each "
                                             "direction: a model takes model_bits / rate (None: no time)")
    backhaul_latency_s: float = option(0.0, ge=0, doc="added to every transfer on the backhaul")
