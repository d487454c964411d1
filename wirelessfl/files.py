"""Writing a run's files safely: never through a symbolic link, whole files atomically (a
temporary file, then a rename), streamed files only by appending.

A symbolic link placed in a run folder (``rounds.csv -> /etc/passwd``) is refused, not followed;
the output folder itself must be a writable folder, checked before anything is written.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DamagedFile", "FolderBusy", "FolderLock", "UnsafeOutput", "check_output_folder", "open_append", "read_table",
           "replacing", "replacing_path", "unreadable_file", "write_atomic", "write_figure"]


class UnsafeOutput(ValueError):
    """An output path is not a writable folder, or a run file is a symbolic link."""


class DamagedFile(ValueError):
    """A file the simulator wrote cannot be read back: truncated, edited, or not what its name says."""


class FolderBusy(UnsafeOutput, RuntimeError):
    """Another process is writing to the folder (a run, a resume or a sweep holds its lock)."""


class FolderLock:
    """An exclusive lock on FOLDER/.lock for as long as the ``with`` block lasts: one writer per run
    or sweep folder. The kernel releases it when the holder dies, even by SIGKILL, so a stale lock
    file never blocks anyone. ``who``: what the message calls the other writer."""

    def __init__(self, folder: Path, who: str = "another run"):
        self.path, self.who = Path(folder) / ".lock", who
        self.fh = None

    def __enter__(self) -> "FolderLock":
        _refuse_link(self.path)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        self.fh = os.fdopen(fd, "w")
        try:
            import fcntl

            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        except OSError:
            self.fh.close()
            raise FolderBusy(f"{self.path.parent}: {self.who} is writing to this folder; wait for it to end") from None
        return self

    def __exit__(self, *exc) -> None:
        self.fh.close()


def read_table(path: Path, columns: tuple[str, ...] = (), **read_csv):
    """A CSV table the simulator wrote, as a pandas DataFrame (empty cells: NaN, nothing else);
    DamagedFile, in one line naming the file, when it cannot be parsed or lacks one of ``columns``."""
    import pandas as pd

    try:
        table = pd.read_csv(path, keep_default_na=False, na_values=[""], **read_csv)
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' ParserError is a ValueError
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DamagedFile(f"{path}: damaged, not the table that wirelessfl wrote ({reason})") from None
    missing = [c for c in columns if c not in table]
    if missing:
        raise DamagedFile(f"{path}: damaged: it has no column {missing[0]!r}")
    return table


def unreadable_file(path: Path) -> str | None:
    """Why ``path`` cannot be read as a data file (None: it can): missing, a folder, or not a regular
    file. A FIFO waits for a writer forever and a device such as /dev/zero never ends, so neither is
    opened; a link to a regular file is fine."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "no such file" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
            else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
        return f"is {kind}, not a regular file"
    return None


def check_output_folder(path: Path, what: str = "--out") -> None:
    """UnsafeOutput unless ``path`` is a folder (or can be made one) that this process may write."""
    path = Path(path)
    try:
        if path.is_symlink() and not path.resolve().is_dir():
            raise UnsafeOutput(f"{what} {path}: a symbolic link to something that is not a folder")
        if path.exists() and not path.is_dir():
            raise UnsafeOutput(f"{what} {path}: is a file, not a folder")
        existing = path
        while not existing.exists():
            existing = existing.parent
        if not existing.is_dir():
            raise UnsafeOutput(f"{what} {path}: {existing} is a file, not a folder")
        if not os.access(existing, os.W_OK | os.X_OK):
            raise UnsafeOutput(f"{what} {path}: {existing} is not writable")
    except OSError as exc:  # a name too long, a loop of links
        raise UnsafeOutput(f"{what} {path}: not a usable folder ({exc.strerror or exc})") from None


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise UnsafeOutput(f"{path}: is a symbolic link; a run writes its files itself and does not follow links")


def open_append(path: Path):
    """Open an existing ``path`` for appending text, refusing symbolic links."""
    path = Path(path)
    _refuse_link(path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    return os.fdopen(fd, "a", newline="")


@contextmanager
def replacing_path(path: Path):
    """Yield a fresh temporary path beside ``path`` for a writer that needs a file name (HDF5); when
    the block ends it replaces ``path`` in one rename. The name is unique and created exclusively, so
    two writers never share it and no link placed there is followed; on any failure (a full disk) it
    is removed and ``path`` is left as it was."""
    path = Path(path)
    _refuse_link(path)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o644)  # as an ordinary file, not mkstemp's owner-only mode
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None:  # a full disk: say which file it hit
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


@contextmanager
def replacing(path: Path, binary: bool = False):
    """Yield a file to write ``path``'s new content into; a reader sees the old file or the whole
    new one (see :func:`replacing_path`; the data are synced before the rename)."""
    with replacing_path(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
        with os.fdopen(fd, "wb" if binary else "w", newline=None if binary else "") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())


def write_figure(fig, path: Path, **savefig) -> Path:
    """Save a matplotlib figure as ``path`` (format from its suffix) the way every file is written:
    whole or not at all, never through a link planted there."""
    path = Path(path)
    with replacing(path, binary=True) as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or "png", **savefig)
    return path


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace ``path`` with ``data`` atomically (see :func:`replacing`)."""
    with replacing(path, binary=True) as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
