"""updates.csv's ``bits`` and summary.json's ``mean_upload_bits`` (issue 61, item 4): an upload's size
on the air, the encoder's output under compression, beside the model's own ``model_bits``."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from wirelessfl import simulate
from wirelessfl.config import from_dict


def scenario(protocol: str, compression: str = "none") -> dict:
    options = {"sync": {}, "semi_sync": {}, "fedbuff": {"concurrency": 3, "buffer": 2}}[protocol]
    return {"seed": 2, "run": {"rounds": 3, "timing_only": True}, "devices": {"count": 6},
            "link": {"model_bits": 10000}, "learning": {"compression": compression},
            "protocol": {"name": protocol, **options}}


@pytest.mark.parametrize("protocol", ["sync", "semi_sync", "fedbuff"])
def test_each_upload_s_bits_are_what_its_encoder_wrote(tmp_path, protocol):
    """float16 of a 10,000-bit model: ceil(10000 / 32) = 313 entries of 16 bits = 5,008 bits an upload,
    on disk and in memory alike; the summary keeps model_bits = 10,000 and averages the uploads'."""
    res = simulate(from_dict(scenario(protocol, "float16")), tmp_path / "run", progress=False)
    on_disk = pd.read_csv(tmp_path / "run" / "updates.csv")
    assert len(on_disk) == res.summary["uploads"] > 0
    assert (on_disk["bits"] == 5008).all()
    assert on_disk.columns.tolist().index("bits") == on_disk.columns.tolist().index("attempts") + 1
    assert res.summary["model_bits"] == 10000 and res.summary["mean_upload_bits"] == 5008.0
    in_memory = simulate(from_dict(scenario(protocol, "float16")), progress=False).updates
    assert (in_memory["bits"] == 5008).all() and len(in_memory) == len(on_disk)


def test_without_compression_an_upload_is_the_model():
    res = simulate(from_dict(scenario("sync")), progress=False)
    assert (res.updates["bits"] == 10000).all() and res.summary["mean_upload_bits"] == 10000.0


def test_mean_upload_bits_is_the_mean_of_the_column_where_bits_ride_on_the_upload(tmp_path):
    """DivFL's devices send a refreshed gradient with their model (Decision.traffic.piggyback_bits):
    the uploads carry more than model_bits, and the summary's mean is updates.csv's."""
    data = {"seed": 3, "run": {"rounds": 2, "timing_only": True}, "devices": {"count": 6},
            "link": {"model_bits": 10000}, "scheduler": {"name": "divfl", "kappa": 2}}
    res = simulate(from_dict(data), tmp_path / "run", progress=False)
    bits = pd.read_csv(tmp_path / "run" / "updates.csv")["bits"]
    assert (bits > 10000).any()
    assert res.summary["mean_upload_bits"] == pytest.approx(float(np.mean(bits)), rel=1e-12)
