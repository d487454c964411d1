"""What a scheduler decides and what devices report: the values the scheduling and learning packages
exchange through the engines, below both so that neither imports the other (docs/architecture.md).

:class:`Decision` (a round's decision, with its extra uplink :class:`Traffic`), :class:`ReportRequest`
(devices asked for their losses and gradients) and :class:`Reports` (what they reported). Numpy only;
``wirelessfl.scheduling`` (and ``wirelessfl.scheduling.base``) re-export them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Decision", "NO_TRAFFIC", "ReportRequest", "Reports", "Traffic"]


@dataclass(frozen=True)
class ReportRequest:
    """Devices asked for their local loss (and gradient) at the current global model.

    gradients: also the gradient of the local loss (a vector of the model's size).
    max_samples: each device uses at most this many of its samples, evenly spaced (None: all).
    """

    devices: np.ndarray
    gradients: bool = False
    max_samples: int | None = None


@dataclass(frozen=True)
class Reports:
    """What devices reported: losses (k,) and, when asked for, gradients (k, d) float32."""

    round: int
    devices: np.ndarray
    losses: np.ndarray
    gradients: np.ndarray | None = None


@dataclass(frozen=True)
class Traffic:
    """Uplink traffic a scheduler adds to the model uploads (fair selection's reports of losses and
    gradients), timed on the same uplink. Every field None: nothing.

    pre_upload_bits: (N,) bits each device sends after the round's broadcast and before the
        computation starts (the reports of ``probe``, channel feedback, ...).
    piggyback_bits: (N,) bits a selected device adds to its model upload.
    report_with_upload: reports that ride on the model uploads of these devices: the learner
        computes them at the round's model, and ``receive`` gets those whose upload arrived.
    """

    pre_upload_bits: np.ndarray | None = None
    piggyback_bits: np.ndarray | None = None
    report_with_upload: ReportRequest | None = None


NO_TRAFFIC = Traffic()
"""A decision's default: the model uploads alone."""


@dataclass
class Decision:
    """A scheduler's decision for one round: what every scheduler decides, and two optional parts.

    omega: per-draw probabilities of the m multinomial draws, shape (N,), sums to 1 (all zero: nobody).
    q: marginal inclusion probabilities 1 - (1 - omega)^m, in [0, 1] (the unbiased weights use them).
    power: transmit power of each device if selected (linear, same unit as noise_power).
    m: number of draws with replacement.
    info: facts worth recording: its numbers become columns of rounds.csv ("objective" has its own).
    selected: the devices chosen by the scheduler itself (distinct); the engine then uses them
        instead of drawing m devices from omega. None: the engine draws.
    replace: True (default): m draws with replacement from omega, the distinct devices take part;
        False: min(m, devices with omega > 0) distinct devices drawn without replacement (only for a
        uniform omega, where q_n = m / N_available; the SAFARI paper's client sampling).
    queue: the virtual queues Z_n the decision was made with, for a scheduler that keeps them (the
        Lyapunov scheduler); None: it keeps none (recorded as zeros).
    traffic: uplink traffic beyond the model uploads (:class:`Traffic`); default: none.
    frequency: (N,) the CPU frequency in Hz each device computes at if selected, for a scheduler
        that chooses it (capability ``ChoosesFrequency``; the computation model must be
        ``FrequencyScaled``, e.g. devices.compute = "cpu"; docs/energy.md, "CPU frequency").
        None (default): the computation model's own.
    """

    omega: np.ndarray
    q: np.ndarray
    power: np.ndarray
    m: int
    info: dict = field(default_factory=dict)
    selected: np.ndarray | None = None
    replace: bool = True
    queue: np.ndarray | None = None
    traffic: Traffic = NO_TRAFFIC
    frequency: np.ndarray | None = None

    def queues(self) -> np.ndarray:
        """The virtual queues, zeros for a scheduler that keeps none."""
        return np.zeros(len(self.omega)) if self.queue is None else self.queue
