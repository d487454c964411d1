"""Bounds on what a scenario may ask of the event loop.

Some options multiply into the number of events a simulated second (or one upload) takes: packets
of an upload times the transmissions of each, the coherence time an upload fades in, the speed of
devices against the cell they cross, the slots of an access scheme, the steps of the availability
chain, the local steps of a round. At absurd values (1-bit packets of a 1e12-bit model, a slot of
1e-308 s) the clock crawls and a run never ends, with no error. Each bound here is a one-line
ConfigError naming the fields and the limit, raised when the scenario is loaded (``check_rates``)
or where the upload's size is known (``check_upload``: the model's bits are measured when the run
is built, unless link.model_bits says them).
"""
from __future__ import annotations

import math

from ..fields import ConfigError

MAX_EVENTS_PER_SECOND = 10_000_000
"""Events of one periodic process in a simulated second: availability steps, slots, fading blocks of
an upload, transmissions at a fixed rate, waypoint segments of every device together."""
MAX_TRANSMISSIONS_PER_UPLOAD = 1_000_000
"""Packets of one upload times the transmissions each may take (link.max_attempts); and the
transmissions of the model to one device (link.downlink_max_attempts), bounded alike."""
MAX_BITS_PER_HZ = 1e300
"""An upload's bits per hertz of the band (link.model_bits / link.bandwidth_hz): Shannon's rate is at
most 1,024 bits/s/Hz at any SNR a float holds, so beyond this the airtime overflows to inf whatever
the power or the channel (and the run would stop as NonFiniteTime after its first round)."""
MAX_LOCAL_STEPS = 1_000_000
"""Local steps of one device in one round (the scenario's, or what a Flower strategy's fit config asks)."""
MAX_IDLE_STEPS = 1_000_000
"""Availability steps in a row with no device in flight after which a run that only counts
aggregations (run.rounds, no time budget) stops as stalled: it would never reach its count."""
MAX_LOSSES_IN_A_ROW = 100
"""Tasks per device lost (to empty batteries, to missed models) with no aggregation in between after
which a run that only counts aggregations stops as stalled (wirelessfl.sim.events.stalls)."""

MAX_ROWS = 10_000_000
"""Aggregations (rows of rounds.csv, at every tier) a run may be estimated to make before it runs, or
from the pace of its first rows: about a quarter of an hour and a gigabyte of records at the pace
of a small timing-only run, and past it usually a setting meant otherwise (hierarchy.cloud_every,
hierarchy.backhaul_latency_s). A time budget that ends the run sooner lifts it."""

MAX_EDGE_SLOTS = 10_000_000
"""Edge servers times devices (hierarchy.tiers = "edge"): every edge's scheduler holds and decides
over all the devices (those of other cells unavailable to it), so a round costs cells x devices
(about 0.7 us each, measured at 2,000 x 2,000; 10^7: about 7 s a round, 10,000 x 10,000 would
be about a minute a round and 8 GB)."""

SPEED_OF_LIGHT = 299_792_458.0
_RATE = f"at most {MAX_EVENTS_PER_SECOND:,} a simulated second"


def _g(value: float) -> str:
    return f"{value:g}"


def check_rates(s) -> None:
    """The bounds that the scenario alone decides (see the module docstring)."""
    _check_availability(s)
    _check_slots(s)
    _check_coherence(s)
    _check_mobility(s)
    _check_downlink(s)
    if s.link.model_bits is not None:
        check_upload(s, s.link.model_bits, "link.model_bits")


def _check_availability(s) -> None:
    dc = s.devices
    battery = dc.availability == "battery"
    if dc.p_on_to_off == 0 and dc.availability_trace is None and not battery or not s.facts.event_driven:
        return  # nobody ever leaves, or the chain steps once a round (sync)
    steps = 1.0 / dc.availability_period_s
    if not steps <= MAX_EVENTS_PER_SECOND:
        model = "battery" if battery else "trace" if dc.availability_trace is not None else "chain"
        raise ConfigError(f"devices.availability_period_s = {_g(dc.availability_period_s)}: the availability "
                          f"{model} would step {steps:.3g} "
                          f"times a simulated second; {_RATE} (availability_period_s >= {1 / MAX_EVENTS_PER_SECOND:g})")
    if dc.availability_trace is None and not battery and s.run.time_budget_s is None:
        # in the chain's steady state a device is available with probability on = p_off_to_on /
        # (p_off_to_on + p_on_to_off), and a step with any of the N available has 1 - (1 - on)^N
        on = dc.p_off_to_on / (dc.p_off_to_on + dc.p_on_to_off)
        anyone = -math.expm1(dc.count * math.log1p(-on)) if on < 1 else 1.0
        if anyone * MAX_IDLE_STEPS < 1:
            raise ConfigError(f"devices.p_off_to_on = {_g(dc.p_off_to_on)}: with devices.p_on_to_off = "
                              f"{_g(dc.p_on_to_off)} and {dc.count} devices, a step in which any device is available "
                              f"comes once in {1 / anyone:.3g} availability steps, and run.rounds counts aggregations "
                              f"that would hardly ever happen; at least one step in {MAX_IDLE_STEPS:,} "
                              "(or set run.time_budget_s)")


