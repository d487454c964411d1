"""``fedasync`` (Xie et al. 2019): every arrival is mixed in at once, x <- (1 - a) x + a y with
a = alpha s(tau) and y the device's model."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...fields import option
from .dispatching import DispatchOptions, Dispatching

__all__ = ["FedAsync", "FedAsyncOptions"]


@dataclass(frozen=True)
class FedAsyncOptions(DispatchOptions):
    """Options of FedAsync."""

    alpha: float = option(0.6, gt=0, le=1, doc="mixing weight: a = alpha s(tau)")


class FedAsync(Dispatching):
    """Every arrival mixed in at once: x <- (1 - a) x + a y, a = alpha s(tau)."""

    Options = FedAsyncOptions
    name = "fedasync"
    keeps_start_model = True  # the mix needs the model the device started from (MixesDeviceModels)

    def _take(self, server, update) -> None:
        server.apply([update], self.weights((server.version - update.version,)) if server.trains else None, mix=True)

    def _weigh(self, staleness: np.ndarray) -> np.ndarray:
        return self.options.alpha * self.staleness(staleness)
