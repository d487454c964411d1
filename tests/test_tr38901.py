"""wirelessfl.radio.tr38901 against TR 38.901 V17 Tables 7.4.1-1 and 7.4.2-1, written out again here
(scalar, with math) at hand-picked points on each side of each branch. No ns-3 needed."""
import math

import numpy as np
import pytest

from wirelessfl.radio import tr38901
from wirelessfl.radio.tr38901 import check_validity, draw_states, los_probability, path_loss_db, shadowing_sigma_db

C = 3.0e8  # the speed of light Table 7.4.1-1 notes 1 and 5 prescribe
lg = math.log10


def d3(d2d, h_bs, h_ut):
    return math.sqrt(d2d ** 2 + (h_bs - h_ut) ** 2)


def approx(x):
    return pytest.approx(x, rel=0, abs=1e-9)


def uma_los(d2d, h_bs, h_ut, f):
    dbp = 4 * (h_bs - 1) * (h_ut - 1) * f / C
    d, fc = d3(d2d, h_bs, h_ut), f / 1e9
    if d2d <= dbp:
        return 28 + 22 * lg(d) + 20 * lg(fc)
    return 28 + 40 * lg(d) + 20 * lg(fc) - 9 * lg(dbp ** 2 + (h_bs - h_ut) ** 2)


def uma_nlos_prime(d2d, h_bs, h_ut, f):
    return 13.54 + 39.08 * lg(d3(d2d, h_bs, h_ut)) + 20 * lg(f / 1e9) - 0.6 * (h_ut - 1.5)


def umi_los(d2d, h_bs, h_ut, f):
    dbp = 4 * (h_bs - 1) * (h_ut - 1) * f / C
    d, fc = d3(d2d, h_bs, h_ut), f / 1e9
    if d2d <= dbp:
        return 32.4 + 21 * lg(d) + 20 * lg(fc)
    return 32.4 + 40 * lg(d) + 20 * lg(fc) - 9.5 * lg(dbp ** 2 + (h_bs - h_ut) ** 2)


def rma_pl1(d, f, h=5.0):
    return (20 * lg(40 * math.pi * d * (f / 1e9) / 3) + min(0.03 * h ** 1.72, 10) * lg(d)
            - min(0.044 * h ** 1.72, 14.77) + 0.002 * lg(h) * d)


def rma_los(d2d, h_bs, h_ut, f):
    dbp = 2 * math.pi * h_bs * h_ut * f / C
    d = d3(d2d, h_bs, h_ut)
    return rma_pl1(d, f) if d2d <= dbp else rma_pl1(dbp, f) + 40 * lg(d / dbp)


def rma_nlos_prime(d2d, h_bs, h_ut, f, h=5.0, w=20.0):
    return (161.04 - 7.1 * lg(w) + 7.5 * lg(h) - (24.37 - 3.7 * (h / h_bs) ** 2) * lg(h_bs)
            + (43.42 - 3.1 * lg(h_bs)) * (lg(d3(d2d, h_bs, h_ut)) - 3) + 20 * lg(f / 1e9)
            - (3.2 * lg(11.75 * h_ut) ** 2 - 4.97))


def pl(scenario, d2d, h_bs, h_ut, f, los):
    return float(path_loss_db(scenario, d2d, h_bs, h_ut, f, los))


# --- path loss, Table 7.4.1-1 -------------------------------------------------------------------

@pytest.mark.parametrize("d2d", [50.0, 400.0, 2000.0])  # d'_BP = 4 * 24 * 0.5 * 3.5e9 / 3e8 = 560 m
def test_uma_los_on_both_sides_of_the_breakpoint(d2d):
    assert pl("uma", d2d, 25, 1.5, 3.5e9, True) == approx(uma_los(d2d, 25, 1.5, 3.5e9))


def test_uma_los_breakpoint_uses_c_3e8():
    # beyond d'_BP, c = 299 792 458 m/s would move the loss by 5e-3 dB
    exact_c = 4 * 24 * 0.5 * 3.5e9 / 299_792_458.0
    other = 28 + 40 * lg(d3(2000, 25, 1.5)) + 20 * lg(3.5) - 9 * lg(exact_c ** 2 + 23.5 ** 2)
    assert abs(pl("uma", 2000, 25, 1.5, 3.5e9, True) - other) > 1e-3
    assert tr38901.breakpoint_m("uma", 25, 1.5, 3.5e9) == pytest.approx(560.0, rel=1e-12)


