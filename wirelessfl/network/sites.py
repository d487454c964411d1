"""Base stations: where the sites are (a hexagonal grid, a line, or a file) and which of the
``reuse`` sub-bands each cell uses, so that neighbouring cells differ where the layout allows."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Sites", "build_sites", "hex_axial", "reuse_bands"]

_HEX_DIRECTIONS = ((1, 0), (0, 1), (-1, 1), (-1, 0), (0, -1), (1, -1))


def hex_axial(count: int) -> np.ndarray:
    """The axial coordinates (q, r) of the first ``count`` cells of a hexagonal grid, ring by ring
    from the centre (the centre, its 6 neighbours, the 12 around them, ...), shape (count, 2)."""
    cells = [(0, 0)]
    ring = 1
    while len(cells) < count:
        q, r = ring * _HEX_DIRECTIONS[4][0], ring * _HEX_DIRECTIONS[4][1]  # ring k starts k steps out, then
        # walks its six sides of k steps each
        for side in range(6):
            for _ in range(ring):
                cells.append((q, r))
                q, r = q + _HEX_DIRECTIONS[side][0], r + _HEX_DIRECTIONS[side][1]
        ring += 1
    return np.array(cells[:count], dtype=np.int64)


def reuse_bands(axial: np.ndarray, reuse: int) -> np.ndarray:
    """The sub-band of each hexagonal cell for frequency reuse 1, 3 or 7: (q - r) mod 3 and
    (q + 3 r) mod 7 give every pair of neighbours different sub-bands (each neighbour offset is
    non-zero modulo 3, resp. 7)."""
    q, r = axial[:, 0], axial[:, 1]
    if reuse == 1:
        return np.zeros(len(axial), dtype=np.int64)
    if reuse == 3:
        return np.mod(q - r, 3)
    if reuse == 7:
        return np.mod(q + 3 * r, 7)
    raise ValueError(f"reuse {reuse}: 1, 3 or 7")


@dataclass(frozen=True)
class Sites:
    """The base stations: positions (C, 2) in metres, the sub-band of each (C,), the radius of the
    disc a cell's devices are placed in, and the reuse factor (sub-bands of B / reuse each)."""

    positions_m: np.ndarray
    bands: np.ndarray
    radius_m: float
    reuse: int

    @property
    def count(self) -> int:
        return len(self.positions_m)


def build_sites(cfg) -> Sites:
    """The sites of a [network] table (NetworkConfig)."""
    c, d = cfg.cells, cfg.inter_site_m
    if cfg.layout == "hex":
        axial = hex_axial(c)
        q, r = axial[:, 0].astype(float), axial[:, 1].astype(float)
        positions = np.stack([d * (q + r / 2.0), d * (math.sqrt(3.0) / 2.0) * r], axis=1)
        bands = reuse_bands(axial, cfg.reuse)
    else:
        if cfg.layout == "line":
            positions = np.stack([d * (np.arange(c) - (c - 1) / 2.0), np.zeros(c)], axis=1)
        else:
            positions = read_sites(cfg.sites_file)
        bands = np.arange(len(positions), dtype=np.int64) % cfg.reuse  # neighbours on a line differ
    radius = cfg.cell_radius_m if cfg.cell_radius_m is not None else d / math.sqrt(3.0)
    return Sites(positions, bands, float(radius), int(cfg.reuse))


def read_sites(path) -> np.ndarray:
    """The sites of a file: CSV (an optional header row x, y) or .npy, one x, y row per site (the
    scenario's rules checked its shape)."""
    from ..traces import read_table

    return np.asarray(read_table(path, "network.sites_file"), dtype=float)
