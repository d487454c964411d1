"""A resume verifies what it continues: the checkpoint carries the digest of what it holds, the
per-device state's journals and the record files are checked against digests the checkpoint
holds (not only their lengths). A damaged or foreign file is a one-line error naming it, exit
status 2, and the run folder is left as it was; a sound one resumes to the uninterrupted records."""
from __future__ import annotations

import hashlib
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest

from fakes import interrupted
from wirelessfl import cli
from wirelessfl.config import from_dict
from wirelessfl.experiments.run import simulate

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def scenario(seed: int = 4, **run):
    return from_dict({
        "name": "s", "seed": seed, "run": {"rounds": 6, "eval_every_rounds": 2, "checkpoint_every": 2, **run},
        "devices": {"count": 8}, "scheduler": {"name": "uniform", "m": 3},
        "learning": {"algorithm": "scaffold", "model": "logreg", "samples_per_device": 20, "local_steps": 1,
                     "eval_train_samples": 80}})


def tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink()
            else f"link -> {os.readlink(p)}" if p.is_symlink() else "folder" for p in sorted(root.rglob("*"))}


def resume_cli(run: Path) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.main(["run", "--resume", str(run), "--no-progress"])
    return code, err.getvalue()


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """cut: stopped in its 4th round (a checkpoint of round 2, rows of 3 rounds on disk); other: the
    whole run of another seed, whose files are longer."""
    interrupted(scenario(), tmp_path / "cut", monkeypatch, after=3)
    (tmp_path / "cut" / "summary.json").unlink()  # as after kill -9
    simulate(scenario(seed=9), tmp_path / "other", progress=False)
    return tmp_path / "cut", tmp_path / "other"


def assert_refused(run: Path, names: str) -> str:
    before = tree(run.parent)
    code, err = resume_cli(run)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert names in lines[0], err
    assert tree(run.parent) == before  # the folder is left as it was
    return lines[0]


def member_data(path: Path, suffix: str) -> tuple[int, int]:
    """Where the bytes of the largest zip member whose name ends with ``suffix`` lie in ``path``."""
    with zipfile.ZipFile(path) as zf:
        info = max((i for i in zf.infolist() if i.filename.endswith(suffix) or suffix == ""),
                   key=lambda i: i.file_size)
    with open(path, "rb") as fh:
        fh.seek(info.header_offset + 26)
        name_len, extra_len = np.frombuffer(fh.read(4), dtype="<u2")
    return info.header_offset + 30 + int(name_len) + int(extra_len), info.file_size


