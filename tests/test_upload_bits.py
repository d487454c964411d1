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


def test_a_checkpoint_from_before_the_bits_column_is_refused_not_appended_to(tmp_path, monkeypatch):
    """A checkpoint whose records know no bits (as an earlier version wrote them) would append rows one
    column longer than its updates.csv's header: the resume is refused, the folder left as it was."""
    import fakes
    from wirelessfl.experiments.run import resume
    from wirelessfl.sim.records import recorder as records
    from wirelessfl.sim.run.checkpoint import ResumeError

    real = records.Recorder.state_dict

    def without_bits(self):
        state = real(self)
        state["update_stats"] = {k: v for k, v in state["update_stats"].items() if k != "bits"}
        return state

    data = scenario("fedbuff")
    data["run"].update(rounds=8, checkpoint_every=2)
    monkeypatch.setattr(records.Recorder, "state_dict", without_bits)
    fakes.interrupted(from_dict(data), tmp_path / "run", monkeypatch, after=5)
    monkeypatch.setattr(records.Recorder, "state_dict", real)
    files = {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()}
    with pytest.raises(ResumeError, match="updates.csv has no bits column"):
        resume(tmp_path / "run", progress=False)
    assert {p.name: p.read_bytes() for p in (tmp_path / "run").iterdir() if p.is_file()} == files
