"""Scenario loading: types, ranges, unknown keys, overrides, dB powers, variants, round trip."""
import math
import subprocess
import sys

import pytest

from wirelessfl.config import ConfigError, dumps, from_dict, load_scenario

BASE = {"run": {"rounds": 5}}


def load(extra=None, overrides=()):
    data = {**BASE, **(extra or {})}
    return from_dict(data, overrides)


@pytest.mark.parametrize("data, path, words", [
    ({"scheduler": {"m": 0}}, "scheduler.m", ">= 1"),
    ({"scheduler": {"m": 2.5}}, "scheduler.m", "integer"),
    ({"scheduler": {"m": True}}, "scheduler.m", "integer"),
    ({"scheduler": {"name": "lyapnov"}}, "scheduler.name", "'lyapunov', 'uniform'"),
    ({"schedulr": {}}, "schedulr", "unknown key"),
    ({"scheduler": {"Vv": 1}}, "scheduler.Vv", "unknown key"),
    ({"learning": {"lr": "fast"}}, "learning.lr", "number"),
    ({"learning": {"lr": -1}}, "learning.lr", "> 0"),
    ({"link": {"p_max": "35 dBm"}}, "link.p_max", "dB"),
    ({"link": {"bandwidth_hz": math.inf}}, "link.bandwidth_hz", "finite"),
    ({"channel": {"profile": "list", "sigmas": [1.0, 2.0]}}, "channel.sigmas", "one per device"),
    ({"devices": {"compute_s_per_device": [1.0]}}, "devices.compute_s_per_device", "one per device"),
    ({"variants": {"u": {"scheduler": {"nme": "uniform"}}}}, "variants.u: scheduler.nme", "unknown key"),
    ({"sweep": {"scheduler.V": [1, -5]}}, "sweep.scheduler.V", "> 0"),
    ({"run": {"rounds": 5, "stop_at_target": True}}, "run.stop_at_target", "target_accuracy"),
])
def test_bad_values_name_the_field(data, path, words):
    with pytest.raises(ConfigError) as err:
        load(data)
    msg = str(err.value)
    assert msg.startswith(path), msg
    assert words in msg
    assert "\n" not in msg


def test_a_run_must_be_able_to_stop():
    with pytest.raises(ConfigError, match="run.rounds"):
        from_dict({})


def test_powers_in_decibels_convert_to_linear():
    s = load({"link": {"p_max": "35 dB", "p_bar": "0 dB", "noise_power": "-10dB"}})
    assert s.link.p_max == pytest.approx(10 ** 3.5)
    assert s.link.p_bar == pytest.approx(1.0)
    assert s.link.noise_power == pytest.approx(0.1)


def test_overrides_are_typed_and_validated():
    s = load(overrides=["scheduler.V=1e3", "learning.alpha=inf", "seed=7"])
    assert s.scheduler.options.V == 1000.0 and math.isinf(s.learning.alpha) and s.seed == 7
    # naming another scheduler keeps the options it shares (m) and drops the others (V)
    u = load({"scheduler": {"m": 3}}, overrides=["scheduler.V=1e3", "scheduler.name=uniform"])
    assert u.scheduler.name == "uniform" and u.scheduler.options.m == 3 and not u.accepts("scheduler.V")
    with pytest.raises(ConfigError, match="^scheduler.V: not an option of scheduler 'uniform'"):
        load(overrides=["scheduler.name=uniform", "scheduler.V=1e3"])
    with pytest.raises(ConfigError, match="^scheduler.V"):
        load(overrides=["scheduler.V=-1"])
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load(overrides=["scheduler.V"])


def test_variants_expand_to_validated_members():
    s = load({"variants": {"ours": {"scheduler": {"name": "lyapunov", "lam": 10}},
                           "uniform": {"scheduler.name": "uniform"}}})
    members = dict(s.variant_scenarios())
    assert members["ours"].scheduler.options.lam == 10 and members["ours"].name == "ours"
    assert members["uniform"].scheduler.name == "uniform"
    assert not members["uniform"].variants


def test_dumps_round_trips(tmp_path):
    s = load({"link": {"p_max": "35 dB"}, "learning": {"alpha": math.inf},
              "channel": {"profile": "linear"}, "variants": {"u": {"scheduler.name": "uniform"}},
              "sweep": {"scheduler": {"V": [1, 10]}}})
    path = tmp_path / "s.toml"
    path.write_text(dumps(s))
    assert load_scenario(path) == s


def test_load_errors_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_scenario(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nrounds = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_scenario(bad)


def test_cli_prints_one_line_and_exits_2(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[run]\nrounds = 3\n[scheduler]\nm = -1\n")
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(path), "--timing-only"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "scheduler.m = -1" in lines[0], proc.stderr
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(path), "--timing-only",
                           "--set", "scheduler.m=2", "--set", "link.bandwidth_hz=abc"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "link.bandwidth_hz = 'abc'" in proc.stderr
