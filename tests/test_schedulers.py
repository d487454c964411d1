"""Uniform and Lyapunov schedulers, and the sampling of devices (docs/papers/lyapunov.md,
"Sampling with replacement" to "The uniform baseline")."""
import math

import numpy as np
import pytest

from wirelessfl.scheduling import (LyapunovScheduler, RoundState, UniformScheduler, draw_devices,
                                   inclusion_probability, optimal_power, selection_objective,
                                   solve_selection)

BITS, BW, N0, PMAX = 32 * 555178, 22e6, 1.0, 10 ** 3.5


def rayleigh_state(rng, sigma, r=0, available=None):
    gains = np.maximum((sigma * rng.rayleigh(1.0, sigma.size)) ** 2, 1e-3)
    return RoundState(round=r, gains=gains, model_bits=BITS, bandwidth_hz=BW, noise_power=N0,
                      available=available)


def test_uniform_meets_the_power_budget_with_equality_where_it_can():
    n, m = 8, 5
    p_bar = np.array([1.0, 1.0, 2.0, 0.5, 1.0, 2000.0, 3000.0, 1.0])
    sched = UniformScheduler(n, m, p_bar, PMAX)
    d = sched.decide(rayleigh_state(np.random.default_rng(0), np.ones(n)))
    q_expected = 1.0 - (1.0 - 1.0 / n) ** m
    assert np.allclose(d.omega, 1.0 / n) and np.allclose(d.q, q_expected, rtol=1e-14)
    room = p_bar / q_expected <= PMAX
    assert room.sum() == 6  # two devices whose budget exceeds q Pmax
    assert np.allclose((d.q * d.power)[room], p_bar[room], rtol=1e-14)
    assert np.all(d.power[~room] == PMAX) and np.all((d.q * d.power)[~room] < p_bar[~room])
    assert d.queue is None and np.all(d.queues() == 0) and d.m == m  # no queues kept: none returned


def test_uniform_with_an_availability_mask():
    n, m = 10, 3
    avail = np.array([True, False] * 5)
    sched = UniformScheduler(n, m, 1.0, PMAX)
    rng = np.random.default_rng(1)
    d = sched.decide(rayleigh_state(rng, np.ones(n), available=avail))
    assert np.allclose(d.omega[avail], 1 / 5) and np.all(d.omega[~avail] == 0)
    assert np.all(d.q[~avail] == 0) and np.allclose(d.q[avail], 1 - (1 - 1 / 5) ** m)
    assert np.allclose(d.q[avail] * d.power[avail], 1.0)
    drawn = np.concatenate([draw_devices(d.omega, m, rng) for _ in range(500)])
    assert set(drawn.tolist()) == set(np.flatnonzero(avail).tolist())  # q = 0: never selected


def run_lyapunov(sched, rng, sigma, rounds):
    pq = np.empty((rounds, sigma.size))
    for r in range(rounds):
        before = sched.queue.copy()
        d = sched.decide(rayleigh_state(rng, sigma, r))
        assert np.array_equal(d.queue, before)  # the Decision records the Z it was made with
        assert np.allclose(sched.queue, np.maximum(before + d.power * d.q - sched.p_bar, 0.0), rtol=0, atol=0)
        pq[r] = d.power * d.q
    return pq


def test_lyapunov_queue_update_and_decision_consistency():
    n, m, V, lam = 12, 10, 100.0, 100.0
    sched = LyapunovScheduler(n, m, V, lam, 1.0, PMAX)
    rng = np.random.default_rng(2)
    sigma = np.linspace(0.1, 10, n)
    run_lyapunov(sched, rng, sigma, 20)  # build up some queue
    assert np.any(sched.queue > 0)
    z = sched.queue.copy()
    state = rayleigh_state(rng, sigma, 20)
    d = sched.decide(state)
    # Independent assembly of the per-round problem (docs/papers/lyapunov.md, "Selection probabilities").
    power = optimal_power(state.gains, z, V=V, lam=lam, model_bits=BITS, bandwidth_hz=BW,
                          noise_power=N0, p_max=PMAX)
    assert np.array_equal(d.power, power)
    b = V * lam * BITS / (BW * np.log2(1 + state.gains * power / N0)) + z * power
    ref = solve_selection(V / n, b, m)
    assert np.allclose(d.omega, ref.omega, rtol=1e-9, atol=1e-15)
    assert d.info["objective"] == pytest.approx(selection_objective(d.omega, V / n, b, m), rel=1e-12)
    assert np.allclose(d.q, inclusion_probability(d.omega, m))


