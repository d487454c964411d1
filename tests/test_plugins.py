"""The extension seams: a user's scheduler, algorithm, channel and computation model from their own
files (import paths found beside the scenario), installed plugins (entry points), their options,
their state through checkpoints, their numbers in the records, and one-line errors for every way a
plugin can fail to load."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from wirelessfl import load_scenario, resume, simulate
from wirelessfl.config import ConfigError, from_dict
from wirelessfl.experiments.sweep import expand, sweep
from wirelessfl import load_decisions

ROOT = Path(__file__).resolve().parents[1]

TOPK = textwrap.dedent('''
    """The k devices with the largest gains, at full power; counts its rounds (state)."""
    from dataclasses import dataclass

    import numpy as np

    from wirelessfl.config import option
    from wirelessfl.scheduling import Decision, Scheduler


    @dataclass(frozen=True)
    class Options:
        k: int = option(3, ge=1, doc="devices per round")


    class TopK(Scheduler):
        Options = Options
        inclusion_probabilities = False

        def __init__(self, n, k, p_max):
            self.n, self.k, self.p_max, self.decided = n, k, p_max, 0

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls(scenario.devices.count, options.k, scenario.link.p_max)

        def decide(self, state):
            self.decided += 1
            chosen = np.sort(np.argsort(-state.gains, kind="stable")[: self.k])
            q = np.zeros(self.n)
            q[chosen] = 1.0
            return Decision(omega=q / q.sum(), q=q, power=np.full(self.n, self.p_max), m=self.k, selected=chosen, info={"decided": self.decided, "note": "not a number"})

        def state_dict(self):
            return {"decided": self.decided, "history": np.arange(self.decided)}

        def load_state(self, state):
            self.decided = state["decided"]
            assert isinstance(state["history"], np.ndarray) and state["history"].size == self.decided
''')

PROX = textwrap.dedent('''
    """FedAvg with a proximal term mu / 2 ||y - x_t||^2 in the local objective."""
    from dataclasses import dataclass

    from wirelessfl.config import option
    from wirelessfl.learning import FedAvg
    from wirelessfl.learning.algorithms import FedAvgOptions


    @dataclass(frozen=True)
    class ProxOptions(FedAvgOptions):
        mu: float = option(0.1, ge=0, doc="proximal weight")


    class Prox(FedAvg):
        Options = ProxOptions

        @classmethod
        def from_scenario(cls, scenario, options):
            alg = super().from_scenario(scenario, options)
            alg.mu = options.mu
            return alg

        def local_updates(self, trainer, devices, round_idx):
            return trainer.local_updates(devices, round_idx, direction=lambda g, y, x0, anchor: g + self.mu * (y - x0))

        def round(self, trainer, selected, q, num_devices, round_idx):
            out = super().round(trainer, selected, q, num_devices, round_idx)
            return {**out, "mu": self.mu, "label": "ignored"}
''')

PLAIN = textwrap.dedent('''
    """A scheduler without an Options class: its options arrive as a dict."""
    import numpy as np

    from wirelessfl.scheduling import Decision, Scheduler

    SEEN = []


    class EveryOther(Scheduler):
        def __init__(self, n, options):
            self.n, self.options = n, options

        @classmethod
        def from_scenario(cls, scenario, options):
            SEEN.append(options)
            return cls(scenario.devices.count, options)

        def decide(self, state):
            chosen = np.arange(state.round % 2, self.n, 2)
            q = np.zeros(self.n)
            q[chosen] = 1.0
            return Decision(omega=q / q.sum(), q=q, power=np.ones(self.n), m=1,
                            selected=chosen)
''')

MODELS = textwrap.dedent('''
    """A channel whose gains are the device ids + 1, and a computation model of 0.1 s per device id."""
    import numpy as np

    from wirelessfl.devices import ComputeModel
    from wirelessfl.wireless import Channel


    class Ladder(Channel):
        def __init__(self, n):
            self.n = n

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls(scenario.devices.count)

        def draw(self, rng):
            return np.arange(1.0, self.n + 1.0)


    class Slow(ComputeModel):
        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

        def compute_times(self, devices, rng, round_idx=0):
            return 0.1 * np.asarray(devices, dtype=float)
''')


def write_plugins(folder: Path, **modules: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def installed_package(site: Path, name: str, source: str, entry_points: str) -> Path:
    """``site`` holding module ``name`` and the dist-info of a package that registers ``entry_points``."""
    write_plugins(site, **{name: source})
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(entry_points)
    return site


def scenario_text(scheduler: str = 'name = "topk_mod:TopK"\nk = 4', learning: str = "", timing_only=True,
                  rounds=6, extra: str = "", checkpoint_every: int = 0) -> str:
    return textwrap.dedent(f'''
        seed = 1
        [run]
        rounds = {rounds}
        eval_every_rounds = 2
        timing_only = {str(timing_only).lower()}
        {f"checkpoint_every = {checkpoint_every}" if checkpoint_every else ""}
        [channel]
        profile = "linear"
        [devices]
        count = 12
        [link]
        model_bits = 100000
        [scheduler]
        {{scheduler}}
        [learning]
        dataset = "fashion_mnist"
        model = "logreg"
        samples_per_device = 40
        local_steps = 2
        eval_train_samples = 200
        {{learning}}
        {{extra}}
    ''').format(scheduler=scheduler, learning=learning, extra=extra)


def selected_rows(rounds: pd.DataFrame) -> list[list[int]]:
    return [[int(v) for v in str(s).split()] for s in rounds["selected"]]


# --- a scheduler and an algorithm from the user's folder ---------------------------------------


def test_topk_scheduler_from_the_scenarios_folder_through_the_cli(tmp_path, one_torch_thread):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    (folder / "s.toml").write_text(scenario_text())
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml"), "--out", str(out),
                           "--no-progress"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    run = out / "s"
    rounds = pd.read_csv(run / "rounds.csv")
    gains = load_decisions(run)["gains"]
    for r, chosen in enumerate(selected_rows(rounds)):  # the rule it implements: the 4 largest gains
        assert chosen == sorted(np.argsort(-gains[r], kind="stable")[:4].tolist())
    # its numbers are columns (strings are not); the folder is kept for a resume elsewhere
    assert rounds["decided"].tolist() == list(range(1, 7)) and "note" not in rounds
    assert f'plugin_path = ["{folder.resolve()}"]' in (run / "scenario.toml").read_text()


def test_topk_and_a_proximal_algorithm_through_the_api_with_training(tmp_path, one_torch_thread):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK, prox_mod=PROX)
    (folder / "s.toml").write_text(scenario_text(learning='algorithm = "prox_mod:Prox"\nmu = 0.5',
                                                 timing_only=False, rounds=4))
    sc = load_scenario(folder / "s.toml")
    assert sc.learning.options.mu == 0.5 and sc.scheduler.options.k == 4
    res = simulate(sc, tmp_path / "run", progress=False)
    assert (res.rounds["num_selected"] == 4).all()
    assert res.rounds["mu"].tolist() == [0.5] * 4 and "label" not in res.rounds  # the round's numbers
    assert res.rounds["weight_sum"].tolist() == pytest.approx([1.0] * 4)  # not inclusion probabilities: the mean
    assert res.evals["accuracy"].iloc[-1] > res.evals["accuracy"].iloc[0]
    # mu = 0 is FedAvg exactly
    prox0 = simulate(sc.replace("learning.mu=0.0"), progress=False)
    fedavg = simulate(sc.replace('learning.algorithm="fedavg"'), progress=False)
    pd.testing.assert_frame_equal(prox0.evals, fedavg.evals)


def test_a_stateful_plugin_resumes_to_the_uninterrupted_records(tmp_path, interrupted_and_resumed):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    (folder / "s.toml").write_text(scenario_text(rounds=12, checkpoint_every=3))
    full, resumed = interrupted_and_resumed(load_scenario(folder / "s.toml"), after=7)
    pd.testing.assert_frame_equal(resumed.rounds, full.rounds)
    assert resumed.rounds["decided"].tolist() == list(range(1, 13))  # the counter came back from the checkpoint


def test_options_without_a_dataclass_arrive_as_a_dict(tmp_path):
    folder = write_plugins(tmp_path / "p", plain_mod=PLAIN)
    text = scenario_text('name = "plain_mod:EveryOther"\n[scheduler.options]\nstride = 2\nlabel = "x"')
    (folder / "s.toml").write_text(text)
    res = simulate(load_scenario(folder / "s.toml"), progress=False)
    import plain_mod  # imported from the scenario's folder by the registry

    assert plain_mod.SEEN[-1] == {"stride": 2, "label": "x"} and isinstance(plain_mod.SEEN[-1], dict)
    assert selected_rows(res.rounds)[:2] == [list(range(0, 12, 2)), list(range(1, 12, 2))]
    (folder / "flat.toml").write_text(scenario_text('name = "plain_mod:EveryOther"\nstride = 2'))
    with pytest.raises(ConfigError, match=r"^scheduler.stride: unknown key; .* go in the table \[scheduler.options\]"):
        load_scenario(folder / "flat.toml")


def test_a_channel_and_a_computation_model_from_the_users_folder(tmp_path):
    folder = write_plugins(tmp_path / "m", models_mod=MODELS)
    text = scenario_text('name = "uniform"\nm = 3', extra="").replace(
        '[channel]\nprofile = "linear"', '[channel]\nmodel = "models_mod:Ladder"').replace(
        "[devices]\ncount = 12", '[devices]\ncount = 12\ncompute = "models_mod:Slow"')
    (folder / "s.toml").write_text(text)
    res = simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)
    assert np.array_equal(load_decisions(tmp_path / "run")["gains"], np.tile(np.arange(1.0, 13.0), (6, 1)))
    for (_, row), chosen in zip(res.rounds.iterrows(), selected_rows(res.rounds)):
        assert row["comp_s"] == pytest.approx(0.1 * max(chosen))  # the slowest selected device
    assert "mean_gain" not in res.devices  # Ladder tells no mean gain and no positions


PLACED = MODELS + textwrap.dedent('''

    class Placed(Ladder):
        """Ladder's gains, with a mean gain and devices on a line that moves 1 m a second."""

        def mean_gain(self):
            return np.arange(1.0, self.n + 1.0)

        def set_time(self, time_s):
            self.t = time_s

        def positions_m(self):
            return np.column_stack([np.arange(self.n) + self.t, np.zeros(self.n)])
