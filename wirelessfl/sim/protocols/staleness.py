"""Staleness functions s(tau): how much an update computed from a model tau versions old counts when
the server applies it. A part, named by the event protocols' option ``protocol.staleness``.

A staleness function fits :class:`Staleness`: ``__call__(staleness)`` maps an array of staleness
values tau (floats >= 0: the server version an update is applied to minus the version it started
from) to weights of the same shape; ``from_options(a, b)`` builds it from ``protocol.staleness_a``
and ``protocol.staleness_b`` (default: ``cls()``, taking neither). ``STALENESS`` names the built-ins
besides installed plugins (entry-point group ``wirelessfl.staleness``) and import paths
``"module:Class"`` (see docs/extending.md):

- ``constant``: s = 1.
- ``polynomial``: s = (1 + tau)^-a (FedBuff's 1 / sqrt(1 + tau) at a = 1/2; FedAsync's polynomial).
- ``hinge``: s = 1 for tau <= b, else 1 / (a (tau - b) + 1) (FedAsync's hinge).

:class:`StalenessOptions` are the options of the event protocols that name one and bound how stale an
applied update may be.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ...fields import option
from ...plugins import Registry

__all__ = ["Constant", "Hinge", "Polynomial", "STALENESS", "Staleness", "StalenessOptions", "staleness_weight"]


class Staleness(Protocol):
    """A staleness function. Required: ``__call__``; subclass to inherit ``from_options``."""

    @classmethod
    def from_options(cls, a: float, b: float) -> "Staleness":
        """The function with the protocol's ``staleness_a`` and ``staleness_b`` (default: ``cls()``)."""
        return cls()

    def __call__(self, staleness: np.ndarray) -> np.ndarray:
        """The weight s(tau) of each staleness tau (a float array; the result has its shape). A
        function of tau alone: the protocols keep the weights of staleness values seen before."""
        ...


class Constant(Staleness):
    """``"constant"``: s(tau) = 1."""

    def __call__(self, staleness: np.ndarray) -> np.ndarray:
        return np.ones_like(np.asarray(staleness, dtype=float))

    def __repr__(self) -> str:
        return "Constant()"


class Polynomial(Staleness):
    """``"polynomial"``: s(tau) = (1 + tau)^-a (protocol.staleness_a)."""

    def __init__(self, a: float = 0.5):
        self.a = float(a)

    @classmethod
    def from_options(cls, a: float, b: float) -> "Polynomial":
        """The exponent a."""
        return cls(a)

    def __call__(self, staleness: np.ndarray) -> np.ndarray:
        return (1.0 + np.asarray(staleness, dtype=float)) ** -self.a

    def __repr__(self) -> str:
        return f"Polynomial(a={self.a:g})"


class Hinge(Staleness):
    """``"hinge"``: s(tau) = 1 for tau <= b, else 1 / (a (tau - b) + 1) (protocol.staleness_a, _b)."""

    def __init__(self, a: float = 0.5, b: float = 4.0):
        self.a, self.b = float(a), float(b)

    @classmethod
    def from_options(cls, a: float, b: float) -> "Hinge":
        """The slope a and the knee b."""
        return cls(a, b)

    def __call__(self, staleness: np.ndarray) -> np.ndarray:
        tau = np.asarray(staleness, dtype=float)
        return 1.0 / (self.a * np.maximum(tau - self.b, 0.0) + 1.0)  # 1 up to b: no division by a negative

    def __repr__(self) -> str:
        return f"Hinge(a={self.a:g}, b={self.b:g})"


STALENESS = Registry("staleness", "wirelessfl.sim.protocols.staleness:Staleness", {
    "constant": "wirelessfl.sim.protocols.staleness:Constant",
    "polynomial": "wirelessfl.sim.protocols.staleness:Polynomial",
    "hinge": "wirelessfl.sim.protocols.staleness:Hinge",
})
"""Built-in staleness functions by the name ``protocol.staleness`` gives them."""


def staleness_weight(name: str, staleness, a: float, b: float) -> np.ndarray:
    """s(tau) of each staleness, by the staleness function ``name`` (a built-in, an installed plugin's
    name or an import path) with parameters a and b."""
    return STALENESS.load(name).from_options(a, b)(np.asarray(staleness, dtype=float))


@dataclass(frozen=True)
class StalenessOptions:
    """The staleness function and the oldest update applied (shared by the event protocols)."""

    staleness: str = option("polynomial", kind="staleness", doc="s(tau): constant 1, polynomial (1 + tau)^-a, "
                            "hinge 1 for tau <= b else 1 / (a (tau - b) + 1), an installed plugin's name or "
                            "an import path 'module:Class' (wirelessfl.sim.protocols.staleness)")
    staleness_a: float = option(0.5, ge=0, doc="a of the staleness function (0.5: FedBuff's 1 / sqrt(1 + tau))")
    staleness_b: float = option(4.0, ge=0, doc="b of the hinge staleness function")
    max_staleness: int | None = option(None, ge=0, doc="updates staler than this are dropped (outcome 'stale'); "
                                       "default: none")

    def function(self, plugin_path: Sequence[str] = ()) -> Staleness:
        """The staleness function s these options name, built with staleness_a and staleness_b
        (``plugin_path``: folders to look in first for an import path)."""
        return STALENESS.load(self.staleness, plugin_path).from_options(self.staleness_a, self.staleness_b)
