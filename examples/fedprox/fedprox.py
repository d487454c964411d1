"""FedProx (Li et al., 2020): FedAvg whose devices minimise f_n(y) + mu/2 ||y - x_t||^2 locally.

The proximal term keeps each device's local model near the round's global model x_t; its gradient
mu (y - x_t) is added to every local step's minibatch gradient. mu = 0 is FedAvg exactly.
"""
from dataclasses import dataclass

from wirelessfl.config import option
from wirelessfl.learning import FedAvg
from wirelessfl.learning.algorithms import FedAvgOptions


@dataclass(frozen=True)
class FedProxOptions(FedAvgOptions):
    mu: float = option(0.01, ge=0, doc="weight of the proximal term mu / 2 ||y - x_t||^2")


class FedProx(FedAvg):
    Options = FedProxOptions

    @classmethod
    def from_scenario(cls, scenario, options: FedProxOptions) -> "FedProx":
        algorithm = super().from_scenario(scenario, options)  # FedAvg's step size and aggregation
        algorithm.mu = options.mu
        return algorithm

    def local_updates(self, trainer, devices, round_idx):
        """Local SGD on the proximal objective: direction g(y) + mu (y - x_t)."""
        mu = self.mu
        return trainer.local_updates(devices, round_idx, direction=lambda g, y, x0, anchor: g + mu * (y - x0))

    def round(self, trainer, selected, q, num_devices, round_idx) -> dict:
        """FedAvg's round; records mu beside FedAvg's numbers."""
        return {**super().round(trainer, selected, q, num_devices, round_idx), "mu": self.mu}