''')


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
def test_a_users_channel_s_mean_gains_and_positions_are_recorded(tmp_path, protocol):
    folder = write_plugins(tmp_path / "m", models_mod=PLACED)
    text = scenario_text('name = "uniform"\nm = 3', extra=f'[protocol]\nname = "{protocol}"' + (
        "\nconcurrency = 3\nbuffer = 2" if protocol == "fedbuff" else "")).replace(
        '[channel]\nprofile = "linear"', '[channel]\nmodel = "models_mod:Placed"')
    (folder / "s.toml").write_text(text)
    res = simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)
    devices = pd.read_csv(tmp_path / "run" / "devices.csv")
    np.testing.assert_array_equal(devices["mean_gain"], np.arange(1.0, 13.0))
    last = float(np.nanmax(res.updates["tx_start_s"])) if protocol == "fedbuff" else \
        float(res.rounds["t_start"].iloc[-1])  # the last set_time: the last draw
    np.testing.assert_allclose(devices["x_m"], np.arange(12) + last)
    assert (devices["y_m"] == 0).all()
    write_plugins(folder, bad_mod=PLACED.replace("np.zeros(self.n)])", "np.zeros(self.n)])[:2]"))
    (folder / "s.toml").write_text(text.replace("models_mod:Placed", "bad_mod:Placed"))
    with pytest.raises(ValueError, match=r"channel.model = 'bad_mod:Placed': positions_m\(\) gave shape \(2, 2\)"):
        simulate(load_scenario(folder / "s.toml"), tmp_path / "run2", progress=False)


# --- options and errors -----------------------------------------------------------------------


def test_a_plugins_dataclass_options_get_the_built_ins_validation(tmp_path):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    for bad, words in (("k = 0", "scheduler.k = 0: must be >= 1"), ("k = 1.5", "scheduler.k = 1.5: must be an integer"),
                       ("kk = 2", "scheduler.kk: unknown key; allowed: name, k"),
                       ("[scheduler.options]\nk = -1", "scheduler.options.k = -1: must be >= 1")):
        (folder / "s.toml").write_text(scenario_text(f'name = "topk_mod:TopK"\n{bad}'))
        with pytest.raises(ConfigError) as err:
            load_scenario(folder / "s.toml")
        assert str(err.value).startswith(words.split(":")[0]) and words in str(err.value)
        proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml")],
                              capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and words in proc.stderr


@pytest.mark.parametrize("name, modules, words", [
    ("nowhere:TopK", {}, "no module 'nowhere' in"),
    ("topk_mod:Missing", {"topk_mod": TOPK}, "topk_mod has no 'Missing' (its classes: "),
    ("topk_mod:np", {"topk_mod": TOPK}, "names a module, not a class"),
    ("broken_mod:X", {"broken_mod": "def (:\n"}, "importing broken_mod failed: SyntaxError"),
    ("raising_mod:X", {"raising_mod": "raise RuntimeError('no GPU here')\n"},
     "importing raising_mod failed: RuntimeError: no GPU here"),
    ("half_mod:Half", {"half_mod": "class Half:\n    @classmethod\n    def from_scenario(cls, s, o):\n        return cls()\n"},
     "Half does not fit the scheduler protocol: it lacks decide"),
    ("stub_mod:Stub", {"stub_mod": "from wirelessfl.scheduling import Scheduler\nclass Stub(Scheduler):\n    pass\n"},
     "Stub does not fit the scheduler protocol: it lacks from_scenario, decide"),
    ("not an import path", {}, "unknown scheduler; choose from 'lyapunov'"),
    ("a:b:c", {}, "an import path is 'module.path:Name'"),
])
def test_plugins_that_do_not_load_are_one_line_errors_with_exit_2(tmp_path, name, modules, words):
    folder = write_plugins(tmp_path / f"case_{abs(hash(name))}", **modules)
    (folder / "s.toml").write_text(scenario_text(f'name = "{name}"'))
    with pytest.raises(ConfigError) as err:
        load_scenario(folder / "s.toml")
    msg = str(err.value)
    assert msg.startswith(f"scheduler.name = {name!r}: ") and words in msg and "\n" not in msg, msg
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml")],
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_an_installed_package_registers_a_name_through_an_entry_point(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(installed_package(tmp_path / "site", "bestk_pkg", TOPK,
                                                      "[wirelessfl.schedulers]\nbestk = bestk_pkg:TopK\n")))
    sc = from_dict({"run": {"rounds": 3, "timing_only": True}, "devices": {"count": 6},
                    "link": {"model_bits": 1000}, "scheduler": {"name": "bestk", "k": 2}})
    assert sc.scheduler.options.k == 2 and sc.plugin_path == ()
    res = simulate(sc, progress=False)
    assert (res.rounds["num_selected"] == 2).all()
    from wirelessfl.scheduling import SCHEDULERS

    assert "bestk" in SCHEDULERS.names()
    with pytest.raises(ConfigError, match="choose from 'lyapunov', .*'bestk'"):
        from_dict({"run": {"rounds": 1}, "scheduler": {"name": "bestkk"}})


# --- sweeps -----------------------------------------------------------------------------------


def test_a_sweep_of_a_plugin_runs_in_a_process_pool_and_its_key_follows_its_source(tmp_path):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    (folder / "s.toml").write_text(scenario_text())
    sc = load_scenario(folder / "s.toml")
    res = sweep(sc, grid={"scheduler.k": [2, 3]}, executor="process", workers=2, out_dir=tmp_path / "sw",
                progress=False)
    assert res.failed == 0 and sorted(res.table["scheduler.k"]) == [2, 3]
    for key, k in zip(res.table["key"], res.table["scheduler.k"]):
        rounds = pd.read_csv(tmp_path / "sw" / "runs" / key / "rounds.csv")
        assert (rounds["num_selected"] == k).all()
    before = [m.key for m in expand(sc, {"scheduler.k": [2]})[1]]
    (folder / "topk_mod.py").write_text(TOPK + "\n# changed\n")  # a changed plugin is another run
    assert [m.key for m in expand(sc, {"scheduler.k": [2]})[1]] != before


def test_variants_switching_to_a_plugin_keep_the_options_they_share(tmp_path):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    text = scenario_text('m = 4\nV = 10.0\nk = 2') + textwrap.dedent('''
        [variants.best]
        scheduler.name = "topk_mod:TopK"
        [variants.drift]
        scheduler.name = "lyapunov"
    ''')
    (folder / "s.toml").write_text(text)
    members = dict(load_scenario(folder / "s.toml").variant_scenarios())
    assert members["best"].scheduler.options.k == 2 and members["drift"].scheduler.options.V == 10.0
    assert json.loads(json.dumps(members["best"].plugin_path)) == [str(folder.resolve())]
    # an option that no variant's scheduler takes is a mistake
    (folder / "s.toml").write_text(text.replace("k = 2", "k = 2\nkappa = 3"))
    with pytest.raises(ConfigError, match=r"^scheduler.kappa: no run of this scenario uses it"):
        load_scenario(folder / "s.toml")


def test_resume_finds_the_plugin_from_any_working_folder(tmp_path):
    folder = write_plugins(tmp_path / "study", topk_mod=TOPK)
    (folder / "s.toml").write_text(scenario_text(rounds=8, checkpoint_every=4))
    run = tmp_path / "run"
    simulate(load_scenario(folder / "s.toml"), run, progress=False)
    (run / "summary.json").unlink()  # as if it had stopped
    code = f"from wirelessfl import resume; r = resume({str(run)!r}, progress=False); print(r.summary['status'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0 and proc.stdout.strip() == "complete", proc.stderr
    assert resume(run, progress=False).summary["status"] == "complete"


# --- the engine checks what the user's parts hand it -------------------------------------------

BROKEN = '''
import numpy as np

