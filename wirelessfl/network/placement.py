"""Devices among the cells: where each is (uniform in its cell's disc, or over the union of the
discs) and which cell serves it (the nearest site, or the one of strongest mean gain)."""
from __future__ import annotations

import numpy as np

from .sites import Sites

__all__ = ["place_devices"]


def _disc(count: int, radius_m: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` points uniform in a disc of ``radius_m`` around the origin (sqrt: uniform in area)."""
    r = radius_m * np.sqrt(rng.random(count))
    theta = 2.0 * np.pi * rng.random(count)
    return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)


def place_devices(num_devices: int, sites: Sites, placement: str, rng: np.random.Generator) -> np.ndarray:
    """Positions (N, 2) in metres: ``per_cell``, device n uniform in the disc of site n mod C;
    ``uniform``, uniform over the union of the sites' discs (points of the bounding box kept when
    they fall in a disc, drawn until there are N)."""
    c, radius = sites.count, sites.radius_m
    if placement == "per_cell":
        home = np.arange(num_devices) % c
        return sites.positions_m[home] + _disc(num_devices, radius, rng)
    lo, hi = sites.positions_m.min(axis=0) - radius, sites.positions_m.max(axis=0) + radius
    kept: list[np.ndarray] = []
    have = 0
    while have < num_devices:
        points = lo + (hi - lo) * rng.random((2 * num_devices, 2))
        inside = (np.hypot(*(points[:, None, :] - sites.positions_m[None, :, :]).transpose(2, 0, 1)) <= radius).any(axis=1)
        kept.append(points[inside])
        have += int(inside.sum())
    return np.concatenate(kept)[:num_devices]
