"""wirelessfl.radio.tr38901 against ns-3.44 (benchmarks/ns3_check.py): the path loss to 1e-6 dB,
ns-3's LOS shares and shadowing draws consistent with our Pr(LOS) and N(0, sigma_SF). Skipped where
the ns3 extra is not installed."""
import pytest

from fakes import benchmark

pytest.importorskip("ns", reason="ns3 extra not installed: pip install .[ns3]")

pytestmark = pytest.mark.ns3

SEED = 7


ns3_check = benchmark("ns3_check")


@pytest.fixture(scope="module")
def rows():
    return ns3_check.propagation_rows(seed=SEED, draws=10_000)


def _failures(rows, check):
    chosen = [r for r in rows if r.check == check]
    assert chosen, f"no {check} rows"
    return [f"{r.scenario} {r.case}: {r.value:.3g}" for r in chosen if not r.ok]


def test_path_loss_agrees_to_1e_6_db(rows):
    assert ns3_check.PATH_LOSS_TOLERANCE_DB == 1e-6
    assert {r.scenario for r in rows if r.check == "path loss"} == {"uma", "umi", "rma", "inh"}
    assert not _failures(rows, "path loss")
    assert max(r.value for r in rows if r.check == "path loss") <= 1e-6


def test_los_shares_match_our_probability(rows):
    assert not _failures(rows, "LOS share")
    assert min(r.value for r in rows if r.check == "LOS share") > 1e-3


def test_shadowing_draws_match_our_sigma(rows):
    assert not _failures(rows, "shadowing")
    assert min(r.value for r in rows if r.check == "shadowing") > 1e-3


def test_the_command_line_writes_the_table(tmp_path, capsys):
    out = tmp_path / "ns3.md"
    assert ns3_check.main(["propagation", "--draws", "300", "--seed", str(SEED), "--out", str(out)]) == 0
    table = out.read_text()
    assert table.startswith("| check | scenario |") and table in capsys.readouterr().out
    assert table.count("| path loss |") == 16 and table.count("| NO |") == 0


# ----------------------------------------------------------------------------------------------
# LTE: wirelessfl.radio.rates.LteRate against ns-3's LENA uplink and its MIESM error model
# (benchmarks/ns3_check.py lte / bler; ns-3's simulations run in a child process)

LTE_PRB = 25


@pytest.fixture(scope="module")
def lte_rows():
    # 0.3 s per SINR (0.1 s warm-up: the first SRS): 200 full-buffer TTIs, ns-3's goodput is exact
    return ns3_check.lte_rows(LTE_PRB, seconds=0.3, seed=SEED)


@pytest.fixture(scope="module")
def bler_rows():
    return ns3_check.bler_rows(LTE_PRB, second=False)


def test_lte_piro_rate_equals_ns3_goodput(lte_rows):
    assert [r.sinr_db for r in lte_rows] == list(ns3_check.LTE_SINRS_DB)
    granted = [r for r in lte_rows if r.granted]
    # ns-3 grants from CQI 1 (SINR -2.18 dB) on: -1..25 dB
    assert [r.sinr_db for r in granted] == [s for s in ns3_check.LTE_SINRS_DB if s > -2.18]
    for r in granted:
        assert r.piro_mcs == r.ns3_mcs, r
        assert abs(r.piro_bps - r.ns3_bps) <= 0.01 * r.ns3_bps, r
        assert r.ns3_bler == 0.0 and abs(r.ns3_sinr_db - r.sinr_db) < 0.01, r
    # below CQI 1: no grant in ns-3, and none in ns-3's rule as we implement it
    assert all(r.ns3_bps == 0.0 and r.piro_mcs == -1 for r in lte_rows if not r.granted)
    assert all(r.ok for r in lte_rows)
    # our default (BLER 10 % target) is never below ns-3's conservative AMC
    assert all(r.bler_bps >= r.ns3_bps for r in lte_rows)


def test_lte_command_line_writes_the_table(lte_rows, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(ns3_check, "lte_rows", lambda *args, **kwargs: lte_rows)  # no second ns-3 run
    out = tmp_path / "lte.md"
    assert ns3_check.main(["lte", "--out", str(out)]) == 0
    text = out.read_text()
    assert text in capsys.readouterr().out
    assert text.count("| yes |") == len(ns3_check.LTE_SINRS_DB) and "| NO |" not in text
    assert "median ratio" in text


def test_bler_thresholds_within_1_5_db_of_ns3(bler_rows):
    assert [r.mcs for r in bler_rows if r.excluded] == [10, 17, 18, 19, 20]
    far = [f"MCS {r.mcs}: ours {r.ours_10_db:.2f} dB, ns-3 {r.ns3_10_db:.2f} dB" for r in bler_rows
           if not r.excluded and abs(r.diff_db) > ns3_check.BLER_TOLERANCE_DB]
    assert not far
    # ns-3's curves are ordered in SINR like ours
    assert all(r.ns3_db[0] < r.ns3_db[1] < r.ns3_db[2] for r in bler_rows)


def test_bler_fit_and_command_line(bler_rows, tmp_path, capsys, monkeypatch):
    fit = ns3_check.fit_bler(bler_rows)
    assert fit.points == 3 * 24 and sorted(fit.gap_db) == [2, 4, 6]
    assert fit.gap_db[2] < fit.gap_db[4] < fit.gap_db[6] and 0.0 < fit.spread_db < 1.0
    assert fit.rms_db < 0.6 and fit.max_db < 1.5
    monkeypatch.setattr(ns3_check, "bler_rows", lambda *args, **kwargs: bler_rows)
    out = tmp_path / "bler.md"
    ns3_check.main(["bler", "--out", str(out)])
    text = out.read_text()
    assert text in capsys.readouterr().out
    assert text.count("| excluded |") == 5 and "Fit to ns-3's 72 points" in text
