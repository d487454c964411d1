"""Capabilities: what only some parts of a kind do, each a small runtime-checkable Protocol.

A part's contract (``Algorithm``, ``AccessScheme``, ``Scheduler``, ``ComputeModel``, ``Channel``,
``RoundProtocol``) is a small core that every part of its kind implements, plus capabilities that
only some have: an algorithm that applies stale updates, a scheduler with a dispatch rule, a band
that several devices share at once, a computation model with an energy. Each capability is a
``typing.Protocol`` naming its members, next to the contract it belongs to, and the engines ask
``provides(part, Capability)`` rather than reading flags or names.

A part provides a capability

- by implementing its members: contracts give them defaults to inherit, and a default that stands
  for "this part does not do it" is marked ``@absent``, so inheriting the contract's stub is not
  providing the capability while inheriting FedAvg's real ``apply_updates`` is;
- or, for a capability that is a property rather than members (``SharedBand``, ``OverTheAir``), by
  naming it among its bases: ``class MyScheme(AccessScheme, SharedBand)``.

This module is at the bottom of the package: it imports nothing of it.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

__all__ = ["absent", "has_member", "members", "provides"]

F = TypeVar("F", bound=Callable[..., Any])

_ABSENT = "__capability_absent__"


def absent(member: F) -> F:
    """Mark a contract's default for a capability's member as standing for the capability's absence."""
    setattr(getattr(member, "__func__", member), _ABSENT, True)
    return member


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
