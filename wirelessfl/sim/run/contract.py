"""What the runner (wirelessfl.sim.run.runner) may use of an engine, declared: :class:`RunEngine`, the
core every engine has (the sync Engine, the EventEngine, the tiered engines of wirelessfl.sim.sync.tiers
and wirelessfl.sim.events.tiers), and :class:`EdgeTiers`, the capability of the engines that run
edge servers and a cloud. The runner asks ``provides(engine, EdgeTiers)``, never the engine's type."""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

__all__ = ["EdgeTiers", "RunEngine"]


@runtime_checkable
class RunEngine(Protocol):
    """An engine as the runner drives it: run it, checkpoint and restore it, read its clock."""

    rounds_done: int
    """The rounds (or aggregations) done: the runner checkpoints every run.checkpoint_every of them."""
    on_handovers: Callable[[list], None]
    """Called with the handovers' rows as they happen (the recorder's handovers.csv)."""

    @property
    def now(self) -> float:
        """The simulated clock (where the run starts or stands)."""

    def run(self) -> None:
        """Run until the stop rule fires (from where ``load_state`` left it, if it was called)."""

    def state_dict(self) -> dict:
        """Everything needed to continue exactly here, for checkpoints."""

    def load_state(self, state: dict) -> None:
        """Continue from a ``state_dict`` (before ``run``)."""

    def rows_in_state(self, state: dict) -> int:
        """The rows of rounds.csv a ``state_dict`` stands for (the records are checked against it)."""

    def uplink_busy_s(self, now: float) -> float:
        """How long the uplink carried a model upload by ``now``, as the engine timed it (0 where the
        rounds' records carry it, as the sync rounds' do)."""


@runtime_checkable
class EdgeTiers(Protocol):
    """Capability: the engine runs an edge server per cell and a cloud (hierarchy.tiers = "edge"):
    its rows are edge rounds and cloud aggregations, each device's rates count its own edge's rounds,
    and the summary has the tiers' numbers."""

    def edge_rounds(self) -> list[int]:
        """Each edge's rounds so far, in cell order."""

    def summary(self, selected: int) -> dict:
        """summary.json's numbers of the tiers (``selected``: the devices the rounds drew, in all)."""
