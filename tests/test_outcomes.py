"""Loss outcomes as an enum (wirelessfl.outcomes.Outcome) that keeps the records' strings: updates.csv's
``outcome`` column and summary.json's ``outcomes`` hold exactly the strings they always held."""
from __future__ import annotations

import json
import pickle

import pandas as pd

from wirelessfl.experiments.run import simulate
from wirelessfl.outcomes import LOSSES, OUTCOMES, Outcome
from wirelessfl.sim.records.update_log import UPDATE_COLUMNS

from test_protocols import scenario

RECORDED = ("applied", "stale", "late_dropped", "offline", "lost", "silent", "battery", "downlink", "handover",
            "in_flight")
"""The outcomes as records before the enum spelt them, in summary.json's order (written out by hand)."""


def test_every_outcome_is_its_record_string_wherever_it_is_written_or_looked_up():
    assert OUTCOMES == RECORDED and [o.value for o in Outcome] == list(RECORDED)
    for o, text in zip(Outcome, RECORDED):
        assert o == text and text == o and str(o) == text and f"{o}" == text and "%s" % o == text
        assert f"{o:>12}" == f"{text:>12}" and json.dumps({o: o}) == json.dumps({text: text})
        counts = dict.fromkeys(RECORDED, 0)
        counts[o] += 1  # found under its string, not added as a key of its own
        assert list(counts) == list(RECORDED) and counts[text] == 1 and type(list(counts)[0]) is str
        assert pickle.loads(pickle.dumps(o)) is o and Outcome(text) is o
    assert set(LOSSES) == {"offline", "lost", "silent", "battery", "downlink", "handover"}


def test_a_run_s_records_hold_the_outcome_strings(tmp_path):
    """A sync run with a deadline (late_dropped) and a fedbuff run that drops stale updates: the outcome
    column and the summary's counts are the strings, and the counts are the column's (counted here)."""
    runs = {"sync": scenario({"name": "sync"}, run={"round_deadline_s": 1.0}),
            "fedbuff": scenario({"name": "fedbuff", "concurrency": 6, "buffer": 2, "max_staleness": 0})}
    seen = set()
    for name, sc in runs.items():
        res = simulate(sc, tmp_path / name, progress=False)
        up = pd.read_csv(tmp_path / name / "updates.csv")
        assert list(up.columns[:len(UPDATE_COLUMNS)]) == UPDATE_COLUMNS
        counts = up.outcome.value_counts().to_dict()
        summary = json.loads((tmp_path / name / "summary.json").read_text())
        assert list(summary["outcomes"]) == list(RECORDED)
        assert {k: v for k, v in summary["outcomes"].items() if v} == counts
        # the frame a run returns holds plain strings too, as it did
        assert all(type(o) is str for o in res.updates.outcome) and res.updates.outcome.tolist() == up.outcome.tolist()
        seen |= set(counts)
    assert {"applied", "late_dropped", "stale"} <= seen  # the outcomes this test meant to produce


def test_a_checkpoint_holding_an_outcome_reads_back_as_its_string(tmp_path):
    """An update's outcome in a checkpoint (a round's finished updates are saved with it) is stored as
    the plain string: the weights-only loader refuses objects of the package's classes."""
    from wirelessfl.sim.run.checkpoint import load_checkpoint, save_checkpoint, to_checkpoint

    stored = to_checkpoint({"flights": {"updates": [{"seq": 3, "outcome": Outcome.OFFLINE}]}})
    assert type(stored["flights"]["updates"][0]["outcome"]) is str
    save_checkpoint(tmp_path / "c.pt", {"flights": {"updates": [{"seq": 3, "outcome": Outcome.OFFLINE}]}})
    state = load_checkpoint(tmp_path / "c.pt")
    assert state["flights"]["updates"][0]["outcome"] == "offline" == Outcome.OFFLINE


def test_kill_9_and_resume_of_a_run_that_loses_updates_mid_round_gives_identical_records(tmp_path):
    """semi_sync with a deadline, devices that go offline and late uploads carried: killed with SIGKILL
    after a checkpoint, resumed, it writes the uninterrupted run's records."""
    from fakes import killed_and_resumed

    text = ('seed = 5\n[run]\nrounds = 40\ntiming_only = true\ncheckpoint_every = 1\nround_deadline_s = 0.8\n'
            '[devices]\ncount = 12\ncompute = "shifted_exponential"\ndelay_mean_s = 0.5\n'
            'p_on_to_off = 0.2\np_off_to_on = 0.5\n[channel]\nprofile = "linear"\n'
            '[link]\nmodel_bits = 100000\nbandwidth_hz = 1e6\n[protocol]\nname = "semi_sync"\nfirst_k = 3\n'
            '[scheduler]\nname = "uniform"\nm = 5\n')
    full, cut = killed_and_resumed(tmp_path, text, "k")
    outcomes = set(pd.read_csv(full / "updates.csv").outcome)
    assert {"applied", "offline"} <= outcomes  # losses settled while rounds were under way
    for name in ("rounds.csv", "updates.csv"):
        assert (full / name).read_text() == (cut / name).read_text(), name