from wirelessfl.scheduling import Decision, Dispatch, Scheduler
from wirelessfl.wireless import RayleighFading, sigma_profile


class Bad(Scheduler):
    """Uniform, except for the field ``what`` breaks in round 2 (or at every dispatch)."""

    def __init__(self, n, what):
        self.n, self.what, self.calls = n, what, 0

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls(scenario.devices.count, options["what"])

    def decide(self, state):
        n = self.n
        avail = np.ones(n, dtype=bool) if state.available is None else state.available
        omega, q, power, queue = avail / avail.sum(), np.where(avail, 0.25, 0.0), np.ones(n), np.zeros(n)
        selected = None
        if state.round == 2:
            if self.what == "nan_power":
                power[3] = np.nan
            elif self.what == "short_q":
                q = q[:-1]
            elif self.what == "omega_sum":
                omega = omega * 2
            elif self.what == "out_of_range":
                selected = np.array([0, n + 4])
            elif self.what == "unavailable":
                selected = np.array([1, 5])
        return Decision(omega=omega, q=q, power=power, queue=queue, m=3, selected=selected)

    def dispatch(self, state):
        idle = np.flatnonzero(~state.busy)[: state.slots]
        return Dispatch(idle, np.full(idle.size, -1.0 if self.what == "negative_dispatch" else 1.0))


