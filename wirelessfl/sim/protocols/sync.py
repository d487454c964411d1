"""``sync``, the default protocol: rounds computed in closed form (wirelessfl.sim.sync.engine). Every
selected device starts at the round's start; the round ends when every upload is in, or at
``run.round_deadline_s``."""
from __future__ import annotations

from ...fields import NoOptions
from .base import RoundProtocol

__all__ = ["Sync"]


class Sync(RoundProtocol):
    """Synchronous rounds, computed in closed form: it says nothing of arrivals, so the sync engine,
    not the event engine, runs them."""

    Options = NoOptions

    @classmethod
    def from_scenario(cls, scenario, options) -> "Sync":
        """Nothing to build: the sync engine runs the rounds."""
        return cls()
