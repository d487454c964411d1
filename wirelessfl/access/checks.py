"""Whether a built access scheme can run: what a one-line error says instead of a traceback deep in
an engine."""
from __future__ import annotations

from ..fields import ConfigError
from .fdma import FDMA
from .link import Link

__all__ = ["check_scheme"]


def _overrides(scheme, name: str, base: type) -> bool:
    """Whether ``scheme``'s class defines ``name`` below ``base`` (a user's override)."""
    for klass in type(scheme).__mro__:
        if klass is base:
            return False
        if name in klass.__dict__:
            return True
    return False


def check_scheme(scheme, field: str, event_driven: bool) -> None:
    """ConfigError, in one line naming ``field`` and what to do, for a scheme that cannot run:
    one whose ``__init__`` skipped the step that sets ``link``, one that lacks a member the engine
    needs, or a shared-band scheme whose ``airtime_s`` override the event engine would not see."""
    name = type(scheme).__name__
    if not isinstance(getattr(scheme, "link", None), Link):
        raise ConfigError(f"{field}: {name} has no link: its __init__ must call super().__init__(link) "
                          "(or set self.link to a wirelessfl.access.Link)")
    if event_driven and isinstance(scheme, FDMA) and _overrides(scheme, "airtime_s", FDMA) \
            and not _overrides(scheme, "rates_bps", FDMA) and not _overrides(scheme, "event_uplink", FDMA):
        raise ConfigError(f"{field}: {name} overrides airtime_s, which the event engine's shared band does not "
                          "use (devices on the air together send at rates_bps): override rates_bps instead, "
                          "which serves both engines")
