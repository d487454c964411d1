"""The uplink and how uploads share it: the link's rates, and the access schemes, a part named by
``link.access``. Each scheme is one module holding both of its timing models side by side: the
closed form of a sync round and the event uplink the event protocols' devices contend for (the
contract, and which engine needs which member: :mod:`wirelessfl.access.base`). The link (packets,
errors, retransmissions) is shared by all (:mod:`wirelessfl.access.link`).

``ACCESS`` names the built-ins besides installed plugins (entry-point group ``wirelessfl.access``)
and import paths:

- ``tdma``: one device at a time on the whole band, first come first served.
- ``tdma_slotted``: the same in slots: frames of ``slots_per_frame`` slots of ``slot_s`` seconds,
  each frame opened by ``guard_s`` seconds in which nobody sends. An upload holds whole slots,
  consecutive ones (across frames if need be), starting at a slot boundary.
- ``fdma``: the band split evenly among the devices sending.
- ``dedicated``: every device its own fixed sub-band, whatever the others do (no queue, no
  sharing): the assumption of simulators that end an upload at dispatch, with each device's channel.
- ``ofdma``: the band in ``resource_blocks`` blocks with a gain each, shared by an allocation rule
  (``equal`` or ``greedy``; see :class:`OFDMA`).
- ``aircomp``: every device of a round at once, truncated channel inversion, the server receiving
  the sum of the updates plus noise (see :class:`AirComp`).
- ``orbit``: uploads inside satellite passes at the link budget's rate (a scenario's [orbits];
  :mod:`wirelessfl.access.orbit`, docs/satellites.md).
- ``aloha``: slotted ALOHA, random access: in every slot each device with bits to send transmits
  with probability ``transmit_probability``; a slot carries a packet when exactly one device sends
  in it, and is lost to a collision when several do (see :class:`Aloha`).

Schedulers that price airtime (the Lyapunov rules) ask the scheme how: ``pricing(bits, k)`` gives
the band and noise one of k devices sending together sees (fdma, ofdma: B / k and N0 / k), or a
fixed airtime (aircomp), and :func:`transmit_power` the power a device will really send at (the
scheduler's, but where the scheme SetsTransmitPower: aircomp's channel inversion).

Knows nothing of learning.
"""
from __future__ import annotations

from ..plugins import Registry
from .aircomp import AirComp, AirCompOptions, JointUplink
from .aloha import Aloha, AlohaOptions, AlohaUplink
from .base import (AccessScheme, AddsUploadColumns, AddsUplinkNoise, AirtimePrice, DrawsBlockFading, EventUplink,
                   ResolvesSlots, SetsTransmitPower, UploadsOnASubBand, UplinkFacts, UplinkHost, UplinkSchedule,
                   block_fading, transmit_power, upload_link, uplink_facts)
from .checks import check_scheme
from .dedicated import Dedicated, DedicatedOptions, IndependentUplink
from .downlink import Delivery, Downlink
from .fdma import FDMA, SharedBand
from .link import Link, queue, send_packets, share_snr
from .ofdma import OFDMA, OfdmaOptions
from .slotted import SlottedOptions, SlottedTDMA, SlottedUplink
from .tdma import TDMA, OneTransmitter

__all__ = ["ACCESS", "AccessScheme", "AddsUploadColumns", "AddsUplinkNoise", "AirComp", "AirCompOptions",
           "AirtimePrice", "Aloha", "AlohaOptions", "AlohaUplink", "Dedicated", "DedicatedOptions", "Delivery",
           "Downlink", "DrawsBlockFading", "EventUplink", "FDMA", "IndependentUplink", "JointUplink", "Link",
           "OFDMA", "OfdmaOptions", "OneTransmitter", "ResolvesSlots", "SetsTransmitPower", "SharedBand",
           "SlottedOptions", "SlottedTDMA", "SlottedUplink", "TDMA", "UploadsOnASubBand", "UplinkFacts",
           "UplinkHost", "UplinkSchedule", "block_fading", "check_scheme", "queue", "send_packets", "share_snr",
           "transmit_power", "upload_link", "uplink_facts"]

ACCESS = Registry("access", "wirelessfl.access:AccessScheme", {
    "tdma": "wirelessfl.access.tdma:TDMA",
    "tdma_slotted": "wirelessfl.access.slotted:SlottedTDMA",
    "fdma": "wirelessfl.access.fdma:FDMA",
    "dedicated": "wirelessfl.access.dedicated:Dedicated",
    "ofdma": "wirelessfl.access.ofdma:OFDMA",
    "aircomp": "wirelessfl.access.aircomp:AirComp",
    "aloha": "wirelessfl.access.aloha:Aloha",
    "wifi": "wirelessfl.access.wifi:WiFi",
    "ns3_wifi": "wirelessfl.access.ns3_wifi:Ns3WiFi",
    "orbit": "wirelessfl.access.orbit:OrbitAccess",
})
"""Built-in access schemes by the name ``link.access`` gives them."""
