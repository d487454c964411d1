"""Round protocols: when the server aggregates. A part, named by ``protocol.name``, like the scheduler.

- ``sync`` (the default): rounds in closed form (wirelessfl.sim.sync.engine). Every selected device starts
  at the round's start; the round ends when every upload is in, or at ``run.round_deadline_s``.
- ``semi_sync``: rounds on the event engine. The scheduler decides as under sync and the devices it
  draws (m draws, the distinct ones) are dispatched; the server aggregates as soon as ``first_k`` of
  their uploads are in (default all), or at the deadline. Uploads still under way are not thrown
  away: with ``late = "carry"`` they go on contending for the uplink and are applied in a later
  aggregation with their staleness; ``late = "drop"`` stops them.
- ``fedbuff`` (Nguyen et al. 2022): at most ``concurrency`` devices train at any time; each finished
  device uploads over the shared uplink; after ``buffer`` (K) updates the server applies
  ``server_lr x (1 / K) sum_i s(tau_i) delta_i``; every slot that frees starts a device the
  scheduler's ``dispatch`` rule picks.
- ``fedasync`` (Xie et al. 2019): every arrival is mixed in at once,
  x <- (1 - a) x + a y with a = alpha s(tau) and y the device's model.

Staleness tau of an update = the server version it is applied to minus the version it started
from (versions count aggregations from 0). The staleness function s is shared, a part named by
``protocol.staleness`` (wirelessfl.sim.protocols.staleness): ``constant`` (1), ``polynomial`` ((1 + tau)^-a:
FedBuff's 1 / sqrt(1 + tau) at a = 1/2), ``hinge`` (1 for tau <= b, else 1 / (a (tau - b) + 1)), an
installed plugin's name or an import path. Updates staler than ``max_staleness`` are dropped
(outcome "stale").

A protocol of your own fits :class:`RoundProtocol` (wirelessfl.sim.protocols.base): the event engine
(wirelessfl.sim.events.engine) calls ``start`` once, ``on_arrival`` for every update that reaches the
server and ``on_lost`` for one whose device went offline; it acts through the engine's methods
(``dispatch``, ``apply``, ``discard``, ``timer``, ``begin_round``, ``end_round``: the
:class:`~wirelessfl.sim.protocols.server_handle.ServerHandle`; see docs/extending.md). What only some
protocols do is a capability of wirelessfl.sim.protocols.base (rounds, timers, state between events,
several updates an aggregation, mixing toward device models, stale updates by option).

One module each: ``base`` (the contract and its capabilities), ``sync``, ``semi_sync``,
``dispatching`` (what fedbuff and fedasync share), ``fedbuff``, ``fedasync``, ``staleness``.
"""
from __future__ import annotations

from ...plugins import Registry
from .base import (ArmsTimers, BatchesUpdates, DecidesStaleUpdates, HoldsUpdates, MixesDeviceModels, RoundProtocol,
                   RunsRounds, event_driven, mixes_device_models, round_based, updates_per_aggregation)
from .dispatching import DispatchOptions
from .fedasync import FedAsync, FedAsyncOptions
from .fedbuff import FedBuff, FedBuffOptions
from .semi_sync import SemiSync, SemiSyncOptions
from .staleness import STALENESS, Staleness, StalenessOptions, staleness_weight
from .sync import Sync

__all__ = ["ArmsTimers", "BatchesUpdates", "DecidesStaleUpdates", "DispatchOptions", "FedAsync", "FedAsyncOptions",
           "FedBuff", "FedBuffOptions", "HoldsUpdates", "MixesDeviceModels", "PROTOCOLS", "RoundProtocol", "RunsRounds",
           "STALENESS", "SemiSync", "SemiSyncOptions", "Staleness", "StalenessOptions", "Sync", "event_driven",
           "mixes_device_models", "round_based", "staleness_weight", "updates_per_aggregation"]

PROTOCOLS = Registry("protocol", "wirelessfl.sim.protocols:RoundProtocol", {
    "sync": "wirelessfl.sim.protocols:Sync",
    "semi_sync": "wirelessfl.sim.protocols:SemiSync",
    "fedbuff": "wirelessfl.sim.protocols:FedBuff",
    "fedasync": "wirelessfl.sim.protocols:FedAsync",
})
"""Built-in round protocols by the name ``protocol.name`` gives them."""
