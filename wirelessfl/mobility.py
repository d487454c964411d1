"""Devices moving in the cell in continuous time (``devices.mobility``).

Every device moves along straight segments at ``devices.speed_mps`` inside the disc of radius
``channel.cell_radius_m`` around the base station:

- ``static``: nobody moves (the default).
- ``constant_velocity``: each device keeps one speed and a direction drawn uniformly at start, and
  reflects off the cell's edge like light off a circular mirror (angle of incidence = angle of
  reflection), so it stays in the cell forever.
- ``random_waypoint``: each device walks to a point drawn uniformly in the disc, then to the next
  one, without pausing (Johnson & Maltz's model with zero pause time).

A device's path is drawn from its own random streams, keyed by the device and the segment's
number (the seed's "mobility" stream), so it is the same whenever and however often the simulator
asks for positions, and a resumed run recomputes it from the start instead of storing it.
Knows nothing of learning.
"""
from __future__ import annotations

import math

import numpy as np

from . import rng as rngs
from .fields import ConfigError

__all__ = ["MOBILITY", "Mobility"]

MOBILITY = ("static", "constant_velocity", "random_waypoint")
"""The models ``devices.mobility`` accepts."""


class Mobility:
    """Positions (N, 2) of devices moving as ``model`` from ``start_m`` at ``speed_mps`` in a disc of
    ``radius_m``; ``seed``: the scenario's root seed. Ask for ``positions(t)`` with t never decreasing."""

    def __init__(self, start_m: np.ndarray, radius_m: float, speed_mps: float, model: str, seed: int):
        if model not in MOBILITY:
            raise ValueError(f"unknown mobility {model!r}; allowed values: {', '.join(MOBILITY)}")
        self.model, self.radius, self.speed, self.seed = model, float(radius_m), float(speed_mps), int(seed)
        n = len(start_m)
        self.origin = np.array(start_m, dtype=float).reshape(n, 2)  # where the current segment began
        self.t0 = np.zeros(n)                  # when it began
        self.velocity = np.zeros((n, 2))       # m/s along it
        self.t1 = np.full(n, math.inf)         # when it ends
        self.segments = np.zeros(n, dtype=np.int64)  # segments begun so far, per device
        self.now = 0.0
        if model != "static" and self.speed > 0:
            for d in range(n):
                self._next_segment(d, 0.0)

    @property
    def moving(self) -> bool:
        """Whether anyone moves."""
        return self.model != "static" and self.speed > 0

    def positions(self, t: float) -> np.ndarray:
        """Every device's position at time ``t`` (seconds, >= the last time asked for)."""
        t = float(t)
        if t < self.now:
            raise ValueError(f"positions at {t:g} s asked for after {self.now:g} s: the clock only moves forward")
        self.now = t
        stuck = 0
        while True:
            due = np.flatnonzero(self.t1 < t)
            if due.size == 0:
                break
            before = self.t1[due].copy()
            for d in due.tolist():
                self._next_segment(d, float(self.t1[d]))
            stuck = stuck + 1 if (self.t1[due] <= before).any() else 0
            if stuck > 1000:  # segments shorter than the clock's resolution at t: the loop would never end
                raise ConfigError(f"devices.speed_mps = {self.speed:g}: at t = {t:g} s a device's straight segments "
                                  f"in the cell of radius {self.radius:g} m are shorter than the clock can tell apart; "
                                  "choose a lower speed (or a larger channel.cell_radius_m)")
        return self.origin + self.velocity * (t - self.t0)[:, None]

    def _next_segment(self, d: int, t: float) -> None:
        """Device d's next segment, starting at time t where its current one ends."""
        here = self.origin[d] + self.velocity[d] * (t - self.t0[d]) if self.segments[d] else self.origin[d]
        k = int(self.segments[d])
        if self.model == "random_waypoint":
            u = rngs.stream(self.seed, "mobility", d, k).random(2)
            r, theta = self.radius * math.sqrt(u[0]), 2 * math.pi * u[1]  # uniform over the disc
            to = np.array([r * math.cos(theta), r * math.sin(theta)])
            length = float(np.hypot(*(to - here)))
            v = (to - here) / length * self.speed if length > 0 else np.zeros(2)
            duration = length / self.speed
        else:  # constant_velocity: a direction at start, then a reflection at every wall
            if k == 0:
                theta = 2 * math.pi * rngs.stream(self.seed, "mobility", d, 0).random()
                v = self.speed * np.array([math.cos(theta), math.sin(theta)])
            else:
                normal = here / max(float(np.hypot(*here)), 1e-300)
                v = self.velocity[d] - 2 * float(self.velocity[d] @ normal) * normal
                here = normal * self.radius  # back onto the wall exactly: rounding never leaves the cell
            duration = self._to_wall(here, v)
        self.origin[d], self.velocity[d], self.t0[d], self.segments[d] = here, v, t, k + 1
        self.t1[d] = t + duration

    def _to_wall(self, p: np.ndarray, v: np.ndarray) -> float:
        """Seconds until p + v s reaches the circle of radius R (p inside or on it, v != 0)."""
        a, b = float(v @ v), float(p @ v)
        c = float(p @ p) - self.radius ** 2  # <= 0 inside
        return (-b + math.sqrt(max(b * b - a * c, 0.0))) / a
