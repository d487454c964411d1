"""The phases of an update, from its dispatch to its fate (wirelessfl.sim.events.flight.Update.phase)."""

WAITING, DOWNLINK, COMPUTE, QUEUED, ON_AIR, FORWARDING, ARRIVED, FINISHED = range(8)
"""WAITING: its round's reports (uploads before the computation) are still under way; DOWNLINK: the
model is on its way; COMPUTE: training; QUEUED: waiting for the uplink; ON_AIR: uploading (or, on a
random-access channel, contending); FORWARDING: at its site, on the backhaul to a server in the
cloud (its device is free again); ARRIVED: with the server, not yet applied or dropped; FINISHED:
its fate is known."""

