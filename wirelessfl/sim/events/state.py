"""Checkpoints of the event engine: its state as plain data (numbers, lists, arrays, tensors), and
the rebuild of its processes from it. SimPy generators cannot be pickled, so every update in flight
or held (phase, times, draws, delta), the uplink's queue, the round under way, the armed timers and
every random stream are saved explicitly; a resume recreates the processes in the order they held
or asked for the uplink, so the same queue forms again and every pending event lands at the same
time and in the same order (wirelessfl.des.clock)."""
from __future__ import annotations


from ...capabilities import provides
from ..protocols.base import HoldsUpdates
from ..round.parts import load_parts_state, parts_state
from .flight import FORWARDING, ON_AIR, QUEUED, Round, Update

__all__ = ["engine_state", "load_engine_state", "restore"]


def engine_state(engine) -> dict:
    """Everything the engine needs to continue exactly where it is (taken between events): its own
    counters, then its components' state (flights, availability, timers, the round driver, the
    uplink, the protocol, the parts)."""
    current = engine.rounds.current
    return {
        **engine.server.state_dict(), "now_s": engine.now, "eval_next_s": engine.eval_rule.next_s,
        "target_reached": engine.stop.reached, "evals_at": list(engine.evals_at),
        "streams": {name: g.bit_generator.state for name, g in engine.streams.items()},
        **parts_state(engine.parts),
        # the round's finished updates too: its record needs them
        **engine.flights.state_dict(also=current.updates if current is not None else ()),
        **engine.availability.state_dict(),
        **engine.dispatcher.state_dict(),
        **engine.losses.state_dict(),
        **({"last_models": engine.tasks.last_models.state_dict()} if engine.tasks.last_models is not None else {}),
        **({"site_links": engine.site_links.state_dict()} if engine.site_links is not None else {}),
        **engine.timers.state_dict(),
        **engine.busy.state_dict(),
        **engine.rounds.state_dict(),
        "uplink": engine.uplink.state_dict(),
        "protocol": _encode(engine.protocol.state_dict() if provides(engine.protocol, HoldsUpdates) else {}),
    }


def load_engine_state(engine, state: dict) -> None:
    """Continue from a state_dict (call before run; ``restore`` rebuilds the updates as it starts)."""
    engine.server.load_state(state)
    engine.start_s = float(state["now_s"])
    engine.eval_rule.next_s = float(state["eval_next_s"])
    engine.stop.reached = bool(state["target_reached"])
    engine.evals_at = list(state["evals_at"])
    for name, g in engine.streams.items():
        if name in state["streams"]:
            g.bit_generator.state = state["streams"][name]
    load_parts_state(engine.parts, state)
    engine.flights.load_state(state)
    engine.availability.load_state(state)
    engine.timers.load_state(state)
    engine.busy.load_state(state)
    engine.dispatcher.load_state(state)
    engine.losses.load_state(state)
    if engine.tasks.last_models is not None:
        engine.tasks.last_models.load_state(state["last_models"])
    if engine.site_links is not None:
        engine.site_links.load_state(state["site_links"])
    engine.restored = state


def restore(engine, state: dict) -> None:
    """Rebuild updates, processes, the uplink's queue and the round (run() calls it)."""
    by_seq = engine.flights.restore(state)
    engine.rounds.load_state(state, by_seq)
    if provides(engine.protocol, HoldsUpdates):
        engine.protocol.load_state(_decode(state["protocol"], by_seq, engine.rounds.current))
    # processes in the order they hold or asked for the uplink, then the rest: the same queue
    flying = engine.flights.flying.values()
    on_air = [u for u in flying if u.phase == ON_AIR]
    queued = sorted((u for u in flying if u.phase == QUEUED), key=lambda u: u.queue_seq)
    rest = [u for u in flying if u.phase < QUEUED or u.phase == FORWARDING]
    for u in on_air + queued + rest:
        engine.tasks.fly(u)
    engine.uplink.load_state(state["uplink"])
    engine.restored = None


_UPDATE, _ROUND = "__update__", "__round__"


def _encode(value):
    """A protocol's state with updates and the round as markers (the engine saves those itself)."""
    if isinstance(value, Update):
        return {_UPDATE: value.seq}
    if isinstance(value, Round):
        return {_ROUND: value.index}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _decode(value, by_seq: dict, round_: Round | None):
    if isinstance(value, dict):
        if set(value) == {_UPDATE}:
            return by_seq[value[_UPDATE]]
        if set(value) == {_ROUND}:
            return round_
        return {k: _decode(v, by_seq, round_) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, by_seq, round_) for v in value]
    return value
