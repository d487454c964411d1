"""Capabilities: what only some parts of a kind do, each a small runtime-checkable Protocol.

A part's contract (``Algorithm``, ``AccessScheme``, ``Scheduler``, ``ComputeModel``, ``Channel``,
``RoundProtocol``) is a small core that every part of its kind implements, plus capabilities that
only some have, each a ``typing.Protocol`` naming its members next to the contract it belongs to:
an algorithm that applies stale updates (``AppliesStaleUpdates``), one with server rounds
(``ServerRounds``), work that scales (``CountsWork``) or that hears the uplink (``HearsTheUplink``);
a scheduler with a dispatch rule (``Dispatches``, ``DispatchesOne``) or CPU frequencies
(``ChoosesFrequency``); a computation model with an energy (``ComputeEnergy``,
``FrequencyScaled``); a channel whose devices move (``MovingDevices``); an access scheme that
settles its random-access slots (``ResolvesSlots``), times each device's upload itself
(``TimesEachDevice``), whose devices listen while they contend (``ListensWhileContending``), that
sets the power its devices transmit at (``SetsTransmitPower``), adds noise to what the server
receives (``AddsUplinkNoise``), sends each upload on a sub-band (``UploadsOnASubBand``), draws
block fading for its rates (``DrawsBlockFading``), adds columns to updates.csv
(``AddsUploadColumns``) or writes files of its own (``WritesRunFiles``); a round protocol
(wirelessfl.sim.protocols.base) that runs rounds (``RunsRounds``), arms timers
(``ArmsTimers``), holds updates between events (``HoldsUpdates``), applies several an aggregation
(``BatchesUpdates``), mixes toward the devices' models (``MixesDeviceModels``) or says by its options
whether it applies stale updates (``DecidesStaleUpdates``); an engine with edge servers and a cloud
(``wirelessfl.sim.run.contract.EdgeTiers``). The engines and the runner (and, for an access
scheme's, the access and network packages) ask ``provides(part, Capability)`` for these, not the
part's type; the scenario's checks, below the packages that declare most of them, ask
``has_member(part, name)`` (a protocol is event-driven when it has an ``on_arrival`` of its own).
Optional members that are no capability yet are still probed with ``getattr`` in wirelessfl.sim: a
computation model's ``has_energy``, ``compute_time`` and ``frequency_scaled``, a learner's
``uplink``, an event uplink's ``on_air_until``, a scheme's ``state_dict``/``load_state``, a
channel's ``handovers`` and ``site_gain``, a path loss's ``device_columns``, a part's ``round_info``.

A part provides a capability

- by implementing its members: contracts give them defaults to inherit, and a default that stands
  for "this part does not do it" is marked ``@absent``, so inheriting the contract's stub is not
  providing the capability while inheriting FedAvg's real ``apply_updates`` is (the round
  protocol's contract has no member of its capabilities at all, the algorithm's none but its core's
  ``local_updates`` and ``apply_updates``: such a part writes them or not);
- or by naming it among its bases (``class MyChannel(Channel, MovingDevices)``); a capability
  without members can only be had that way.

What is not a capability: facts about a part that are not members, declared as class flags of its
contract (an access scheme's ``concurrent``, ``solo_uploads``, ``over_the_air``, ``contention``,
``interferes``). The scenario's checks (wirelessfl.config.rules) and the access and network
packages read them; the engines read none: they ask the scheme's methods (``send_packets``,
``report_waits``, ``round_airtime_s``, whose defaults follow the flags) and its capabilities.

This module is at the bottom of the package: it imports nothing of it.
"""
from __future__ import annotations

from functools import cache
from typing import Any, Callable, TypeVar

__all__ = ["absent", "has_member", "lacks_of", "members", "provides"]

F = TypeVar("F", bound=Callable[..., Any])

_ABSENT = "__capability_absent__"


def absent(member: F) -> F:
    """Mark a contract's default for a capability's member as standing for the capability's absence."""
    setattr(getattr(member, "__func__", member), _ABSENT, True)
    return member


@cache  # a capability's members do not change: the engines ask every round
def members(capability: type) -> tuple[str, ...]:
    """The members a capability declares (its methods and annotated attributes, its bases' too)."""
    names: dict[str, None] = {}
    for klass in reversed(capability.__mro__):
        if klass is object or not getattr(klass, "_is_protocol", False) or klass.__module__ == "typing":
            continue
        for name in (*klass.__dict__, *getattr(klass, "__annotations__", {})):
            if not name.startswith("_"):
                names[name] = None
    return tuple(names)


def lacks_of(part: Any, capability: type) -> list[str]:
    """The members of ``capability`` that ``part`` lacks where it has some of them: a capability half
    written, which would otherwise go unused without a word ([] for none of them, or all)."""
    names = members(capability)
    missing = [name for name in names if not has_member(part, name)]
    return missing if 0 < len(missing) < len(names) else []


def provides(part: Any, capability: type) -> bool:
    """Whether ``part`` (a part or its class) has ``capability``: it names the capability among its
    bases, or it has every member of it and none is a contract's ``@absent`` default."""
    cls = part if isinstance(part, type) else type(part)
    if capability in cls.__mro__:
        return True
    names = members(capability)
    if not names:  # a property, not members: only a part that names it has it
        return False
    for name in names:
        value = getattr(cls, name, _MISSING)
        if value is _MISSING:
            if cls is part or not hasattr(part, name):  # an attribute the part sets on itself counts
                return False
            continue
        if getattr(getattr(value, "__func__", value), _ABSENT, False):
            return False
    return True


def has_member(part: Any, name: str) -> bool:
    """Whether ``part`` (a part or its class) has the member ``name`` of its own, not a contract's
    ``@absent`` default (for a layer that cannot import the capability naming it)."""
    value = getattr(part, name, _MISSING)
    return value is not _MISSING and not getattr(getattr(value, "__func__", value), _ABSENT, False)


_MISSING = object()