def test_uma_nlos_is_the_larger_of_los_and_nlos_prime():
    # a high UT close in: the LOS formula exceeds PL'_NLOS, so the max picks LOS
    los, nlos = uma_los(20, 25, 22.5, 3.5e9), uma_nlos_prime(20, 25, 22.5, 3.5e9)
    assert los > nlos + 1
    assert pl("uma", 20, 25, 22.5, 3.5e9, False) == approx(los)
    # far out PL'_NLOS is larger
    los, nlos = uma_los(1000, 25, 1.5, 3.5e9), uma_nlos_prime(1000, 25, 1.5, 3.5e9)
    assert nlos > los + 1
    assert pl("uma", 1000, 25, 1.5, 3.5e9, False) == approx(nlos)


@pytest.mark.parametrize("d2d", [50.0, 500.0])  # d'_BP = 4 * 9 * 0.5 * 3.5e9 / 3e8 = 210 m
def test_umi_los_and_nlos(d2d):
    assert pl("umi", d2d, 10, 1.5, 3.5e9, True) == approx(umi_los(d2d, 10, 1.5, 3.5e9))
    nlos = 35.3 * lg(d3(d2d, 10, 1.5)) + 22.4 + 21.3 * lg(3.5)
    assert pl("umi", d2d, 10, 1.5, 3.5e9, False) == approx(max(umi_los(d2d, 10, 1.5, 3.5e9), nlos))


@pytest.mark.parametrize("d2d", [1000.0, 6000.0])  # d_BP = 2 pi * 35 * 1.5 * 3.5e9 / 3e8 = 3848 m
def test_rma_los_pl1_and_pl2(d2d):
    assert pl("rma", d2d, 35, 1.5, 3.5e9, True) == approx(rma_los(d2d, 35, 1.5, 3.5e9))


def test_rma_los_branches_differ_from_each_other():
    # PL2 beyond d_BP is not PL1 continued: the test above can tell the branches apart
    d = d3(6000, 35, 1.5)
    assert abs(rma_pl1(d, 3.5e9) - rma_los(6000, 35, 1.5, 3.5e9)) > 0.1


@pytest.mark.parametrize("d2d", [200.0, 3000.0])
def test_rma_nlos(d2d):
    expected = max(rma_los(d2d, 35, 1.5, 3.5e9), rma_nlos_prime(d2d, 35, 1.5, 3.5e9))
    assert pl("rma", d2d, 35, 1.5, 3.5e9, False) == approx(expected)


@pytest.mark.parametrize("d2d", [3.0, 40.0])
def test_inh_office_los_and_nlos(d2d):
    d, fc = d3(d2d, 3, 1), 28.0
    los = 32.4 + 17.3 * lg(d) + 20 * lg(fc)
    assert pl("inh", d2d, 3, 1, 28e9, True) == approx(los)
    assert pl("inh", d2d, 3, 1, 28e9, False) == approx(max(los, 38.3 * lg(d) + 17.30 + 24.9 * lg(fc)))


def test_path_loss_broadcasts_and_extrapolates_below_10_m():
    d2d = np.array([0.0, 5.0, 100.0])
    out = path_loss_db("uma", d2d, 25, 1.5, 3.5e9, np.array([[True], [False]]))
    assert out.shape == (2, 3)
    for j, d in enumerate(d2d):  # the formulas unchanged below 10 m, as ns-3
        assert out[0, j] == approx(uma_los(d, 25, 1.5, 3.5e9))
        assert out[1, j] == approx(max(uma_los(d, 25, 1.5, 3.5e9), uma_nlos_prime(d, 25, 1.5, 3.5e9)))


