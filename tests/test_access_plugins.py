"""Access schemes of one's own, written from docs/extending.md alone: the same airtimes under sync
and fedbuff (an override of airtime_s reaches both engines), a scheme with its own event uplink
whose event queue is its closed form's, and one-line errors for a scheme that skipped a constructor
step or overrides what the event engine would not see."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.run import simulate

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def guide_file(folder: Path, name: str, marker: str) -> Path:
    blocks = re.findall(r"```(\w+)\n(.*?)```", GUIDE.read_text(), re.S)
    code = next(code for lang, code in blocks if lang == "python" and marker in code)
    (folder / f"{name}.py").write_text(code)
    return folder


def scenario(folder: Path, access: str, protocol: dict, model_bits: int = 200000, **link):
    text = (f'seed = 2\n[run]\nrounds = 12\ntiming_only = true\n[devices]\ncount = 10\ncompute = "shifted_exponential"\n'
            f'[channel]\nprofile = "linear"\n[link]\naccess = "{access}"\nmodel_bits = {model_bits}\nbandwidth_hz = 1e6\n'
            + "".join(f"{k} = {v}\n" for k, v in link.items())
            + "[protocol]\n" + "".join(f'{k} = {v!r}\n'.replace("'", '"') for k, v in protocol.items())
            + '[scheduler]\nname = "uniform"\nm = 3\n')
    path = folder / f"{access.replace(':', '_')}_{protocol['name']}.toml"
    path.write_text(text)
    from wirelessfl.config import load_scenario

    return load_scenario(path)


def shannon_s(bits, gain, power, bandwidth_hz=1e6, noise=1.0):
    return bits / (bandwidth_hz * np.log2(1 + gain * power / noise))


PROTOCOLS = [{"name": "sync"}, {"name": "fedbuff", "concurrency": 4, "buffer": 2}]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_the_guide_s_preamble_scheme_adds_its_preamble_to_every_upload_under_every_engine(tmp_path, protocol):
    guide_file(tmp_path, "preamble", "class Preamble(TDMA)")
    res = simulate(scenario(tmp_path, "preamble:Preamble", protocol, preamble_s=0.005), progress=False)
    up = res.updates.dropna(subset=["tx_end_s"])
    assert len(up) >= 10
    np.testing.assert_allclose(up.airtime_s, shannon_s(200000, up.gain, up.power) + 0.005, rtol=1e-12)
    np.testing.assert_allclose(up.tx_end_s - up.tx_start_s, up.airtime_s, rtol=1e-9)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_the_guide_s_two_halves_hold_at_most_two_uploads_each_at_half_the_band(tmp_path, protocol):
    guide_file(tmp_path, "twohalves", "class TwoHalves(AccessScheme)")
    res = simulate(scenario(tmp_path, "twohalves:TwoHalves", protocol, model_bits=5_000_000), progress=False)
    up = res.updates.dropna(subset=["tx_end_s"])
    np.testing.assert_allclose(up.airtime_s, shannon_s(5_000_000, up.gain, up.power, 0.5e6, 0.5), rtol=1e-12)
    events = sorted([(t, 1) for t in up.tx_start_s] + [(t, -1) for t in up.tx_end_s], key=lambda e: (e[0], e[1]))
    on_air = np.cumsum([d for _, d in events])
    assert on_air.max() == 2  # two halves, both used, never three
    waited = up.tx_start_s - up.compute_end_s
    assert (waited >= -1e-12).all() and (waited > 0).any()  # a device waits only while both halves are taken


def test_the_guide_s_two_halves_event_uplink_forms_the_closed_form_s_queue(tmp_path):
    """semi_sync without a deadline aggregates when every upload of the round is in: the same round
    as sync, timed by the event uplink instead of the closed form."""
    guide_file(tmp_path, "twohalves", "class TwoHalves(AccessScheme)")
    sync = simulate(scenario(tmp_path, "twohalves:TwoHalves", {"name": "sync"}), progress=False)
    events = simulate(scenario(tmp_path, "twohalves:TwoHalves", {"name": "semi_sync"}), progress=False)
    a, b = sync.updates, events.updates
    for column in ("device", "tx_start_s", "tx_end_s", "airtime_s"):
        np.testing.assert_allclose(a[column], b[column], rtol=1e-12, err_msg=column)


def write(folder: Path, name: str, code: str) -> None:
    (folder / f"{name}.py").write_text(code)


def test_a_scheme_whose_init_skipped_setting_the_link_is_one_line_naming_it(tmp_path):
    write(tmp_path, "forgot", "from wirelessfl.access import TDMA, Link\n\n"
          "class Forgot(TDMA):\n    def __init__(self, link):\n        self.my_link = link\n\n"
          "    @classmethod\n    def from_scenario(cls, scenario, options):\n        return cls(Link(scenario.link))\n")
    for protocol in PROTOCOLS:
        with pytest.raises(ConfigError, match=r"link.access = 'forgot:Forgot': Forgot has no link: its __init__ "
                                              r"must call super\(\).__init__\(link\)") as err:
            simulate(scenario(tmp_path, "forgot:Forgot", protocol), progress=False)
        assert "\n" not in str(err.value)


def test_a_shared_band_override_of_airtime_s_is_refused_under_the_event_protocols_naming_rates_bps(tmp_path):
    write(tmp_path, "slowfdma", "from wirelessfl.access import FDMA\n\n"
          "class SlowFDMA(FDMA):\n    def airtime_s(self, bits, gain, power):\n"
          "        return 2 * super().airtime_s(bits, gain, power)\n")
    sync = simulate(scenario(tmp_path, "slowfdma:SlowFDMA", {"name": "sync"}), progress=False)
    up = sync.updates
    assert len(up) > 0  # sync honours it
    with pytest.raises(ConfigError, match="SlowFDMA overrides airtime_s.*override rates_bps instead") as err:
        simulate(scenario(tmp_path, "slowfdma:SlowFDMA", PROTOCOLS[1]), progress=False)
    assert "\n" not in str(err.value)


COUNTING = '''
import numpy as np

from wirelessfl.access import TDMA
from wirelessfl.wireless import RayleighFading


class Counting(TDMA):
    """TDMA that counts the uploads it priced and reports the count in every row of rounds.csv."""

    priced = 0

    def upload_s(self, bits, gain, power):
        self.priced += 1
        return super().upload_s(bits, gain, power)

    def airtime_s(self, bits, gain, power):
        self.priced += np.size(gain)
        return super().airtime_s(bits, gain, power)

    def round_info(self):
        return {"priced": self.priced}


class Clocked(RayleighFading):
    """Rayleigh fading that reports the time it was last moved to."""

    moved_to = 0.0

    def set_time(self, time_s):
        self.moved_to = time_s

    def round_info(self):
        return {"moved_to": self.moved_to, "label": "not a number: left out"}
'''


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p["name"])
def test_an_access_scheme_and_a_channel_add_columns_of_their_own_to_rounds_csv(tmp_path, protocol):
    (tmp_path / "counting.py").write_text(COUNTING)
    sc = scenario(tmp_path, "counting:Counting", protocol).replace('channel.model="counting:Clocked"')
    res = simulate(sc, tmp_path / "run", progress=False)
    rounds = res.rounds
    assert "label" not in rounds
    priced = rounds["priced"].to_numpy()
    assert (np.diff(priced) >= 0).all() and priced[-1] > 0  # read as each row is written: a running count
    up = res.updates.dropna(subset=["tx_start_s"])
    if protocol["name"] == "sync":  # a round's uploads priced together, the count read at its end
        np.testing.assert_array_equal(priced, np.cumsum(rounds["num_selected"]))
    else:  # every upload priced as it starts: those started by the aggregation's time
        started = [int((up.tx_start_s <= t).sum()) for t in rounds.t_end]
        np.testing.assert_array_equal(priced, started)
    assert (rounds["moved_to"] <= rounds["t_end"] + 1e-12).all() and rounds["moved_to"].iloc[-1] > 0
