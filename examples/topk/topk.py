"""Top-k: each round, the k available devices with the best channel, at full power."""
from dataclasses import dataclass

import numpy as np
from wirelessfl.config import option
from wirelessfl.scheduling import Decision, RoundState, Scheduler


@dataclass(frozen=True)
class TopKOptions:
    k: int = option(5, ge=1, doc="devices per round")


class TopK(Scheduler):
    Options = TopKOptions
    inclusion_probabilities = False  # chosen, not drawn: FedAvg averages their updates

    def __init__(self, num_devices: int, k: int, p_max: float):
        self.n, self.k, self.p_max = num_devices, k, p_max

    @classmethod
    def from_scenario(cls, scenario, options: TopKOptions) -> "TopK":
        return cls(scenario.devices.count, options.k, scenario.link.p_max)

    def decide(self, state: RoundState) -> Decision:
        gains = np.where(state.available if state.available is not None else True, state.gains, -np.inf)
        best = np.argsort(-gains, kind="stable")[: self.k]
        q = np.isin(np.arange(self.n), best[np.isfinite(gains[best])]) * 1.0
        return Decision(omega=q / max(q.sum(), 1.0), q=q, power=np.full(self.n, self.p_max),
                        m=self.k, selected=np.flatnonzero(q))