def _check_slots(s) -> None:
    """Any access scheme's ``slot_s`` option (tdma_slotted, aloha, a plug-in's)."""
    options = s.options("access")
    slot = getattr(options, "slot_s", None) if not isinstance(options, dict) else options.get("slot_s")
    if not isinstance(slot, (int, float)) or isinstance(slot, bool) or not slot > 0:
        return
    if not 1.0 / slot <= MAX_EVENTS_PER_SECOND:
        raise ConfigError(f"link.slot_s = {_g(slot)}: {1 / slot:.3g} slots a simulated second under "
                          f"link.access = {s.link.access!r}; {_RATE} (slot_s >= {1 / MAX_EVENTS_PER_SECOND:g})")


def coherence_of(s) -> tuple[float | None, str]:
    """The coherence time an upload fades in (None: one gain per upload) and the fields it comes from."""
    coherence, speed = s.channel.coherence_s, s.devices.speed_mps
    if coherence is not None:
        return coherence, f"channel.coherence_s = {_g(coherence)}"
    if not speed:
        return None, ""
    where, carrier = (("link", s.link.carrier_hz) if s.channel.carrier_hz is None
                      else ("channel", s.channel.carrier_hz))
    with_speed = f"devices.speed_mps = {_g(speed)} and {where}.carrier_hz = {_g(carrier)}"
    f_d = speed * carrier / SPEED_OF_LIGHT  # the maximum Doppler shift (wirelessfl.fading)
    return (0.423 / f_d if f_d > 0 else math.inf), with_speed


def _check_coherence(s) -> None:
    coherence, fields = coherence_of(s)
    if coherence is None:
        return
    if not coherence > 0 or not 1.0 / coherence <= MAX_EVENTS_PER_SECOND:
        raise ConfigError(f"{fields}: an upload's channel would change every {coherence:.3g} s (its coherence time), "
                          f"{1 / coherence if coherence > 0 else math.inf:.3g} fading blocks a simulated second of "
                          f"upload; {_RATE} (coherence time >= {1 / MAX_EVENTS_PER_SECOND:g} s)")


def _check_mobility(s) -> None:
    dc = s.devices
    if dc.mobility == "static" or not dc.speed_mps > 0:
        return
    radius = s.channel.cell_radius_m
    segments = dc.count * dc.speed_mps / radius  # a segment is about a cell radius long
    if not segments <= MAX_EVENTS_PER_SECOND:
        raise ConfigError(f"devices.speed_mps = {_g(dc.speed_mps)}: {dc.count} devices at that speed in a cell of "
                          f"channel.cell_radius_m = {_g(radius)} would begin about {segments:.3g} straight segments "
                          f"a simulated second ({dc.mobility}); {_RATE} (devices.count x speed_mps / cell_radius_m)")


def _check_downlink(s) -> None:
    """The model's transmissions to a device that misses it, bounded as an upload's are: a certain
    miss would otherwise retry every one of them (wirelessfl.access.downlink)."""
    attempts = s.link.downlink_max_attempts
    if attempts > MAX_TRANSMISSIONS_PER_UPLOAD:
        raise ConfigError(f"link.downlink_max_attempts = {attempts:,}: at most {MAX_TRANSMISSIONS_PER_UPLOAD:,} "
                          "transmissions of the model to a device, as for an upload (link.max_attempts)")


def check_upload(s, bits: float, what: str) -> None:
    """Packets of an upload of ``bits`` times link.max_attempts, and, where a packet may be sent more
    than once, how many transmissions at link.rate_bps fit in a simulated second. ``what`` names
    where ``bits`` comes from (link.model_bits, or the model's measured size)."""
    link = s.link
    if link.rate_bps is None and not float(bits) / link.bandwidth_hz <= MAX_BITS_PER_HZ:
        least = float(bits) / MAX_BITS_PER_HZ
        raise ConfigError(f"link.bandwidth_hz = {_g(link.bandwidth_hz)}: an upload of {float(bits):g} bits ({what}) "
                          f"is more than {MAX_BITS_PER_HZ:g} bits per hertz of the band, whose airtime overflows "
                          f"floating point at any SNR; bandwidth_hz must be at least {least:.3g}")
    if link.packet_bits is None and link.rate_bps is None and link.errors == "none":
        return  # one transmission an upload
    bits = float(bits)
    packet = float(link.packet_bits) if link.packet_bits is not None and link.packet_bits < bits else bits
    packets = math.ceil(bits / packet) if packet > 0 else 1
    tries = packets * link.max_attempts
    if tries > MAX_TRANSMISSIONS_PER_UPLOAD:
        raise ConfigError(f"link.packet_bits = {link.packet_bits}, link.max_attempts = {link.max_attempts}: an upload "
                          f"of {bits:g} bits ({what}) would be {packets:,} packet(s) x {link.max_attempts:,} "
                          f"transmission(s) each = {tries:.3g}; at most {MAX_TRANSMISSIONS_PER_UPLOAD:,} "
                          "transmissions an upload (ceil(bits / packet_bits) x max_attempts)")
    if link.rate_bps is not None and tries > 1:
        per_second = link.rate_bps / packet
        if not per_second <= MAX_EVENTS_PER_SECOND:
            raise ConfigError(f"link.rate_bps = {_g(link.rate_bps)}: a packet of {packet:g} bits would be on the air "
                              f"for {packet / link.rate_bps:.3g} s, {per_second:.3g} transmissions a simulated second "
                              f"with up to {tries:,} an upload; {_RATE} (packet bits / rate_bps >= "
                              f"{1 / MAX_EVENTS_PER_SECOND:g} s)")