def test_uma_h_e_draw_follows_note_1():
    d2d, h_ut, n = 450.0, 22.5, 40_000
    g = 1.25 * (d2d / 100) ** 3 * math.exp(-d2d / 150)
    p_one = 1 / (1 + ((h_ut - 13) / 10) ** 1.5 * g)  # Pr(h_E = 1 m)
    h_e = tr38901._uma_h_e(np.random.default_rng(5), np.full(n, d2d), np.full(n, h_ut))
    assert abs(np.mean(h_e == 1.0) - p_one) < 4 * math.sqrt(p_one * (1 - p_one) / n)
    high = h_e[h_e != 1.0]
    values, counts = np.unique(high, return_counts=True)  # uniform over 12, 15, ..., h_UT - 1.5
    assert values.tolist() == [12.0, 15.0, 18.0, 21.0]
    assert np.all(np.abs(counts / high.size - 0.25) < 4 * math.sqrt(0.25 * 0.75 / high.size))
    # below 13 m (C = 0) and at 18 m or closer (g = 0): always 1 m
    assert np.all(tr38901._uma_h_e(np.random.default_rng(5), np.full(100, d2d), np.full(100, 12.9)) == 1.0)
    assert np.all(tr38901._uma_h_e(np.random.default_rng(5), np.full(100, 18.0), np.full(100, h_ut)) == 1.0)


def test_uma_high_ut_path_loss_with_an_rng_uses_the_drawn_h_e():
    d2d, h_ut, f = 450.0, 22.5, 0.5e9  # d'_BP: 3440, 910, 502, 210, 40 m for h_E = 1, 12, ..., 21

    def los_with(h_e):
        dbp = 4 * (25 - h_e) * (h_ut - h_e) * f / C
        d = d3(d2d, 25, h_ut)
        return 28 + 22 * lg(d) + 20 * lg(f / 1e9) if d2d <= dbp else \
            28 + 40 * lg(d) + 20 * lg(f / 1e9) - 9 * lg(dbp ** 2 + (25 - h_ut) ** 2)

    out = path_loss_db("uma", np.full(2000, d2d), 25, h_ut, f, True, rng=np.random.default_rng(5))
    expected = sorted({round(los_with(h_e), 9) for h_e in (1.0, 12.0, 15.0, 18.0, 21.0)})
    assert len(expected) == 3  # PL1 (h_E = 1, 12, 15), PL2 with h_E = 18, PL2 with h_E = 21
    assert sorted(set(np.round(out, 9).tolist())) == expected
    # without an rng h_E is 1 m
    assert pl("uma", d2d, 25, h_ut, f, True) == approx(los_with(1.0))


# --- LOS probability, Table 7.4.2-1 -------------------------------------------------------------

@pytest.mark.parametrize("scenario", ["uma", "umi"])
@pytest.mark.parametrize("d2d", [0.0, 5.0, 18.0])
def test_los_probability_is_one_up_to_18_m(scenario, d2d):
    assert float(los_probability(scenario, d2d, 1.5)) == 1.0


@pytest.mark.parametrize("d2d", [18.5, 60.0, 250.0, 1500.0])
def test_los_probability_uma_umi(d2d):
    base_uma = 18 / d2d + math.exp(-d2d / 63) * (1 - 18 / d2d)
    assert float(los_probability("uma", d2d, 1.5)) == approx(base_uma)
    c = ((20.0 - 13) / 10) ** 1.5  # C'(h_UT) for h_UT = 20 m
    assert float(los_probability("uma", d2d, 20.0)) == approx(
        base_uma * (1 + c * 5 / 4 * (d2d / 100) ** 3 * math.exp(-d2d / 150)))
    assert float(los_probability("uma", d2d, 13.0)) == approx(base_uma)  # C' = 0 up to 13 m
    assert float(los_probability("umi", d2d, 1.5)) == approx(18 / d2d + math.exp(-d2d / 36) * (1 - 18 / d2d))


def test_los_probability_rma_and_inh_mixed_office():
    assert float(los_probability("rma", 10.0, 1.5)) == 1.0
    assert float(los_probability("rma", 510.0, 1.5)) == approx(math.exp(-0.5))
    assert float(los_probability("inh", 1.2, 1.0)) == 1.0
    assert float(los_probability("inh", 3.0, 1.0)) == approx(math.exp(-(3.0 - 1.2) / 4.7))
    assert float(los_probability("inh", 6.5, 1.0)) == approx(0.32)  # the third branch from 6.5 m on
    assert float(los_probability("inh", 40.0, 1.0)) == approx(0.32 * math.exp(-(40.0 - 6.5) / 32.6))