class Broken(RayleighFading):
    """Rayleigh, except one device's gain is ``bad`` from the third draw on."""

    Options = None  # its options arrive as a dict

    def __init__(self, sigmas, floor, bad):
        super().__init__(sigmas, floor)
        self.bad, self.draws = bad, 0

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls(sigma_profile(scenario.channel, scenario.devices.count), 1e-3, float(options["bad"]))

    def draw(self, rng):
        self.draws += 1
        gains = super().draw(rng)
        if self.draws >= 3:
            gains[4] = self.bad
        return gains

    def draw_one(self, rng, device):
        self.draws += 1
        return self.bad if self.draws >= 3 else super().draw_one(rng, device)
'''


@pytest.mark.parametrize("what, words", [
    ("nan_power", r"Decision.power\[3\] = nan: must be finite and >= 0"),
    ("short_q", r"Decision.q has shape \(11,\); need one entry per device, \(12,\)"),
    ("omega_sum", r"Decision.omega sums to 2.0"),
    ("out_of_range", r"Decision.selected holds device 16: devices are 0..11"),
    ("unavailable", r"Decision.selected holds device 5, which is not available this round"),
])
def test_a_users_decision_is_checked_in_one_line_naming_part_field_and_round(tmp_path, what, words):
    folder = write_plugins(tmp_path / "m", broken_mod=BROKEN)
    text = scenario_text(f'name = "broken_mod:Bad"\n[scheduler.options]\nwhat = "{what}"')
    if what == "unavailable":  # device 5 never available
        text = text.replace("[devices]\ncount = 12", "[devices]\ncount = 12\nexcluded = [5]")
    (folder / "s.toml").write_text(text)
    with pytest.raises(ValueError, match=rf"scheduler broken_mod:Bad, round 2: {words}"):
        simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)
    rounds = pd.read_csv(tmp_path / "run" / "rounds.csv")
    assert len(rounds) == 2  # the rounds before it are kept
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "failed" and "Decision." in summary["error"]


@pytest.mark.parametrize("protocol", ["sync", "fedbuff"])
@pytest.mark.parametrize("bad", ["-1.0", "nan"])
def test_a_users_gains_are_checked_under_sync_and_the_event_protocols(tmp_path, protocol, bad):
    folder = write_plugins(tmp_path / "m", broken_mod=BROKEN)
    text = scenario_text('name = "uniform"\nm = 3').replace(
        '[channel]\nprofile = "linear"',
        f'[channel]\nmodel = "broken_mod:Broken"\nprofile = "linear"\n[channel.options]\nbad = "{bad}"')
    text += f'\n[protocol]\nname = "{protocol}"\n'
    (folder / "s.toml").write_text(text)
    where = "round 2: gains\\[4\\]" if protocol == "sync" else "t = .* s: the gain of device \\d+"
    with pytest.raises(ValueError, match=rf"channel broken_mod:Broken, {where}.*: must be finite and > 0"):
        simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)


def test_a_users_dispatch_power_is_checked(tmp_path):
    folder = write_plugins(tmp_path / "m", broken_mod=BROKEN)
    text = scenario_text('name = "broken_mod:Bad"\n[scheduler.options]\nwhat = "negative_dispatch"')
    text += '\n[protocol]\nname = "fedbuff"\n'
    (folder / "s.toml").write_text(text)
    with pytest.raises(ValueError, match=r"scheduler broken_mod:Bad, t = 0 s: Dispatch.power of device 0 is -1.0"):
        simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)


EXITS = '''
import sys