def test_lyapunov_time_average_power_approaches_the_budget():
    n, rounds = 10, 3000
    sched = LyapunovScheduler(n, 10, 100.0, 100.0, 1.0, PMAX)
    pq = run_lyapunov(sched, np.random.default_rng(3), np.linspace(0.1, 10, n), rounds)
    avg = pq.mean(axis=0)
    late = pq[rounds // 2:].mean(axis=0)
    # Z_T >= sum_t (P q - Pbar): the overshoot of the time average is Z_T / T, which must be small.
    assert np.all(avg <= 1.0 + sched.queue / rounds + 1e-9)
    assert np.all(sched.queue / rounds < 0.15)
    assert np.all(avg < 1.15) and np.all(late < 1.05)
    # ... and the budget is used, not starved: most devices average close to Pbar once settled.
    assert np.median(late) > 0.9


def test_lyapunov_availability_unsendable_and_empty_rounds():
    n, m = 6, 4
    p_max = np.array([PMAX, PMAX, 0.0, PMAX, PMAX, PMAX])  # device 2 cannot transmit
    sched = LyapunovScheduler(n, m, 100.0, 100.0, 1.0, p_max)
    rng = np.random.default_rng(4)
    sched.queue = np.array([3.0, 2.0, 5.0, 1.0, 0.0, 4.0])
    avail = np.array([True, True, True, False, True, False])
    d = sched.decide(rayleigh_state(rng, np.ones(n), available=avail))
    eligible = avail & (p_max > 0)
    assert np.all(d.omega[~eligible] == 0) and np.all(d.q[~eligible] == 0)
    assert d.omega.sum() == pytest.approx(1.0, abs=1e-12) and np.all(d.q[eligible] > 0)
    assert sched.queue[3] == 1.0 and sched.queue[5] == 4.0  # unavailable: unchanged
    assert sched.queue[2] == 4.0  # available but silent: q = 0, Z - Pbar
    # Nobody available: nothing is drawn.
    d = sched.decide(rayleigh_state(rng, np.ones(n), available=np.zeros(n, dtype=bool)))
    assert np.all(d.omega == 0) and draw_devices(d.omega, m, rng).size == 0


def test_manifold_solver_and_paper_power_rule_options():
    n, m = 8, 5
    sigma = np.linspace(0.5, 5, n)
    exact = LyapunovScheduler(n, m, 100.0, 10.0, 1.0, PMAX)
    manifold = LyapunovScheduler(n, m, 100.0, 10.0, 1.0, PMAX, solver="manifold")
    rng = np.random.default_rng(5)
    for r in range(3):
        state = rayleigh_state(rng, sigma, r)
        manifold.queue = exact.queue.copy()  # same per-round problem for both solvers
        de, dm = exact.decide(state), manifold.decide(state)
        assert dm.info["objective"] <= de.info["objective"] * (1 + 1e-6)
        assert dm.info["objective"] >= de.info["objective"] * (1 - 1e-12)
    paper = LyapunovScheduler(n, m, 100.0, 10.0, 1.0, PMAX, power_rule="paper")
    paper.queue = np.full(n, 2.0)
    state = rayleigh_state(rng, sigma)
    d = paper.decide(state)
    assert np.array_equal(d.power, optimal_power(state.gains, np.full(n, 2.0), V=100.0, lam=10.0, model_bits=BITS,
                                                 bandwidth_hz=BW, noise_power=N0, p_max=PMAX, rule="paper"))
    with pytest.raises(ValueError, match="exact.*manifold"):
        LyapunovScheduler(n, m, 1.0, 1.0, 1.0, PMAX, solver="slsqp")
    with pytest.raises(ValueError, match="exact.*paper"):
        LyapunovScheduler(n, m, 1.0, 1.0, 1.0, PMAX, power_rule="printed")


def test_draw_devices_inclusion_frequencies_match_q():
    m = 5
    omega = solve_selection(1.0, np.array([400.0, 420.0, 600.0, 900.0, 1500.0, 3000.0]), m).omega
    q = inclusion_probability(omega, m)
    rng = np.random.default_rng(6)
    reps = 40000
    counts = np.zeros(omega.size)
    sizes = np.empty(reps)
    for i in range(reps):
        sel = draw_devices(omega, m, rng)
        assert np.all(np.diff(sel) > 0)  # sorted, distinct
        counts[sel] += 1
        sizes[i] = sel.size
    freq = counts / reps
    assert np.all(np.abs(freq - q) <= 5 * np.sqrt(q * (1 - q) / reps) + 1e-12)
    assert sizes.mean() == pytest.approx(q.sum(), abs=5 * sizes.std() / math.sqrt(reps))
    assert 1 <= sizes.min() and sizes.max() <= m


def test_draw_devices_draws_what_generator_choice_draws_from_the_same_stream():
    # the fast path must consume the stream exactly as numpy's choice(p=...) does, or records change
    ours, numpys = np.random.default_rng(3), np.random.default_rng(3)
    weights = np.random.default_rng(4)
    for trial in range(300):
        omega = weights.dirichlet(np.full(50, 0.3)) * (0.5 if trial % 2 else 1.0)  # unnormalised too
        omega[weights.random(50) < 0.3] = 0.0
        if not omega.sum() > 0:
            continue
        m = int(weights.integers(1, 30))
        expected = np.unique(numpys.choice(50, size=m, replace=True, p=omega / omega.sum()))
        assert draw_devices(omega, m, ours).tolist() == expected.tolist()
    with pytest.raises(ValueError, match="negative"):
        draw_devices(np.array([0.5, -0.1, 0.6]), 2, ours)


def test_power_settled_round_is_where_the_running_average_stays_within_tolerance():
    from wirelessfl.sim.records.summary import power_settled_round

    # running average after round t (t + 1 values: one 10, t ones) is (10 + t) / (t + 1): <= 1.05 from t = 179
    assert power_settled_round([10.0] + [1.0] * 199, 1.0) == 179.0
    assert power_settled_round([1.0] * 5, 1.0) == 0.0  # never above: settled from the start
    assert math.isnan(power_settled_round([10.0] + [1.0] * 20, 1.0))  # ends above: not settled in the run
    assert math.isnan(power_settled_round([], 1.0))  # no round decisions (event protocols)


def test_initial_queue_starts_every_queue_there_and_removes_round_zeros_full_power():
    """The paper's Z = 0 start spends p_max in round 0; queues started near their level do not."""
    kw = dict(num_devices=20, m=5, V=100.0, lam=100.0, p_bar=1.0, p_max=10 ** 3.5)
    gains = np.linspace(0.5, 3.0, 20)
    state = RoundState(round=0, gains=gains, model_bits=1e5, bandwidth_hz=1e6, noise_power=1.0)
    empty = LyapunovScheduler(**kw).decide(state)
    assert np.allclose(empty.power, 10 ** 3.5) and np.all(empty.queue == 0)
    started = LyapunovScheduler(**kw, initial_queue=5.0)
    first = started.decide(state)
    assert np.all(first.queue == 5.0) and first.power.max() < 10 ** 3.5
    with pytest.raises(ValueError, match="initial_queue"):
        LyapunovScheduler(**kw, initial_queue=-1.0)


def test_a_scheduler_without_queues_or_extra_traffic_returns_the_narrow_decision(tmp_path):
    """The round contract: omega, q, power, m (and what it chooses); the Lyapunov queue and the
    uplink extras are optional parts a scheduler leaves out when it has none."""
    from wirelessfl import simulate
    from wirelessfl.config import from_dict
    from wirelessfl.scheduling import NO_TRAFFIC, Decision

    d = Decision(omega=np.full(4, 0.25), q=np.full(4, 0.5), power=np.ones(4), m=2)
    assert d.queue is None and d.traffic is NO_TRAFFIC and np.all(d.queues() == 0)
    res = simulate(from_dict({"run": {"rounds": 4, "timing_only": True}, "devices": {"count": 4},
                              "scheduler": {"name": "uniform", "m": 2}}), tmp_path / "r", progress=False)
    assert (res.rounds["queue_mean"] == 0).all()
    from wirelessfl import load_decisions

    assert (load_decisions(tmp_path / "r")["queue"] == 0).all()
