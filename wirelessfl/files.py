"""Writing a run's files safely: never through a symbolic link, whole files atomically (a
temporary file, then a rename), streamed files only by appending.

A symbolic link placed in a run folder (``rounds.csv -> /etc/passwd``) is refused, not followed;
the output folder itself must be a writable folder, checked before anything is written. Every file
and folder the simulator creates or writes goes through the helpers here: folders are made by
:func:`make_folder` (a link where a folder should be is refused), files opened by name are opened
with ``O_NOFOLLOW`` and must be regular files (a FIFO or a device there is refused in one line
instead of hanging the run or writing without end), and files read back for a resume are opened
by :func:`open_regular` the same way. :class:`FileDigest` keeps the running SHA-256 of a file that
grows by appending, so that a checkpoint can hold the digest of every record file it continues.
"""
from __future__ import annotations

import errno
import os
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path

__all__ = ["DamagedFile", "FileDigest", "FolderBusy", "FolderGuard", "FolderLock", "UnsafeOutput", "check_folder", "check_output_folder",
           "make_folder", "open_append", "open_regular", "open_rewrite", "open_scratch_array", "read_table",
           "refuse_links", "replacing", "replacing_path", "truncate_file", "unreadable_file", "unshare", "write_atomic",
           "write_figure"]


class UnsafeOutput(ValueError):
    """An output path is not a writable folder, or a run file is a symbolic link."""


class DamagedFile(ValueError):
    """A file the simulator wrote cannot be read back: truncated, edited, or not what its name says."""


def _refusal(path: Path, problem: str) -> UnsafeOutput:
    """UnsafeOutput "PATH: PROBLEM; ..." with ``problem`` kept as its attribute (for messages of their own)."""
    exc = UnsafeOutput(f"{path}: {problem}; " + ("a run writes its files itself and does not follow links"
                                                 if "symbolic link" in problem else
                                                 "wirelessfl reads and writes regular files only"))
    exc.problem = problem
    return exc


class FolderBusy(UnsafeOutput, RuntimeError):
    """Another process is writing to the folder (a run, a resume or a sweep holds its lock)."""


class FolderLock:
    """An exclusive lock on FOLDER/.lock for as long as the ``with`` block lasts: one writer per run
    or sweep folder. The kernel releases it when the holder dies, even by SIGKILL, so a stale lock
    file never blocks anyone; the holder removes the file as it lets go, so a folder nobody writes
    to holds none. ``who``: what the message calls the other writer."""

    def __init__(self, folder: Path, who: str = "another run"):
        self.path, self.who = Path(folder) / ".lock", who
        self.fh = None

    def __enter__(self) -> "FolderLock":
        for _ in range(100):
            self.fh = os.fdopen(_open_file(self.path, os.O_WRONLY | os.O_CREAT), "w")
            try:
                import fcntl

                fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except ImportError:  # pragma: no cover - not POSIX
                return self
            except OSError:
                self.fh.close()
                raise FolderBusy(f"{self.path.parent}: {self.who} is writing to this folder; wait for it to end") from None
            if self._ours():
                return self
            self.fh.close()  # its holder removed the file between our open and our lock: lock the new one
        raise FolderBusy(f"{self.path.parent}: {self.who} is writing to this folder; wait for it to end")

    def _ours(self) -> bool:
        """Whether the path still names the file this lock holds."""
        try:
            there = os.stat(self.path, follow_symlinks=False)
        except OSError:
            return False
        held = os.fstat(self.fh.fileno())
        return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)

    def __exit__(self, *exc) -> None:
        try:
            if self._ours():  # removed while still held: nobody can lock a file that is going
                os.unlink(self.path)
        except OSError:  # a folder made read-only or removed meanwhile: the lock goes with the close
            pass
        finally:
            self.fh.close()


def read_table(path: Path, columns: tuple[str, ...] = (), **read_csv):
    """A CSV table the simulator wrote, as a pandas DataFrame (empty cells: NaN, nothing else);
    DamagedFile, in one line naming the file, when it cannot be parsed or lacks one of ``columns``."""
    import pandas as pd

    try:
        with open_regular(path, follow=True) as fh:
            table = pd.read_csv(fh, keep_default_na=False, na_values=[""], **read_csv)
    except UnsafeOutput:  # a FIFO, a device: refused as it is, not read
        raise
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
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return "no such file" if isinstance(exc, FileNotFoundError) else f"cannot be read ({exc.strerror or exc})"
    return _not_regular(mode)


