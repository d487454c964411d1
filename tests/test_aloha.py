"""Slotted ALOHA (link.access = "aloha"): the slot rule against its analytic success rate
k p (1 - p)^(k - 1), a hand-worked round of the closed form with scripted draws, the same rate
end to end under fedbuff, and kill and resume giving the uninterrupted records."""
import math

import numpy as np
import pytest

from wirelessfl.access import Aloha, Link
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.config.tables import LinkConfig
from wirelessfl.experiments.run import simulate


def success_rate(k: int, p: float) -> float:
    return k * p * (1 - p) ** (k - 1)


def within_sampling_error(successes: int, slots: int, rate: float) -> bool:
    sigma = math.sqrt(rate * (1 - rate) / slots)  # a binomial count of independent slots
    return abs(successes / slots - rate) <= 4 * sigma


@pytest.mark.parametrize("k, p", [(1, 0.3), (4, 0.25), (10, 0.1), (10, 0.3)])
def test_a_slot_carries_a_packet_with_probability_k_p_one_minus_p_to_the_k_minus_one(k, p):
    scheme = Aloha(Link(LinkConfig()), slot_s=1e-3, transmit_probability=p, rng=np.random.default_rng(k))
    slots = 20000
    successes = sum(len(scheme.contend(k)) == 1 for _ in range(slots))
    assert within_sampling_error(successes, slots, success_rate(k, p))


class Scripted:
    """Draws handed out in order (a stand-in for the scheme's random stream)."""

    def __init__(self, draws):
        self.draws = list(draws)

    def random(self, n):
        out, self.draws = self.draws[:n], self.draws[n:]
        return np.array(out)


def test_the_closed_form_by_hand_collisions_and_backoff_with_scripted_draws():
    # p = 0.5; device 0 ready at 0 needs 2 slots, device 1 ready at 0.0015 needs 1 slot (slot 1 ms)
    # slot 0: only device 0 contends, draws 0.1 -> sends alone: 1 of its 2 packets through
    # slot 1: device 1 joins at slot 2 (first boundary after 1.5 ms); device 0 draws 0.9 -> silent
    # slot 2: both contend, draws (0.2, 0.3) -> both send: collision
    # slot 3: draws (0.7, 0.4) -> device 1 alone: done at 4 ms
    # slot 4: device 0 draws 0.2 -> done at 5 ms
    scheme = Aloha(Link(LinkConfig()), slot_s=1e-3, transmit_probability=0.5,
                   rng=Scripted([0.1, 0.9, 0.2, 0.3, 0.7, 0.4, 0.2]))
    out = scheme.schedule(np.array([0.0, 0.0015]), np.array([2e-3, 1e-3]))
    assert out.arrived.tolist() == [True, True]
    assert out.tx_start.tolist() == [0.0, 0.002]
    assert out.tx_end.tolist() == [0.005, 0.004]
    assert out.attempts.tolist() == [3, 2]  # device 0: slots 0, 2, 4; device 1: slots 2, 3
    assert out.on_air_s.tolist() == [0.003, 0.002]
    assert out.end_s == 0.005 and out.order.tolist() == [0, 1]


def test_a_round_deadline_cuts_the_slots_after_it():
    scheme = Aloha(Link(LinkConfig()), slot_s=1e-3, transmit_probability=0.5, rng=Scripted([0.9] * 10 + [0.1]))
    out = scheme.schedule(np.array([0.0]), np.array([1e-3]), deadline_s=0.0045)
    assert out.arrived.tolist() == [False] and out.end_s == 0.0045
    assert out.attempts.tolist() == [0]  # four slots end by the deadline, the device stayed silent in all


def scenario(protocol: dict, **run):
    # one slot per upload (400 bits at 485 kbit/s: SNR 0.01 x 40 / 1 on 1 MHz), every device always ready again at once
    return from_dict({"seed": 3, "run": {"timing_only": True, **run},
                      "devices": {"count": 40, "compute": "constant", "compute_s": 0.0},
                      "channel": {"sigma": 1e-6, "gain_floor": 1e-2},
                      "link": {"access": "aloha", "slot_s": 1e-3, "transmit_probability": 0.2, "model_bits": 400,
                               "bandwidth_hz": 1e6},
                      "protocol": protocol, "scheduler": {"name": "uniform", "m": 4}})


def test_fedbuff_over_aloha_delivers_k_p_one_minus_p_to_the_k_minus_one_uploads_a_slot():
    k, p, budget = 5, 0.2, 20.0
    res = simulate(scenario({"name": "fedbuff", "concurrency": k, "buffer": 1}, time_budget_s=budget), progress=False)
    updates = res.updates
    arrived = updates[updates["outcome"] == "applied"]
    assert (arrived["airtime_s"] == arrived["attempts"] * 1e-3).all()  # time on the air: the slots sent in
    assert np.allclose(arrived["tx_end_s"] / 1e-3, np.round(arrived["tx_end_s"] / 1e-3))  # on slot ends
    assert within_sampling_error(len(arrived), int(budget / 1e-3), success_rate(k, p))


def test_sync_over_aloha_every_upload_arrives_and_pays_for_its_collisions():
    res = simulate(scenario({"name": "sync"}, rounds=30), progress=False)
    updates = res.updates
    assert (updates["outcome"] == "applied").all()
    assert (updates["attempts"] >= 1).all() and (updates["attempts"] > 1).any()  # some collided
    np.testing.assert_allclose(updates["energy_j"], updates["power"] * updates["attempts"] * 1e-3)
    per_round = res.rounds
    assert (per_round["t_end"] > per_round["t_start"]).all()


def test_fedbuff_over_aloha_resumes_after_an_interruption_with_the_same_records(interrupted_and_resumed):
    import pandas as pd

    full, resumed = interrupted_and_resumed(
        scenario({"name": "fedbuff", "concurrency": 6, "buffer": 2}, time_budget_s=2.0, checkpoint_every=5), after=40)
    pd.testing.assert_frame_equal(full.rounds, resumed.rounds)
    pd.testing.assert_frame_equal(full.updates, resumed.updates)


@pytest.mark.parametrize("field, value", [("packet_bits", 500), ("errors", "waterfall")])
def test_the_link_s_own_packets_are_refused_in_one_line(field, value):
    with pytest.raises(ConfigError, match=f"link.{field}") as err:
        from_dict({"run": {"rounds": 1}, "link": {"access": "aloha", field: value}})
    assert "\n" not in str(err.value)


def test_a_transmit_probability_of_one_is_refused():
    with pytest.raises(ConfigError, match="link.transmit_probability"):
        from_dict({"run": {"rounds": 1}, "link": {"access": "aloha", "transmit_probability": 1.0}})


def test_an_upload_dropped_while_contending_pays_only_for_the_slots_it_sent_in():
    # semi_sync dropping late uploads at the first 2 of 6: the others are stopped while contending
    res = simulate(scenario({"name": "semi_sync", "first_k": 2, "late": "drop"}, rounds=20), progress=False)
    up = res.updates
    dropped = up[up["outcome"] == "late_dropped"]
    contending = dropped[dropped["tx_start_s"].notna()]
    assert len(contending) > 5
    np.testing.assert_allclose(contending["energy_j"], contending["power"] * contending["attempts"] * 1e-3)
    assert (contending["energy_j"] < contending["power"] * (contending["lost_s"] - contending["tx_start_s"])).any()
