"""Compressed updates: each encoder's output is as long as it says, decodes to what its definition
gives, QSGD is unbiased within its variance bound, error feedback telescopes, the airtime follows the
bits, and a run with error feedback resumes exactly."""
import numpy as np
import pandas as pd
import pytest
import torch

from wirelessfl.config import from_dict
from wirelessfl.fields import ConfigError
from wirelessfl.learning.algorithms import FedAvg
from wirelessfl.learning.compression import (COMPRESSORS, QSGD, Float16, NoCompression, QSGDOptions, RandK,
                                             RandKOptions, ScaledSign, TopK, TopKOptions, Uplink, index_width,
                                             upload_bits)
from wirelessfl.experiments.run import simulate
from wirelessfl.learning.learner import model_bits_of

BUILT_INS = [NoCompression(), Float16(), TopK(TopKOptions(fraction=0.1)), TopK(TopKOptions(k=3)),
             RandK(RandKOptions(fraction=0.25)), QSGD(QSGDOptions(levels=1)), QSGD(QSGDOptions(levels=16)),
             ScaledSign()]


@pytest.mark.parametrize("compressor", BUILT_INS, ids=lambda c: type(c).__name__)
@pytest.mark.parametrize("d", [1, 2, 7, 64, 1001])
def test_every_encoding_is_as_long_as_bits_says(compressor, d):
    rng = np.random.default_rng(d)
    v = rng.normal(size=d) * 10.0 ** rng.integers(-3, 3, size=d)
    bits = compressor.encode(v, rng)
    assert bits.dtype == np.uint8 and set(np.unique(bits)) <= {0, 1}
    assert bits.size == compressor.bits(d)
    assert compressor.decode(bits, d).shape == (d,)


def test_the_bit_counts_are_the_stated_codes():
    d = 1000
    assert NoCompression().bits(d) == 32_000 and Float16().bits(d) == 16_000
    assert index_width(1000) == 10 and index_width(1024) == 10 and index_width(1025) == 11 and index_width(1) == 0
    assert TopK(TopKOptions(fraction=0.01)).bits(d) == 10 * (10 + 32)
    assert RandK(RandKOptions(k=7)).bits(d) == 64 + 7 * 32
    assert QSGD(QSGDOptions(levels=16)).bits(d) == 32 + d * (1 + 5)  # 17 levels 0..16: 5 bits
    assert QSGD(QSGDOptions(levels=15)).bits(d) == 32 + d * (1 + 4)
    assert ScaledSign().bits(d) == 32 + d
    assert upload_bits(NoCompression(), 69) == 69  # uncompressed: the model's bits as given
    assert upload_bits(ScaledSign(), 69) == 32 + 3  # d = ceil(69 / 32)


def test_each_decoding_is_its_definition():
    rng = np.random.default_rng(0)
    v = rng.normal(size=50)
    v[[3, 9]] = [5.0, -7.0]
    roundtrip = lambda c: c.decode(c.encode(v, rng), v.size)  # noqa: E731
    assert np.array_equal(roundtrip(NoCompression()), v.astype(np.float32))
    assert np.array_equal(roundtrip(Float16()), v.astype(np.float16).astype(float))
    top = roundtrip(TopK(TopKOptions(k=4)))
    keep = np.argsort(-np.abs(v))[:4]
    assert np.count_nonzero(top) == 4 and np.array_equal(top[keep], v[keep].astype(np.float32))
    sign = roundtrip(ScaledSign())
    assert np.allclose(sign, np.float32(np.abs(v).mean()) * np.where(v < 0, -1, 1), rtol=0, atol=0)
    rand = RandK(RandKOptions(k=5))
    out = rand.decode(rand.encode(v, np.random.default_rng(1)), v.size)
    kept = np.flatnonzero(out)
    assert kept.size == 5 and np.allclose(out[kept], (v[kept] * 10).astype(np.float32))


@pytest.mark.parametrize("levels", [1, 4])
def test_qsgd_is_unbiased_within_its_variance_bound(levels):
    rng = np.random.default_rng(levels)
    d, draws = 40, 4000
    v = rng.normal(size=d)
    q = QSGD(QSGDOptions(levels=levels))
    samples = np.array([q.decode(q.encode(v, rng), d) for _ in range(draws)])
    norm = float(np.float32(np.linalg.norm(v)))
    # each entry: mean within 4 standard errors of v_i (the norm travels as float32)
    se = samples.std(axis=0, ddof=1) / np.sqrt(draws) + 1e-12
    assert np.all(np.abs(samples.mean(axis=0) - v * norm / np.linalg.norm(v)) < 4 * se + 1e-7)
    # E||Q(v) - v||^2 <= min(d / s^2, sqrt(d) / s) ||v||^2, the mean within 4 standard errors of it
    errors = ((samples - v) ** 2).sum(axis=1)
    bound = min(d / levels ** 2, np.sqrt(d) / levels) * (v ** 2).sum()
    assert errors.mean() <= bound + 4 * errors.std(ddof=1) / np.sqrt(draws)