def _not_regular(mode: int) -> str | None:
    """What a file of ``mode`` is when it is not a regular file (None: it is one)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
        else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
    return f"is {kind}, not a regular file"


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
        raise _refusal(path, "is a symbolic link")


def _open_file(path: Path, flags: int, follow: bool = False) -> int:
    """``os.open(path, flags)`` (new files with mode 0o644) that never follows a symbolic link (unless
    ``follow``, for reading) and opens regular files only: a FIFO is opened without waiting for a
    writer or reader and then refused, as are devices, sockets and folders (UnsafeOutput, one line)."""
    path = Path(path)
    extra = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow and os.path.islink(path):
            raise _refusal(path, "is a symbolic link") from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO nobody reads, a folder
            try:
                problem = _not_regular(os.stat(path).st_mode)
            except OSError:
                problem = None
            if problem is not None:
                raise _refusal(path, problem) from None
        raise
    try:
        problem = _not_regular(os.fstat(fd).st_mode)
        if problem is not None:
            raise _refusal(path, problem)
        if os.name == "posix":  # back to ordinary blocking reads and writes
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: Path, mode: str = "rb", follow: bool = False):
    """Open ``path`` for reading (``mode`` "rb" or "r") as a regular file: a symbolic link (followed
    when ``follow``), a FIFO, a device or a folder is refused in one line (UnsafeOutput) instead of
    read, so that a file read back never hangs a run or feeds it without end."""
    if mode not in ("r", "rb"):
        raise ValueError(f"open_regular reads: mode {mode!r}")
    fd = _open_file(Path(path), os.O_RDONLY, follow=follow)
    return os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""}))


def unshare(path: Path) -> None:
    """Give ``path`` a file of its own when it is hard-linked elsewhere (more than one name): its
    bytes are copied into a new file beside it that replaces it in one rename, so that a file
    changed in place (appended to, cut back) never changes what another name outside the run
    folder shares. A missing file, a link or anything but a regular file is left to the caller."""
    path = Path(path)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(there.st_mode) or there.st_nlink <= 1:
        return
    with open_regular(path) as src, replacing(path, binary=True) as dst:
        while block := src.read(1 << 20):
            dst.write(block)


def open_append(path: Path):
    """Open an existing ``path`` for appending text, refusing symbolic links and anything but a
    regular file (a hard-linked one gets a file of its own first: :func:`unshare`)."""
    unshare(path)
    return os.fdopen(_open_file(Path(path), os.O_WRONLY | os.O_APPEND), "a", newline="")


def open_rewrite(path: Path, create: bool = True):
    """Open ``path`` for reading and writing in place (binary, at its start; created when missing and
    ``create``), refusing symbolic links and anything but a regular file: for files that a
    checkpoint cuts back and appends to (journals). A hard-linked one gets a file of its own first."""
    unshare(path)
    return os.fdopen(_open_file(Path(path), os.O_RDWR | (os.O_CREAT if create else 0)), "r+b")


def truncate_file(path: Path, size: int) -> None:
    """Cut the regular file ``path`` back to ``size`` bytes (a link or a FIFO there is refused; a
    hard-linked one gets a file of its own first)."""
    unshare(path)
    fd = _open_file(Path(path), os.O_WRONLY)
    try:
        os.ftruncate(fd, size)
    finally:
        os.close(fd)


def make_folder(path: Path, below: Path | None = None, theirs: bool = False) -> Path:
    """Create the folder ``path`` (and its missing parents) unless it is one already; a symbolic link,
    or something other than a folder, at ``path`` or at any folder between ``below`` and ``path``
    is refused in one line (UnsafeOutput), so that nothing is ever written through a link planted
    where the simulator keeps its folders. ``below``: a folder the user chose (it may itself be a
    link); default: only ``path`` itself and the parents this call creates are checked. ``theirs``:
    ``path`` is a folder the user named (--out): a link to a folder there is theirs to choose."""
    path = Path(path)
    if theirs and path.is_dir():
        return path
    if below is not None and Path(below) not in path.parents:
        below = None
    chain = [path]
    for parent in path.parents:
        if parent == below if below is not None else os.path.lexists(parent):
            break
        chain.append(parent)
    for folder in reversed(chain):
        check_folder(folder)
        try:
            folder.mkdir()
        except FileExistsError:  # made meanwhile: a folder is fine, anything else is not
            check_folder(folder)
        except OSError as exc:  # a file system that refuses it (read-only, /proc): one line naming it
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):  # a full disk is not the path's fault
                raise
            raise UnsafeOutput(f"{folder}: cannot be made a folder ({exc.strerror or exc})") from None
    return path


class FolderGuard:
    """A run folder as it was when the run began (its device and inode, a link the user chose
    followed): ``check`` refuses, in one line, a folder swapped for a link or another folder while
    the run goes, before anything more is written by name in it (checkpoints, journals, the
    summary), so that nothing lands outside it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.identity = self._identity()

    def _identity(self):
        try:
            there = os.stat(self.path)
        except OSError:
            return None
        return there.st_dev, there.st_ino

    def check(self) -> None:
        if self._identity() != self.identity:
            raise UnsafeOutput(f"{self.path}: was replaced while the run was going (by a symbolic link or another "
                               "folder); nothing more is written there, so that nothing lands outside it")


def check_folder(path: Path) -> None:
    """UnsafeOutput, in one line naming ``path``, when it is a symbolic link or exists and is not a
    folder: a folder the simulator keeps under one the user chose (a variant's run, a sweep's runs),
    checked before anything is written into it. Creates nothing."""
    path = Path(path)
    if path.is_symlink():
        raise UnsafeOutput(f"{path}: is a symbolic link; wirelessfl makes its folders itself and does not follow links")
    if os.path.lexists(path) and not path.is_dir():
        raise UnsafeOutput(f"{path}: is a file, where wirelessfl keeps a folder")