from wirelessfl.scheduling.schedulers import UniformScheduler


class Quits(UniformScheduler):
    """Uniform, until round 2, where it calls sys.exit(0)."""

    def decide(self, state):
        if state.round == 2:
            sys.exit(0)
        return super().decide(state)
'''


def test_a_plugin_that_calls_sys_exit_fails_the_run_with_its_traceback_in_error_log(tmp_path):
    folder = write_plugins(tmp_path / "m", exits_mod=EXITS)
    (folder / "s.toml").write_text(scenario_text('name = "exits_mod:Quits"\nm = 3'))
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml"), "--out",
                           str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if "did not complete" in ln]
    assert len(line) == 1 and "sys.exit(0)" in line[0] and "error.log" in line[0]
    run = next((tmp_path / "out").glob("*/summary.json")).parent
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and "sys.exit(0)" in summary["error"]
    assert "in decide" in (run / "error.log").read_text()
    assert len(pd.read_csv(run / "rounds.csv")) == 2


def test_a_plugin_module_that_calls_sys_exit_as_it_loads_is_a_one_line_error(tmp_path):
    folder = write_plugins(tmp_path / "m", quits_at_import="import sys\nsys.exit(0)\n")
    (folder / "s.toml").write_text(scenario_text('name = "quits_at_import:Anything"'))
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml"), "--out",
                           str(tmp_path / "out"), "--no-progress"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "quits_at_import called sys.exit(0)" in proc.stderr
    assert not (tmp_path / "out").exists()


PLAIN_CLASS = '''
import numpy as np


