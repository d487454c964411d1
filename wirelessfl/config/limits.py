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
"""Packets of one upload times the transmissions each may take (link.max_attempts)."""
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
which a run that only counts aggregations stops as stalled (wirelessfl.sim.stalls)."""

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
    if s.link.model_bits is not None:
        check_upload(s, s.link.model_bits, "link.model_bits")


def _check_availability(s) -> None:
    dc = s.devices
    battery = dc.availability == "battery"
    if dc.p_on_to_off == 0 and dc.availability_trace is None and not battery or not s.part("protocol").event_driven:
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


def check_local_steps(steps, what: str) -> None:
    """Local steps of a device in a round, from ``what`` (a Flower strategy's fit config, say)."""
    if isinstance(steps, bool) or not isinstance(steps, (int, float)) or not 0 <= steps <= MAX_LOCAL_STEPS:
        raise ConfigError(f"{what} = {steps!r}: at most {MAX_LOCAL_STEPS:,} local steps of a device in a round")
