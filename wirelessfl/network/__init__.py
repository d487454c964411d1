"""Networks of cells: where the base stations are and which sub-band each uses (:mod:`.sites`),
where the devices are (:mod:`.placement`) and which cell serves each (the association part,
:mod:`.association`), and each cell's own uplink in
both timing models (:mod:`.cells`), interference between cells on one sub-band
(:mod:`.interference`), and the backhaul from the sites to the cloud (:mod:`.backhaul`). One cell, the default, is the simulator's single uplink; see
docs/networks.md. Knows nothing of learning."""
from __future__ import annotations

from .backhaul import NO_BACKHAUL, Backhaul, NoBackhaul
from .cells import Cells, CellUplinks, build_cells
from .placement import place_devices
from .sites import Sites, build_sites, hex_axial, reuse_bands

__all__ = ["Backhaul", "CellUplinks", "NO_BACKHAUL", "NoBackhaul", "Cells", "Sites", "build_cells", "build_sites", "hex_axial",
           "place_devices", "reuse_bands"]
