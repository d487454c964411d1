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


class Tr38901PathLoss(PathLoss):
    """3GPP TR 38.901 large-scale gain (wirelessfl.radio.tr38901): each device's line of sight drawn
    once with the table's probability at its placement (or forced), its path loss for that state
    (Table 7.4.1-1, breakpoint included), log-normal shadowing with the state's sigma, and the
    antennas' gains: gain = 10^((G_BS + G_UT - PL - SF) / 10).

    The state stays the device's as it moves (no LOS/NLOS transitions within a run); O2I penetration
    is not modelled (every device is outdoors, or in the office of ``inh``)."""

    def __init__(self, positions_m: np.ndarray, *, scenario: str, carrier_hz: float, bs_height_m: float,
                 ut_height_m: float, los: str, shadowing_db: float | None, per_round: bool,
                 antenna_gain_db: float, rng: np.random.Generator):
        from .radio import tr38901

        self.scenario, self.carrier_hz = scenario, float(carrier_hz)
        self.bs_height_m, self.ut_height_m, self.antenna_gain_db = float(bs_height_m), float(ut_height_m), \
            float(antenna_gain_db)
        positions = np.asarray(positions_m, dtype=float).reshape(-1, 2)
        d2d = np.hypot(positions[:, 0], positions[:, 1])
        self.los = tr38901.draw_states(rng, scenario, d2d, self.ut_height_m, los)
        sigma = (tr38901.shadowing_sigma_db(scenario, self.los, d2d, self.bs_height_m, self.ut_height_m,
                                            self.carrier_hz) if shadowing_db is None
                 else np.full(d2d.size, float(shadowing_db)))
        shadow = np.zeros(d2d.size) if per_round else rng.normal(0.0, 1.0, d2d.size) * sigma
        super().__init__(positions, reference_gain=1.0, reference_distance_m=1.0, exponent=0.0, shadowing_db=0.0,
                         per_round=per_round, rng=rng, shadow_db=shadow)
        self.shadowing_db = sigma  # per device

    def path_loss_db(self, distances_m: np.ndarray) -> np.ndarray:
        """TR 38.901's path loss at 2D ``distances_m`` for each device's state (rows: devices)."""
        from .radio import tr38901

        los = self.los if np.ndim(distances_m) == 1 else self.los[:, None]
        return tr38901.path_loss_db(self.scenario, distances_m, self.bs_height_m, self.ut_height_m, self.carrier_hz,
                                    los)

    def gain_at(self, distances_m: np.ndarray) -> np.ndarray:
        """10^((G_BS + G_UT - PL) / 10) at ``distances_m``."""
        return 10.0 ** ((self.antenna_gain_db - self.path_loss_db(distances_m)) / 10.0)

    def scale(self, rng: np.random.Generator, devices: np.ndarray | None = None) -> np.ndarray:
        """This round's large-scale gain of every device (or of ``devices``), its shadowing included."""
        distance = self.distance_gain if devices is None else self.distance_gain[devices]
        if self.per_round:
            sigma = self.shadowing_db if devices is None else self.shadowing_db[devices]
            return distance * 10.0 ** (rng.normal(0.0, 1.0, distance.size) * sigma / 10.0)
        shadow = self.device_shadow_db if devices is None else self.device_shadow_db[devices]
        return distance * 10.0 ** (shadow / 10.0)

    def device_columns(self) -> dict[str, np.ndarray]:
        """For devices.csv: each device's line of sight (1/0) and path loss in dB at its position."""
        return {"los": self.los.astype(np.int64), "path_loss_db": self.path_loss_db(self.distances_m)}
