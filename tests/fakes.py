"""Fakes for driving the engine directly: a fixed channel and a scheduler that selects everyone."""
import numpy as np

from wirelessfl.scheduling.base import Decision


class FixedChannel:
    """The same gains every round."""

    def __init__(self, gains):
        self.gains = np.asarray(gains, dtype=float)

    def draw(self, rng):
        return self.gains.copy()


class SelectAll:
    """Selects every device with certainty for practical purposes (m large, omega uniform);
    remembers the availability mask of each round."""

    def __init__(self, n, power=1.0):
        self.n, self.power = n, power
        self.seen_available = []

    def decide(self, state):
        self.seen_available.append(state.available)
        omega = np.full(self.n, 1 / self.n)
        return Decision(omega=omega, q=np.ones(self.n), power=np.full(self.n, self.power),
                        queue=np.zeros(self.n), m=400)
