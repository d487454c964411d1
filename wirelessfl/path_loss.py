"""Large-scale path loss: distance gain and log-normal shadowing of devices around a base station
(:class:`PathLoss`), devices placed uniformly over a cell's disc, and every device's distance and
mean gain to every site of several cells. Knows nothing of fading, SimPy or learning; the channel
that multiplies a fading model by it is wirelessfl.wireless.PathLossChannel."""
from __future__ import annotations

import numpy as np

__all__ = ["PathLoss", "cell_positions", "site_gains"]


def cell_positions(num_devices: int, radius_m: float, rng: np.random.Generator) -> np.ndarray:
    """Positions (N, 2) drawn uniformly over a disc of the given radius centred on the base station."""
    r = radius_m * np.sqrt(rng.random(num_devices))  # sqrt: uniform in area, not in radius
    theta = 2.0 * np.pi * rng.random(num_devices)
    return np.stack([r * np.cos(theta), r * np.sin(theta)], axis=1)


class PathLoss:
    """Large-scale gain: reference_gain x (d / d0)^-exponent x 10^(X / 10), X ~ N(0, shadowing_db^2).

    Distances below d0 count as d0 (the far-field model does not hold closer in). Shadowing is drawn
    once per device at construction (``per_round=False``: a device behind a building stays there) or
    afresh every round from the channel stream (``per_round=True``: fast-moving devices).
    """

    def __init__(self, positions_m: np.ndarray, *, reference_gain: float, reference_distance_m: float,
                 exponent: float, shadowing_db: float, per_round: bool, rng: np.random.Generator,
                 origins_m: np.ndarray | None = None, shadow_db: np.ndarray | None = None):
        self.reference_gain, self.reference_distance_m = float(reference_gain), float(reference_distance_m)
        self.exponent = float(exponent)
        # where each device's base station is (several cells: its serving site; default the origin)
        self.origins_m = None if origins_m is None else np.asarray(origins_m, dtype=float).reshape(-1, 2)
        self.move(positions_m)
        self.shadowing_db = float(shadowing_db)
        self.per_round = per_round
        n = self.distances_m.size
        if shadow_db is not None:  # drawn by whoever placed the devices (to every site, for association)
            self.device_shadow_db = np.asarray(shadow_db, dtype=float)
        else:
            self.device_shadow_db = (np.zeros(n) if per_round or shadowing_db == 0
                                     else rng.normal(0.0, shadowing_db, n))

    def move(self, positions_m: np.ndarray) -> None:
        """The devices are now at ``positions_m`` (N, 2): distances and distance gains follow (a
        device's shadowing stays its own)."""
        self.positions_m = np.asarray(positions_m, dtype=float).reshape(-1, 2)
        offset = self.positions_m if self.origins_m is None else self.positions_m - self.origins_m
        self.distances_m = np.hypot(offset[:, 0], offset[:, 1])
        self.distance_gain = self.gain_at(self.distances_m)

    def gain_at(self, distances_m: np.ndarray) -> np.ndarray:
        """The distance gain reference_gain x (max(d, d0) / d0)^-exponent at ``distances_m``."""
        d = np.maximum(distances_m, self.reference_distance_m)
        return self.reference_gain * (d / self.reference_distance_m) ** (-self.exponent)

    def scale(self, rng: np.random.Generator, devices: np.ndarray | None = None) -> np.ndarray:
        """This round's large-scale gain of every device (or of ``devices``)."""
        distance = self.distance_gain if devices is None else self.distance_gain[devices]
        if self.per_round and self.shadowing_db > 0:
            return distance * 10.0 ** (rng.normal(0.0, self.shadowing_db, distance.size) / 10.0)
        shadow = self.device_shadow_db if devices is None else self.device_shadow_db[devices]
        return distance * 10.0 ** (shadow / 10.0)

    def mean_scale(self) -> np.ndarray:
        """Long-run mean of each device's scale.

        Per-round shadowing: the log-normal mean, distance gain x exp((s ln10 / 10)^2 / 2). Per-device
        shadowing: the device's own fixed scale (averaged over devices at one distance it has the
        same log-normal mean).
        """
        if self.per_round:
            return self.distance_gain * np.exp(0.5 * (self.shadowing_db * np.log(10.0) / 10.0) ** 2)
        return self.distance_gain * 10.0 ** (self.device_shadow_db / 10.0)


def site_gains(path_loss: PathLoss, positions_m: np.ndarray, sites_m: np.ndarray,
               shadow_db: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distances, mean path gains) of every device to every site ((N, C) each), with each pair's
    shadowing in dB."""
    offsets = positions_m[:, None, :] - sites_m[None, :, :]
    distances = np.hypot(offsets[..., 0], offsets[..., 1])
    return distances, path_loss.gain_at(distances) * 10.0 ** (shadow_db / 10.0)