class Memory:
    """Per-device state as the trainer keeps it (rows read and written by device)."""

    def __init__(self, n, d):
        self.rows = {}
        self.n, self.d = n, d

    def __call__(self, name):
        return self.rows.setdefault(name, _Rows(self.n, self.d))


class _Rows:
    def __init__(self, n, d):
        self.array = torch.zeros(n, d)

    def __getitem__(self, n):
        return self.array[n].clone()

    def __setitem__(self, n, value):
        self.array[n] = torch.as_tensor(value, dtype=torch.float32)


@pytest.mark.parametrize("compressor", [TopK(TopKOptions(k=3)), ScaledSign()], ids=lambda c: type(c).__name__)
def test_error_feedback_telescopes_sent_plus_memory_is_what_was_computed(compressor):
    d, steps = 30, 25
    memory = Memory(2, d)
    uplink = Uplink(compressor, root_seed=3, device_state=memory)
    rng = np.random.default_rng(0)
    computed, sent = np.zeros(d), np.zeros(d)
    for t in range(steps):
        v = rng.normal(size=(1, d))
        out = uplink.send([1], torch.as_tensor(v, dtype=torch.float32), t)
        if isinstance(compressor, TopK):
            assert int((out != 0).sum()) == 3  # exactly k values go on the air
        computed += v[0].astype(np.float32)
        sent += out[0].numpy()
    left = memory("compression_memory_0")[1].numpy()
    assert np.abs(sent + left - computed).max() < 1e-4 * np.abs(computed).max() * steps  # float32 rounding only
    assert not memory("compression_memory_0").array[0].any()  # the other device kept nothing


def scenario(compression="none", options=None, **over):
    tables = {"seed": 4, "run": {"rounds": 8, "timing_only": True}, "devices": {"count": 10},
              "scheduler": {"name": "uniform", "m": 4},
              "learning": {"model": "mlp", "compression": compression, "compression_options": options or {}}}
    for key, value in over.items():
        tables[key] = {**tables.get(key, {}), **value}
    return from_dict(tables)


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "fedbuff", "concurrency": 4, "buffer": 2}])
def test_the_airtime_of_an_upload_is_that_of_its_encoded_bits(protocol):
    plain = simulate(scenario(protocol=protocol), progress=False).updates
    sparse = simulate(scenario("topk", {"fraction": 0.05}, protocol=protocol), progress=False).updates
    model_bits = model_bits_of(scenario())
    ratio = TopK(TopKOptions(fraction=0.05)).bits(model_bits // 32) / model_bits
    first = min(len(plain), len(sparse), 6)  # the first uploads: the same gains and powers in both runs
    assert np.allclose(sparse.airtime_s.to_numpy()[:first], plain.airtime_s.to_numpy()[:first] * ratio, rtol=1e-12)
    assert sparse.tx_end_s.max() < plain.tx_end_s.max()


def test_compression_is_refused_over_the_air_and_none_is_not():
    with pytest.raises(ConfigError, match=r"^learning.compression = 'sign': link.access = 'aircomp' sends analog"):
        scenario("sign", protocol={"name": "semi_sync"}, link={"access": "aircomp"})
    assert scenario(protocol={"name": "semi_sync"}, link={"access": "aircomp"}).learning.compression == "none"


def test_every_built_in_is_in_the_registry():
    assert set(COMPRESSORS.builtins) == {"none", "float16", "topk", "randk", "qsgd", "sign"}


class Uncompressed(FedAvg):
    """Makes its devices' updates without the trainer's uplink (for the test below)."""

    def local_updates(self, trainer, devices, round_idx):
        return trainer.local_updates(devices, round_idx, upload=False)


def test_an_algorithm_that_bypasses_the_uplink_is_stopped_in_one_line(tmp_path, one_torch_thread):
    sc = scenario("topk", run={"timing_only": False, "rounds": 2}, learning={"algorithm": "test_compression:Uncompressed",
                                                                           "samples_per_device": 40})
    with pytest.raises(Exception, match=r"learning.compression = 'topk': learning.algorithm = "
                                        r"'test_compression:Uncompressed' made its devices' updates without"):
        simulate(sc, tmp_path / "run", progress=False)


@pytest.mark.parametrize("protocol", [{"name": "sync"}, {"name": "fedbuff", "concurrency": 4, "buffer": 2}])
def test_a_run_with_error_feedback_resumes_exactly(interrupted_and_resumed, one_torch_thread, protocol):
    sc = scenario("topk", {"fraction": 0.02}, protocol=protocol,
                  run={"timing_only": False, "rounds": 10, "checkpoint_every": 2, "eval_every_rounds": 5},
                  learning={"model": "logreg", "samples_per_device": 40, "eval_train_samples": 100})
    full, resumed = interrupted_and_resumed(sc, after=5)
    pd.testing.assert_frame_equal(full.rounds.reset_index(drop=True), resumed.rounds.reset_index(drop=True))
    pd.testing.assert_frame_equal(full.evals.reset_index(drop=True), resumed.evals.reset_index(drop=True))