def edge_count(s) -> int:
    """The edge servers of a scenario with hierarchy.tiers = "edge": one per cell, or, over satellites
    ([orbits]), one per ground station."""
    return len(s.orbits.ground_stations) if s.orbits is not None else s.network.cells


def tier_rows(s) -> int | None:
    """The aggregations (rows of rounds.csv) that run.rounds cloud aggregations imply at least, with
    an edge server per cell (None: one server, or no round count): each cloud aggregation waits for
    hierarchy.cloud_every aggregations of every edge (a sync cloud), or of one (async)."""
    h, rounds = s.hierarchy, s.run.rounds
    if h.tiers != "edge" or rounds is None:
        return None
    edges = edge_count(s) if h.cloud == "sync" else 1
    return rounds * (1 + h.cloud_every * edges)


def check_tier_rows(s) -> None:
    """run.rounds cloud aggregations that imply more than MAX_ROWS edge aggregations, refused before
    the run (a time budget may end it sooner: then it is the user's bound)."""
    rows = tier_rows(s)
    if rows is None or rows <= MAX_ROWS or s.run.time_budget_s is not None:
        return
    h = s.hierarchy
    each = f"every one of the {edge_count(s)} edges" if h.cloud == "sync" else "an edge"
    raise ConfigError(f"hierarchy.cloud_every = {h.cloud_every:,}: run.rounds = {s.run.rounds:,} cloud aggregations "
                      f"(a {h.cloud} cloud, each after {h.cloud_every:,} aggregations of {each}) are at least "
                      f"{rows:,} aggregations, rows of rounds.csv; at most {MAX_ROWS:,} estimated up front; lower "
                      "hierarchy.cloud_every or run.rounds, or set run.time_budget_s")


def check_edge_slots(s) -> None:
    """Edges x devices past MAX_EDGE_SLOTS, refused before anything is built (see there)."""
    if s.hierarchy.tiers != "edge":
        return
    cells, n = edge_count(s), s.devices.count
    if cells * n > MAX_EDGE_SLOTS:
        where = f"network.cells = {cells:,}" if s.orbits is None else f"orbits.ground_stations ({cells:,})"
        raise ConfigError(f"{where} with hierarchy.tiers = 'edge': each of the {cells:,} edge "
                          f"servers schedules over all {n:,} devices, {cells * n:.3g} device slots a round (about "
                          f"{cells * n * 0.7e-6:.3g} s a round); at most {MAX_EDGE_SLOTS:,}; use fewer cells or "
                          "devices, or hierarchy.tiers = 'cloud'")


def check_pace(field: str, value: float, rows: int, now_s: float, horizon_s: float, what: str) -> None:
    """At the pace of a run's first ``rows`` rows (``now_s`` simulated seconds), the rows it would
    make before ``horizon_s`` (a time it cannot end before: ``what`` says why); more than MAX_ROWS is
    a one-line error naming ``field`` = ``value``."""
    if now_s <= 0 or not rows:
        return
    pace_s = now_s / rows
    projected = horizon_s / pace_s
    if projected > MAX_ROWS:
        raise ConfigError(f"{field} = {_g(value)}: {what}, and at the pace of the first {rows:,} rows "
                          f"({pace_s:.3g} simulated s each) that is about {projected:.3g} rows of rounds.csv; at "
                          f"most {MAX_ROWS:,}; lower {field}, or set run.time_budget_s")


def check_local_steps(steps, what: str) -> None:
    """Local steps of a device in a round, from ``what`` (a Flower strategy's fit config, say)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or not 0 <= steps <= MAX_LOCAL_STEPS:
        raise ConfigError(f"{what} = {steps!r}: at most {MAX_LOCAL_STEPS:,} local steps of a device in a round")