def refuse_links(folder: Path, names) -> None:
    """UnsafeOutput, in one line, for the first of ``folder/NAME`` that is a symbolic link or, when
    it exists, not a regular file: checked before a run, a resume or a sweep writes anything."""
    for name in names:
        path = Path(folder) / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        problem = "is a symbolic link" if stat.S_ISLNK(mode) else _not_regular(mode)
        if problem is not None:
            raise _refusal(path, problem)


def open_scratch_array(folder: Path, name: str, dtype, shape: tuple[int, ...]):
    """A new zero-filled numpy array memory-mapped in a scratch file of ``folder`` that has no name:
    created exclusively under a fresh name and unlinked at once, so that no link planted in the
    folder is ever written through, nothing in the folder changes, and the kernel frees its space
    when the process ends, even by SIGKILL (the array lives while it is mapped). ``name``: a hint
    for the moment it has a name."""
    import numpy as np

    fd, tmp = tempfile.mkstemp(dir=Path(folder), prefix=f".{name}.", suffix=".scratch")
    os.unlink(tmp)
    with os.fdopen(fd, "r+b") as fh:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if not nbytes:
            return np.zeros(shape, dtype=dtype)
        os.ftruncate(fd, nbytes)  # sparse: zeros, and disk is used only where rows are written
        return np.memmap(fh, dtype=dtype, mode="r+", shape=tuple(shape))


class FileDigest:
    """The running SHA-256 of a file that grows by appending: ``advance`` hashes what was appended
    since the last call (read back from the file, so the writer is not slowed down), and a
    checkpoint stores ``state()``, the length and digest of the file at that point. A checkpoint's
    cost stays that of what was written since the previous one, whatever the file's length; a
    resume hashes the file's prefix once (``verify``) and goes on from there."""

    BLOCK = 1 << 20

    def __init__(self, path: Path | None):
        import hashlib

        self.path, self.bytes, self._hash = path, 0, hashlib.sha256()

    def restart(self) -> None:
        """The file was written again from its start: hash it all at the next ``advance``."""
        import hashlib

        self.bytes, self._hash = 0, hashlib.sha256()

    def _feed(self, fh, size: int) -> int:
        done = 0
        while done < size:
            block = fh.read(min(self.BLOCK, size - done))
            if not block:
                break
            self._hash.update(block)
            done += len(block)
        return done

    def advance(self, size: int) -> dict:
        """Hash the file up to ``size`` bytes (its length now; flushed) and return ``state()``."""
        if self.path is not None and size > self.bytes:
            with open_regular(self.path) as fh:
                fh.seek(self.bytes)
                self.bytes += self._feed(fh, size - self.bytes)
        return self.state()

    def state(self) -> dict:
        return {"bytes": self.bytes, "sha256": self._hash.hexdigest()}

    def continues(self, size: int, sha256) -> str | None:
        """Why an appended file cannot continue from a checkpoint that saw its first ``size`` bytes
        with digest ``sha256`` (None: it can): a link, missing, shorter, or other bytes."""
        if self.path.is_symlink():
            return f"{self.path.name} is a symbolic link"
        try:
            length = self.path.stat().st_size
        except OSError:
            return f"{self.path.name} is missing"
        if length < size:
            return f"{self.path.name} is shorter ({length} bytes) than at the checkpoint ({size} bytes)"
        return self.verify(size, sha256)  # the same bytes, not only as many

    def verify(self, size: int, sha256) -> str | None:
        """Why the file's first ``size`` bytes are not the ones whose digest is ``sha256`` (None:
        they are, and hashing goes on from there). Reads the file once; touches nothing."""
        import hashlib

        self.restart()
        if not isinstance(sha256, str):
            return f"the checkpoint has no digest of {self.path.name} (written by an earlier version)"
        try:
            with open_regular(self.path) as fh:
                read = self._feed(fh, size)
        except UnsafeOutput as exc:
            return f"{self.path.name} {exc.problem}"
        except OSError as exc:
            return f"{self.path.name} cannot be read ({exc.strerror or exc})"
        if read < size:
            self.restart()
            return f"{self.path.name} is shorter ({read} bytes) than at the checkpoint ({size} bytes)"
        if self._hash.hexdigest() != sha256:
            self.restart()
            return f"{self.path.name} is not the file the checkpoint continues (its first {size} bytes differ)"
        self.bytes = size
        return None


@contextmanager
def replacing_path(path: Path):
    """Yield a fresh temporary path beside ``path`` for a writer that needs a file name (HDF5); when
    the block ends it replaces ``path`` in one rename. The name is unique and created exclusively, so
    two writers never share it and no link placed there is followed; on any failure (a full disk) it
    is removed and ``path`` is left as it was."""
    path = Path(path)
    _refuse_link(path)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # a full disk, a read-only folder: name the file meant, not the scratch one
        raise OSError(exc.errno, exc.strerror, str(path)) from None
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