class PlainTopK:
    """No base class: only the required members; the optional ones come from the protocol."""

    def __init__(self, n, k):
        self.n, self.k = n, k

    @classmethod
    def from_scenario(cls, scenario, options):
        return cls(scenario.devices.count, 3)

    def decide(self, state):
        from wirelessfl.scheduling import Decision

        n = self.n
        chosen = np.argsort(-np.asarray(state.gains))[: self.k]
        return Decision(omega=np.full(n, 1 / n), q=np.full(n, self.k / n), power=np.ones(n), m=self.k, selected=chosen)


class NoDecide:
    @classmethod
    def from_scenario(cls, scenario, options):
        return cls()
'''


def test_a_plain_class_with_the_required_members_gets_the_protocols_defaults(tmp_path):
    folder = write_plugins(tmp_path / "m", plain_class_mod=PLAIN_CLASS)
    (folder / "s.toml").write_text(scenario_text('name = "plain_class_mod:PlainTopK"'))
    res = simulate(load_scenario(folder / "s.toml"), tmp_path / "run", progress=False)
    gains = load_decisions(tmp_path / "run")["gains"]
    for chosen, g in zip(selected_rows(res.rounds), gains):
        assert sorted(chosen) == sorted(np.argsort(-g)[:3].tolist())  # its own rule ran
    (folder / "t.toml").write_text(scenario_text('name = "plain_class_mod:NoDecide"'))
    with pytest.raises(ConfigError, match="NoDecide does not fit the scheduler protocol: it lacks decide"):
        load_scenario(folder / "t.toml")


# --- models, datasets and partitions ------------------------------------------------------------

DATA_PARTS = textwrap.dedent('''
    """A dataset of random features, a function model, a partition that deals fixed triples, and a
    dataset with its own split."""
    from dataclasses import dataclass

    import numpy as np
    from torch import nn

    from wirelessfl.config import option
    from wirelessfl.learning import Dataset, DatasetLoader, DeviceSplit, Partitioner


    class Blobs(DatasetLoader):
        input_shape, num_classes = (5,), 3

        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

        def load(self):
            rng = np.random.default_rng(0)
            y = rng.integers(0, 3, 400)
            x = rng.normal(size=(400, 5)) + y[:, None]
            return Dataset.from_arrays("blobs", x[:300], y[:300], x[300:], y[300:], 3)


    class Thumbnails(Blobs):
        input_shape = (1, 12, 12)  # images smaller than LeNet's 16 x 16


    class OwnSplit(Blobs):
        own_split = True

        def load(self):
            data = super().load()
            return DeviceSplit(data, [np.arange(10 * n, 10 * n + 10) for n in range(4)])


    @dataclass(frozen=True)
    class WideOptions:
        hidden: int = option(8, ge=1, doc="hidden units")


    def wide(input_shape, num_classes, hidden=8):
        return nn.Sequential(nn.Linear(input_shape[0], hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


    wide.Options = WideOptions


    def untyped(input_shape, num_classes, **options):
        return nn.Linear(input_shape[0], num_classes)


    class Triples(Partitioner):
        @classmethod
        def from_scenario(cls, scenario, options):
            return cls()

        def split(self, labels, num_devices, rng, *, num_classes):
            return [np.arange(3 * n, 3 * n + 3) for n in range(num_devices)]


    class Refused(Triples):
        def split(self, labels, num_devices, rng, *, num_classes):
            raise AssertionError("a dataset with its own split is not partitioned")
''')


def data_scenario(tmp_path, learning: str, devices: int = 4, timing_only=False) -> Path:
    folder = write_plugins(tmp_path / "mine", data_mod=DATA_PARTS)
    (folder / "s.toml").write_text(textwrap.dedent(f'''
        [run]
        rounds = 2
        eval_every_rounds = 1
        timing_only = {str(timing_only).lower()}
        [devices]
        count = {devices}
        [learning]
        local_steps = 2
        batch_size = 3
    ''') + learning)
    return folder / "s.toml"


def test_built_in_models_datasets_and_partitions_come_from_their_registries():
    from wirelessfl.learning import DATASETS, MODELS, PARTITIONS
    from wirelessfl.learning.loaders import CIFAR10
    from wirelessfl.learning.models import logreg
    from wirelessfl.learning.partitioners import LabelDirichlet

    sc = from_dict({"run": {"rounds": 1}, "learning": {"model": "logreg", "dataset": "cifar10",
                                                       "partition": "label_dirichlet"}})
    assert sc.part("model").function is logreg and sc.part("dataset") is CIFAR10
    assert sc.part("partition") is LabelDirichlet
    assert MODELS.names()[:2] == ["paper_cnn", "small_cnn"] and "synthetic" in DATASETS.names()
    assert "classes_per_device" in PARTITIONS.names()


def test_a_users_dataset_model_and_partition_from_the_scenarios_folder(tmp_path, one_torch_thread):
    """Import paths found beside the scenario; the partition's index lists are the devices' data; the
    upload is 32 x the parameters of the module the model function builds with its options."""
    from wirelessfl.learning.learner import federated_data

    path = data_scenario(tmp_path, 'dataset = "data_mod:Blobs"\nmodel = "data_mod:wide"\n'
                                   'partition = "data_mod:Triples"\n[learning.model_options]\nhidden = 6\n')
    sc = load_scenario(path)
    assert sc.plugin_path == (str(path.parent),) and sc.options("model").hidden == 6
    data, parts, aux = federated_data(sc)
    assert [p.tolist() for p in parts] == [[3 * n, 3 * n + 1, 3 * n + 2] for n in range(4)] and aux.size == 0
    result = simulate(sc, progress=False)
    assert result.summary["model_bits"] == 32 * (5 * 6 + 6 + 6 * 3 + 3)
    assert result.evals["accuracy"].notna().all()
    timing = simulate(load_scenario(path, ["run.timing_only=true"]), progress=False)
    assert timing.summary["model_bits"] == result.summary["model_bits"]  # from the declared shape


def test_a_dataset_with_its_own_split_is_not_partitioned(tmp_path, one_torch_thread):
    from wirelessfl.learning.learner import federated_data

    path = data_scenario(tmp_path, 'dataset = "data_mod:OwnSplit"\nmodel = "logreg"\npartition = "data_mod:Refused"\n')
    sc = load_scenario(path)
    data, parts, _ = federated_data(sc)
    assert [p.tolist() for p in parts] == [list(range(10 * n, 10 * n + 10)) for n in range(4)]
    assert simulate(sc, progress=False).summary["model_bits"] == 32 * (5 * 3 + 3)
    with pytest.raises(ConfigError, match="learning.aux_samples: dataset 'data_mod:OwnSplit' brings its own split"):
        load_scenario(path, ["learning.aux_samples=5"])
    with pytest.raises(ConfigError, match="learning.partition = 'classes_per_device': dataset 'data_mod:OwnSplit' "
                                          "brings its own split"):
        load_scenario(path, ['learning.partition="classes_per_device"', "learning.classes_per_device=5"])


@pytest.mark.parametrize("field, kind, first", [("model", "model", "'paper_cnn'"),
                                                ("dataset", "dataset", "'fashion_mnist'"),
                                                ("partition", "partition", "'dirichlet_per_device'")])
def test_an_unknown_model_dataset_or_partition_is_one_line_naming_the_field(tmp_path, field, kind, first):
    with pytest.raises(ConfigError) as err:
        from_dict({"run": {"rounds": 1}, "learning": {field: "nope"}})
    msg = str(err.value)
    assert msg.startswith(f"learning.{field} = 'nope': unknown {kind}; choose from {first}") and "\n" not in msg
    path = data_scenario(tmp_path, f'{field} = "data_mod:Nope"\n')
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(path)], capture_output=True,
                          text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0, proc.stderr
    assert f"learning.{field} = 'data_mod:Nope': data_mod has no 'Nope'" in proc.stderr


@pytest.mark.parametrize("learning, words", [
    ('model = "data_mod:wide"\n[learning.model_options]\nhidden = 0\n', "learning.model_options.hidden = 0: must be >= 1"),
    ('model = "data_mod:wide"\n[learning.model_options]\nwidth = 3\n', "learning.model_options.width: unknown key; "
                                                                        "allowed: hidden"),
    ('[learning.partition_options]\nalpha = 0.5\n', "learning.partition_options.alpha: partition "
                                                    "'dirichlet_per_device' takes no options"),
    ('[learning.dataset_options]\nroot = "x"\n', "learning.dataset_options.root: dataset 'fashion_mnist' takes no options"),
    ('dataset = "data_mod:Blobs"\nmodel = "small_cnn"\n', "learning.model = 'small_cnn': takes inputs of 3 dimensions, "
                                                          "and dataset 'data_mod:Blobs' has inputs of shape (5,)"),
    ('dataset = "data_mod:Thumbnails"\nmodel = "lenet"\n', "learning.model = 'lenet': needs images of at least 16 x 16 "
                                                          "pixels, got input_shape (1, 12, 12) from dataset "
                                                          "'data_mod:Thumbnails'"),
])
def test_bad_options_of_the_data_parts_are_one_line_errors(tmp_path, learning, words):
    with pytest.raises(ConfigError) as err:
        load_scenario(data_scenario(tmp_path, learning))
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_a_model_without_options_class_gets_its_table_and_switching_models_drops_its_options(tmp_path):
    path = data_scenario(tmp_path, 'model = "data_mod:untyped"\n[learning.model_options]\nanything = [1, 2]\n')
    sc = load_scenario(path)
    assert sc.options("model") == {"anything": [1, 2]}
    from wirelessfl.config import dumps, from_dict as again
    import tomllib

    assert again(tomllib.loads(dumps(sc))) == sc  # written back and read again
    wide = load_scenario(data_scenario(tmp_path, 'model = "data_mod:wide"\n[learning.model_options]\nhidden = 5\n'))
    assert wide.replace('learning.model="mlp"').options("model") == sc.replace('learning.model="mlp"').options("model")
    assert wide.replace('learning.model="data_mod:wide"').options("model").hidden == 5


def test_an_installed_package_registers_a_model_through_an_entry_point(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(installed_package(tmp_path / "site", "widenet_pkg", DATA_PARTS,
                                                      "[wirelessfl.models]\nwidenet = widenet_pkg:wide\n"
                                                      "[wirelessfl.partitions]\ntriples = widenet_pkg:Triples\n")))
    sc = from_dict({"run": {"rounds": 1, "timing_only": True}, "learning": {"model": "widenet", "dataset": "synthetic",
                                                                            "partition": "triples",
                                                                            "model_options": {"hidden": 4}}})
    from wirelessfl.learning.learner import model_bits_of

    assert model_bits_of(sc) == 32 * (60 * 4 + 4 + 4 * 10 + 10)
    assert sc.part_name("partition") == "triples" and sc.part("partition").__name__ == "Triples"


def test_a_dataset_plugin_s_missing_file_is_one_line_naming_the_part_and_the_path(tmp_path):
    folder = write_plugins(tmp_path / "mine", npz_mod=textwrap.dedent('''
        import numpy as np
        from wirelessfl.learning import DatasetLoader


        class Npz(DatasetLoader):
            @classmethod
            def from_scenario(cls, scenario, options):
                return cls()

            def load(self):
                return np.load("/nonexistent/mine.npz")
        '''))
    (folder / "s.toml").write_text('[run]\nrounds = 1\n[learning]\ndataset = "npz_mod:Npz"\n')
    proc = subprocess.run([sys.executable, "-m", "wirelessfl.cli", "run", str(folder / "s.toml"), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "learning.dataset = 'npz_mod:Npz'" in proc.stderr and "/nonexistent/mine.npz" in proc.stderr
    assert not (tmp_path / "out").exists()