def test_draw_states():
    rng = np.random.default_rng(3)
    d2d = np.full(40_000, 100.0)
    states = draw_states(rng, "uma", d2d, 1.5, "random")
    p = 18 / 100 + math.exp(-100 / 63) * (1 - 18 / 100)
    assert states.dtype == bool and states.shape == d2d.shape
    assert abs(states.mean() - p) < 4 * math.sqrt(p * (1 - p) / d2d.size)
    # one uniform per link, LOS below Pr(LOS): the same seed draws the same states
    assert np.array_equal(draw_states(np.random.default_rng(7), "uma", d2d, 1.5, "random"),
                          np.random.default_rng(7).random(d2d.size) < p)
    assert draw_states(rng, "uma", np.array([5.0, 18.0]), 1.5, "random").all()
    assert draw_states(rng, "rma", d2d, 1.5, "los").all()
    assert not draw_states(rng, "rma", d2d, 1.5, "nlos").any()
    with pytest.raises(ValueError, match="los_mode = 'sometimes'"):
        draw_states(rng, "rma", d2d, 1.5, "sometimes")


# --- shadow fading ------------------------------------------------------------------------------

def test_shadowing_sigma_per_state():
    for scenario, (s_los, s_nlos) in {"uma": (4.0, 6.0), "umi": (4.0, 7.82), "inh": (3.0, 8.03)}.items():
        sigma = shadowing_sigma_db(scenario, np.array([True, False]), 50.0, 25.0, 1.5, 3.5e9)
        assert sigma.tolist() == [s_los, s_nlos]
    dbp = 2 * math.pi * 35 * 1.5 * 3.5e9 / C
    sigma = shadowing_sigma_db("rma", np.array([True, True, False, False]),
                               np.array([dbp - 1, dbp + 1, dbp - 1, dbp + 1]), 35.0, 1.5, 3.5e9)
    assert sigma.tolist() == [4.0, 6.0, 8.0, 8.0]


# --- validity -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (("uma", 3.5e9, 25, 30), "channel.ut_height_m = 30: TR 38.901 uma needs 1.5 to 22.5 m"),
    (("uma", 3.5e9, 30, 1.5), "channel.bs_height_m = 30: TR 38.901 uma needs 25 m"),
    (("umi", 3.5e9, 10, 1.0), "channel.ut_height_m = 1: TR 38.901 umi needs 1.5 to 22.5 m"),
    (("rma", 40e9, 35, 1.5), "channel.carrier_hz = 4e+10: TR 38.901 rma needs 5e+08 to 3e+10 Hz"),
    (("rma", 3.5e9, 200, 1.5), "channel.bs_height_m = 200: TR 38.901 rma needs 10 to 150 m"),
    (("rma", 3.5e9, 35, np.array([1.5, 12.0])), "channel.ut_height_m = 12: TR 38.901 rma needs 1 to 10 m"),
    (("inh", 0.3e9, 3, 1), "channel.carrier_hz = 3e+08: TR 38.901 inh needs 5e+08 to 1e+11 Hz"),
    (("inh", 3.5e9, 3, 0), "channel.ut_height_m = 0: TR 38.901 inh needs a positive value in m"),
    (("uma", 3.5e9, 25, float("nan")), "channel.ut_height_m = nan: TR 38.901 uma needs 1.5 to 22.5 m"),
    (("UMa", 3.5e9, 25, 1.5), "channel.scenario = 'UMa': TR 38.901 scenarios are uma, umi, rma, inh"),
])
def test_check_validity_raises_one_line(args, message):
    with pytest.raises(ValueError) as error:
        check_validity(*args)
    assert str(error.value) == message
    assert "\n" not in str(error.value)


def test_check_validity_accepts_the_ranges_edges_and_renames():
    for scenario, valid in tr38901.VALIDITY.items():
        for f in valid.carrier_hz:
            for h_bs in valid.h_bs_m or (3.0,):
                for h_ut in valid.h_ut_m or (1.0,):
                    check_validity(scenario, f, h_bs, h_ut)
    with pytest.raises(ValueError, match=r"^link\.carrier_hz = 2e\+11: "):
        check_validity("uma", 200e9, 25, 1.5, names={"carrier_hz": "link.carrier_hz"})


def test_unknown_scenario_everywhere():
    for call in (lambda: path_loss_db("uma-nlos", 10, 25, 1.5, 3.5e9, True),
                 lambda: los_probability("x", 10, 1.5),
                 lambda: shadowing_sigma_db("x", True, 10, 25, 1.5, 3.5e9)):
        with pytest.raises(ValueError, match="scenarios are uma, umi, rma, inh"):
            call()
