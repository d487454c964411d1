"""SCAFFOLD (Karimireddy et al., ICML 2020): local SGD corrected by control variates, option II.

The server keeps x and the server control variate c; device n keeps its control variate c_n (a
per-device state of the trainer, zero at the start). A selected device runs K local steps

    y <- y - eta_l (g_n(y) + c - c_n),

then its new control variate (option II) is c_n+ = c_n - c + (x - y) / (K eta_l). It uploads two
vectors, delta_y = y - x and delta_c = c_n+ - c_n, and the server broadcasts two, x and c. The
server applies

    x <- x + sum_n w_n delta_y_n       (FedAvg's weights w_n: the paper's mean eta_g / |S| under
                                        uniform sampling without replacement),
    c <- c + (1 / N) sum_n delta_c_n,   c_n <- c_n + delta_c_n for every applied update,

so that c stays the mean of the c_n (over the air, AirComp, both sums carry the channel's noise, and c
then drifts from that mean by it). A device's c_n changes when its update is applied, not when it
trains: an upload that is lost leaves both sides as they were. Under the asynchronous protocols an
update is the pair (delta_y, delta_c) computed from the version the device started from; FedBuff's
staleness weights scale delta_y, and delta_c is applied as it is. Fedasync's mix (x <- (1 - a) x + a y)
has no place for control variates and is refused.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..fields import ConfigError
from .algorithms import FedAvg, FedAvgOptions, Updates

if TYPE_CHECKING:
    from .trainer import Trainer

__all__ = ["Scaffold"]

CONTROL_VARIATES = "scaffold_c"
"""The name of the devices' control variates among the trainer's per-device states."""


class Scaffold(FedAvg):
    """SCAFFOLD with option II control variates; see the module docstring."""

    upload_vectors = 2     # delta_y and delta_c
    broadcast_vectors = 2  # x and c

    def __init__(self, server_lr: float = 1.0, aggregation: str = "unbiased", data_sizes=None):
        super().__init__(server_lr=server_lr, aggregation=aggregation, data_sizes=data_sizes)
        self.c = None        # the server's control variate (d,), a tensor once set up
        self.c_devices = None  # the devices' control variates: the trainer's per-device state

    @classmethod
    def check(cls, scenario, options: FedAvgOptions) -> None:
        """FedAvg's rules, and no fedasync mix (it has no control-variate update)."""
        super().check(scenario, options)
        if scenario.facts.mixes_device_models:
            raise ConfigError(f"learning.algorithm = 'scaffold': protocol.name = {scenario.protocol.name!r} mixes "
                              "each device's model into the server's, which leaves no place for control variates; "
                              "use 'sync', 'semi_sync' or 'fedbuff'")

    def setup(self, trainer: "Trainer") -> None:
        """Zero control variates: the server's c and every device's c_n."""
        import torch

        super().setup(trainer)
        self.c = torch.zeros(trainer.num_params, dtype=torch.float32, device=trainer.device)
        self.c_devices = trainer.device_state(CONTROL_VARIATES)

    def local_updates(self, trainer: "Trainer", devices: np.ndarray, round_idx: int):
        """(k, 2d): each device's delta_y = y_K - x followed by its delta_c = c_n+ - c_n, as sent (with
        compression both are encoded; the device's c_n then moves by what it sent, so that c stays
        the mean of the c_n)."""
        import torch

        c, c_devices = self.c, self.c_devices
        correction = lambda g, y, x0, anchor, devices: g + (c - c_devices[devices])  # noqa: E731
        delta_y = trainer.local_updates(devices, round_idx, direction=correction, upload=False)
        # option II: c_n+ - c_n = -c - delta_y / (K eta_l)
        delta_c = -c - delta_y / (trainer.local_steps * trainer.lr)
        return torch.cat([trainer.upload(devices, delta_y, round_idx), trainer.upload(devices, delta_c, round_idx, 1)],
                         dim=1)

    def apply_updates(self, trainer: "Trainer", updates: Updates) -> dict:
        """An aggregation of a round's or (maybe stale) updates: x by FedAvg's rule with the round's or
        the protocol's weights, c and the devices' c_n by their delta_c."""
        weights = self.update_weights(updates)
        self._apply(trainer, np.asarray(updates.devices, dtype=np.int64), updates.deltas, weights)
        return {"num_trained": int(len(weights)), "weight_sum": float(weights.sum())}

    def _apply(self, trainer: "Trainer", devices: np.ndarray, pairs, weights: np.ndarray) -> None:
        import torch

        d = trainer.num_params
        delta_y, delta_c = pairs[:, :d], pairs[:, d:]
        c_step = delta_c.sum(dim=0) / trainer.num_devices
        if trainer.aggregate_noise_var > 0:  # over the air the control variates are summed with noise too
            share = torch.full((len(delta_c),), 1.0 / trainer.num_devices, device=delta_c.device)
            c_step = c_step + trainer.aggregate_noise(delta_c, share, vector=1)
        trainer.aggregate(delta_y, weights)
        self.c = self.c + c_step.to(self.c.device)
        self.c_devices.add(devices, delta_c)

    def state_dict(self) -> dict:
        """The server's control variate (the devices' are the trainer's per-device state)."""
        return {} if self.c is None else {"c": self.c.cpu().numpy()}

    def load_state(self, state: dict) -> None:
        """Restore the server's control variate."""
        if "c" in state and self.c is not None:
            import torch

            self.c = torch.as_tensor(state["c"], dtype=torch.float32, device=self.c.device)