@pytest.mark.parametrize("where", ["a tensor", "the pickle"])
def test_a_byte_changed_in_the_checkpoint_is_refused(runs, where):
    cut, _ = runs
    path = cut / "checkpoint.pt"
    start, size = member_data(path, "data.pkl" if where == "the pickle" else "")
    data = bytearray(path.read_bytes())
    if where == "a tensor":
        data[start + size // 2] ^= 0x01  # the lowest bit of one number of the largest tensor
    else:  # the last bit of the wall time so far (a float nothing else checks): still a valid pickle
        pickle = bytes(data[start:start + size])
        at = pickle.index(b"G", pickle.index(b"wall_time_s"))  # BINFLOAT: "G" and 8 bytes, big-endian
        data[start + at + 8] ^= 0x01
    path.write_bytes(bytes(data))
    assert "does not match its checksum" in assert_refused(cut, str(path))  # it loads: the digest tells


def test_a_journal_row_changed_to_another_valid_device_is_refused(runs):
    cut, _ = runs
    journal = cut / "device_state" / "scaffold_c.g0.journal"
    data = bytearray(journal.read_bytes())
    count = int(np.frombuffer(bytes(data[:8]), dtype="<i8")[0])
    rows = np.frombuffer(bytes(data[8:8 + 8 * count]), dtype="<i8").copy()
    rows[0] = next(n for n in range(8) if n not in rows)  # another device, which was never written
    data[8:8 + 8 * count] = rows.astype("<i8").tobytes()
    journal.write_bytes(bytes(data))
    assert "damaged" in assert_refused(cut, str(journal))


@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null"])
def test_a_journal_replaced_by_a_device_or_a_link_to_one_is_refused(runs, target):
    cut, _ = runs
    journal = cut / "device_state" / "scaffold_c.g0.journal"
    journal.unlink()
    journal.symlink_to(target)
    assert_refused(cut, str(journal))


@pytest.mark.parametrize("name", ["updates.csv", "rounds.csv"])
def test_another_run_s_longer_records_are_refused_not_cut_and_mixed_in(runs, name):
    cut, other = runs
    assert (other / name).stat().st_size > (cut / name).stat().st_size
    (cut / name).write_bytes((other / name).read_bytes())
    assert_refused(cut, name)


def test_another_run_s_per_device_arrays_are_refused(runs):
    cut, other = runs
    (cut / "decisions.h5").write_bytes((other / "decisions.h5").read_bytes())
    assert_refused(cut, "decisions.h5")


@pytest.mark.parametrize("name", ["updates.csv", "rounds.csv"])
def test_a_row_edited_before_the_checkpoint_s_length_is_refused(runs, name):
    """The same length, the same rows and columns, one cell changed in the first row: only the
    digest tells."""
    cut, _ = runs
    path = cut / name
    lines = path.read_bytes().decode().split("\n")  # rounds.csv ends its lines with \r\n: kept as they are
    cells = lines[1].split(",")
    column = lines[0].split(",").index("outcome" if name == "updates.csv" else "t_end")
    cells[column] = "offline" if name == "updates.csv" else cells[column][:-1] + str((int(cells[column][-1]) + 1) % 10)
    lines[1] = ",".join(cells)
    edited = "\n".join(lines).encode()
    assert len(edited) == path.stat().st_size and edited != path.read_bytes()
    path.write_bytes(edited)
    assert "is not the file the checkpoint continues" in assert_refused(cut, name)


def test_a_sound_folder_resumes_to_the_uninterrupted_records(runs, tmp_path):
    cut, _ = runs
    code, err = resume_cli(cut)
    assert code == 0, err
    simulate(scenario(), tmp_path / "full", progress=False)
    for name in ("rounds.csv", "evals.csv", "updates.csv", "devices.csv"):
        assert (cut / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name
    assert not (cut / "device_state").exists() and not (cut / "checkpoint.pt").exists()


def test_a_checkpoint_s_digests_cost_what_was_written_since_the_previous_one(tmp_path, monkeypatch):
    """The records' digests are kept as the files grow: a checkpoint reads back only the rows since
    the previous one (not the whole file), so its cost does not grow with the run."""
    from wirelessfl import files

    read = []
    real = files.FileDigest._feed

    def counted(self, fh, size):
        read.append(size)
        return real(self, fh, size)

    monkeypatch.setattr(files.FileDigest, "_feed", counted)
    sc = from_dict({"seed": 2, "run": {"rounds": 400, "timing_only": True, "checkpoint_every": 20},
                    "devices": {"count": 20}, "link": {"model_bits": 10000}, "scheduler": {"name": "uniform", "m": 4}})
    simulate(sc, tmp_path / "run", progress=False)
    per_checkpoint = [sum(read[i:i + 2]) for i in range(0, len(read), 2)]  # rounds.csv and updates.csv
    assert len(per_checkpoint) == 400 // 20
    assert max(per_checkpoint[1:]) < 1.5 * min(per_checkpoint[1:])  # flat: the rows of 20 rounds each time


KILLED = '''
name = "s"
seed = 6
[run]
rounds = 300
eval_every_rounds = 25
checkpoint_every = 5
[devices]
count = 20
[scheduler]
name = "uniform"
m = 4
[learning]
algorithm = "scaffold"
model = "logreg"
samples_per_device = 20
local_steps = 1
eval_train_samples = 80
'''


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_from_its_journals_to_the_uninterrupted_files(tmp_path):
    """SCAFFOLD with its control variates memory-mapped (a scratch file without a name) and
    journalled: kill -9 mid-run, then resume: the records equal an uninterrupted run's, byte for byte,
    and the killed run left no scratch file behind."""
    import signal
    import subprocess
    import sys
    import time

    (tmp_path / "s.toml").write_text(KILLED)
    mapped = ("import runpy, sys; import wirelessfl.learning.device_state as d; d.MEMMAP_BYTES = 0; "
              "sys.argv = ['wirelessfl', *sys.argv[1:]]; runpy.run_module('wirelessfl.cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", mapped, "run", "s.toml", "--out", "out", "--no-progress"],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = tmp_path / "out" / "s"
    deadline = time.time() + 120
    while time.time() < deadline and not (run / "device_state" / "scaffold_c.g0.journal").exists():
        time.sleep(0.02)
    time.sleep(0.1)  # a checkpoint or two more
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (run / "checkpoint.pt").exists() and not (run / "summary.json").exists()
    assert [p.name for p in (run / "device_state").iterdir() if not p.name.endswith(".journal")] == []
    done = subprocess.run([sys.executable, "-c", mapped, "run", "--resume", "out", "--no-progress"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    simulate(from_dict(__import__("tomllib").loads(KILLED)), tmp_path / "full", progress=False)
    for name in ("rounds.csv", "evals.csv", "updates.csv", "devices.csv"):
        assert (run / name).read_bytes() == (tmp_path / "full" / name).read_bytes(), name
