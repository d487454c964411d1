"""The public contention contract of random access (``Aloha.resolve``): the guide's capture-ALOHA
rule (docs/extending.md), written against it alone, checked against a hand count of its captured
slots under the closed form, and end to end (sync and fedbuff) against a log of every slot it
settled; ALOHA's in_flight rows count the slots sent so far."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.access import Aloha, Link
from wirelessfl.config import from_dict
from wirelessfl.config.tables import LinkConfig
from wirelessfl.experiments.run import simulate
from wirelessfl.plugins import PartError, registry

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


class Scripted:
    """Draws handed out in order (a stand-in for the scheme's random stream)."""

    def __init__(self, draws):
        self.draws = list(draws)

    def random(self, n):
        out, self.draws = self.draws[:n], self.draws[n:]
        return np.array(out)


def guide_capture(folder: Path) -> type:
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    code = next(code for lang, code in blocks if lang == "python" and "class CaptureAloha(Aloha)" in code)
    (folder / "capture.py").write_text(code)
    return registry("access").load("capture:CaptureAloha", [str(folder)])


def test_the_guide_s_capture_rule_by_hand_with_scripted_draws(tmp_path):
    # p = 0.5, slots of 1 ms; three devices ready at 0, one packet each; received powers 4, 1, 1 W;
    # capture at 3 dB (ratio 1.995):
    # slot 0: draws (0.1, 0.1, 0.9) -> devices 0 and 1 send; 4 >= 1.995 x 1: device 0 captures, done at 1 ms
    # slot 1: draws (0.1, 0.1) -> devices 1 and 2 send; 1 < 1.995 x 1: collision
    # slot 2: draws (0.1, 0.9) -> device 1 alone: done at 3 ms
    # slot 3: draw 0.1 -> device 2 alone: done at 4 ms
    draws = [0.1, 0.1, 0.9, 0.1, 0.1, 0.1, 0.9, 0.1]
    capture = guide_capture(tmp_path)(Link(LinkConfig()), slot_s=1e-3, transmit_probability=0.5, rng=Scripted(draws))
    capture.capture_ratio = 10.0 ** 0.3
    out = capture.schedule(np.zeros(3), np.full(3, 1e-3), received_w=np.array([4.0, 1.0, 1.0]),
                           devices=np.array([7, 8, 9]))
    assert out.tx_end.tolist() == [0.001, 0.003, 0.004]
    assert out.attempts.tolist() == [1, 3, 2]  # device 1 sent in slots 0, 1, 2; device 2 in 1 and 3
    assert out.arrived.all()
    # plain ALOHA, the same first slot: a collision; slot 1, draws (0.1, 0.9, 0.9): device 0 alone
    plain = Aloha(Link(LinkConfig()), slot_s=1e-3, transmit_probability=0.5,
                  rng=Scripted([0.1, 0.1, 0.9, 0.1, 0.9, 0.9, 0.1, 0.9, 0.1]))
    out = plain.schedule(np.zeros(3), np.full(3, 1e-3))
    assert out.tx_end.tolist() == [0.002, 0.003, 0.004]
    assert out.attempts.tolist() == [2, 2, 1]


def test_a_resolve_answer_outside_the_contract_stops_in_one_line_naming_the_method():
    class Wrong(Aloha):
        def resolve(self, received_w, devices):
            return [0], 1  # a winner that did not transmit

    scheme = Wrong(Link(LinkConfig()), slot_s=1e-3, transmit_probability=0.5)
    with pytest.raises(PartError, match=r"Wrong\.resolve: the packet that gets through must be one sent") as err:
        scheme.schedule(np.zeros(2), np.full(2, 1e-3))
    assert "\n" not in str(err.value)


LOGGING = '''
import numpy as np
from capture import CaptureAloha

SLOTS = []


class LoggedCapture(CaptureAloha):
    """The guide's rule, every slot it settles written down."""

    def resolve(self, received_w, devices):
        sending, winner = super().resolve(received_w, devices)
        SLOTS.append((np.array(received_w, dtype=float), np.array(devices), list(sending), winner))
        return sending, winner
'''


def capture_scenario(folder: Path, protocol: dict, **run):
    # one slot per upload (400 bits, 1 MHz, SNR at least 0.1 x 5.4 / 1): received powers that differ, so some
    # collisions are captured at 3 dB and some are not
    return from_dict({"seed": 5, "plugin_path": [str(folder)], "run": {"timing_only": True, **run},
                      "devices": {"count": 30, "compute": "constant", "compute_s": 0.0},
                      "channel": {"profile": "linear", "sigma_min": 0.1, "sigma_max": 1.0, "gain_floor": 0.1},
                      "link": {"access": "logged_capture:LoggedCapture", "slot_s": 1e-3, "transmit_probability": 0.3,
                               "capture_db": 3.0, "model_bits": 400, "bandwidth_hz": 1e6},
                      "protocol": protocol, "scheduler": {"name": "uniform", "m": 6}})


@pytest.mark.parametrize("protocol, run", [({"name": "sync"}, {"rounds": 15}),
                                           ({"name": "fedbuff", "concurrency": 6, "buffer": 2}, {"time_budget_s": 0.4})],
                         ids=["sync", "fedbuff"])
def test_capture_end_to_end_every_slot_settled_by_the_rule_from_gain_times_power(tmp_path, protocol, run):
    guide_capture(tmp_path)
    (tmp_path / "logged_capture.py").write_text(LOGGING)
    sys.modules.pop("logged_capture", None)
    res = simulate(capture_scenario(tmp_path, protocol, **run), progress=False)
    slots = sys.modules["logged_capture"].SLOTS
    ratio = 10.0 ** 0.3
    captured = sent = 0
    got = {}
    for received, devices, sending, winner in slots:
        if len(sending) > 1:  # the hand count: the strongest beats the rest by 3 dB
            p = received[sending]
            strong = sending[int(np.argmax(p))]
            expected = strong if p.max() >= ratio * (p.sum() - p.max()) else None
            assert winner == expected
            captured += winner is not None
        else:
            assert winner == (sending[0] if sending else None)
        for s in sending:
            sent += 1
        if winner is not None:
            got[int(devices[winner])] = got.get(int(devices[winner]), 0) + 1
    assert captured >= 3 and captured < sum(len(s[2]) > 1 for s in slots)  # some collisions captured, not all
    up = res.updates
    done = up[up["tx_end_s"].notna()]
    # every upload is one packet: a device's deliveries are the slots it won
    assert done.groupby("device").size().to_dict() == got
    assert int(up["attempts"].sum()) == sent
    np.testing.assert_allclose(up["airtime_s"], up["attempts"] * 1e-3, rtol=1e-12)
    # what the rule was handed: each contender's gain x power, as updates.csv records them
    received = {(int(d), round(float(r), 9)) for rw, ds, _, _ in slots for r, d in zip(rw, ds)}
    recorded = {(int(d), round(float(g * p), 9)) for d, g, p in zip(up["device"], up["gain"], up["power"])}
    assert received <= recorded


def test_an_aloha_in_flight_row_counts_the_slots_sent_so_far():
    res = simulate(from_dict({"seed": 3, "run": {"timing_only": True, "time_budget_s": 0.3},
                              "devices": {"count": 40, "compute": "constant", "compute_s": 0.0},
                              "channel": {"sigma": 1e-6, "gain_floor": 1e-2},
                              "link": {"access": "aloha", "slot_s": 1e-3, "transmit_probability": 0.2,
                                       "model_bits": 400, "bandwidth_hz": 1e6},
                              "protocol": {"name": "fedbuff", "concurrency": 8, "buffer": 2},
                              "scheduler": {"name": "uniform", "m": 4}}), progress=False)
    flying = res.updates[res.updates["outcome"] == "in_flight"]
    on_air = flying[flying["attempts"] > 0]
    assert len(on_air) >= 1
    np.testing.assert_allclose(on_air["airtime_s"], on_air["attempts"] * 1e-3, rtol=1e-12)
    np.testing.assert_allclose(on_air["energy_j"], on_air["power"] * on_air["airtime_s"], rtol=1e-12)
    assert (flying["lost_s"] == 0.3).all()  # lost_s of an in_flight row: when the run ended
