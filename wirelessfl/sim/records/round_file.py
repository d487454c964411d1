"""rounds.csv on disk, for a resume: its header, its first rows read back as the text they were
written as, and whether a checkpoint's length and header can cut it back (checked without reading
the rows before the checkpoint's last)."""
from __future__ import annotations

import csv
import hashlib
import io
from pathlib import Path

from ...files import FileDigest, open_regular

__all__ = ["csv_rows", "header", "rounds_digest_problem", "rounds_file_problem"]


def header(path: Path) -> list[str] | None:
    """The header of a CSV file (None: missing or unreadable)."""
    try:
        with open_regular(path, "r") as fh:  # not a link, a FIFO or a device (None)
            return next(csv.reader(fh), None)
    except (OSError, ValueError, csv.Error):
        return None


def csv_rows(path: Path, count: int) -> list[dict]:
    """The first ``count`` rows of a CSV file as dicts of the text written (empty cells: "")."""
    with open_regular(path, "r") as fh:
        reader = csv.DictReader(fh)
        return [row for _, row in zip(range(count), reader)]


def rounds_file_problem(path: Path, rows: int, columns, size: int) -> str | None:
    """Why rounds.csv cannot be cut back to a checkpoint's ``rows`` rows (None: it can). With the
    checkpoint's header, the file must be at least its ``size`` bytes, end a line there and have
    round ``rows - 1`` on that line (checked without reading the rows before it); with a wider
    header (a column added since), it must hold rounds 0 .. rows - 1."""
    names = header(path)
    if names is None:
        return "rounds.csv is missing or cannot be read"
    if not isinstance(columns, list) or "round" not in names:
        return "rounds.csv has no round column" if "round" not in names else "the checkpoint names no columns"
    where = names.index("round")
    if names == columns:
        try:
            last = _line_ending_at(path, size)
        except OSError as exc:
            return f"rounds.csv cannot be read ({exc.strerror or exc})"
        if last is None:
            return f"rounds.csv is shorter than at the checkpoint ({size} bytes), or does not end a row there"
        if rows == 0:
            return None if last.split(",") == names else "rounds.csv holds rows before the checkpoint's first"
        cells = next(csv.reader([last]), [])
        if len(cells) <= where or cells[where] != str(rows - 1):
            return f"rounds.csv does not hold the checkpoint's {rows} rounds"
        return None
    try:
        kept = [int(row.get("round", -1)) for row in csv_rows(path, rows)]
    except (OSError, ValueError, TypeError, csv.Error):
        return "rounds.csv cannot be read"
    if kept != list(range(rows)):
        return f"rounds.csv holds {len(kept)} rounds, not the checkpoint's first {rows}"
    return None


def _line_ending_at(path: Path, size: int) -> str | None:
    """The line of ``path`` that ends (with its newline) at byte ``size``; None when the file is
    shorter or no line ends there. Read backwards in growing blocks: a row may be long."""
    with open_regular(path) as fh:
        fh.seek(0, 2)
        if fh.tell() < size or size == 0:
            return None
        block = 4096
        while True:
            start = max(size - block, 0)
            fh.seek(start)
            tail = fh.read(size - start)
            if not tail.endswith(b"\n"):
                return None
            cut = tail[:-1].rfind(b"\n")
            if cut >= 0 or start == 0:
                return tail[cut + 1:-1].decode(errors="replace")
            block *= 4


def rounds_digest_problem(digest: FileDigest, rows: int, columns, size: int, sha256) -> str | None:
    """Why rounds.csv is not the file a checkpoint continues, byte for byte (None: it is; call after
    rounds_file_problem). With the checkpoint's header its first ``size`` bytes must have the
    digest ``sha256`` (``digest`` goes on from there); with a wider header (a column added since),
    its first ``rows`` rows written again under the checkpoint's header must."""
    if not isinstance(sha256, str):
        return "the checkpoint has no digest of rounds.csv (written by an earlier version): start the run again"
    if header(digest.path) == columns:
        return digest.verify(size, sha256)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(csv_rows(digest.path, rows))
    if hashlib.sha256(text.getvalue().encode()).hexdigest() != sha256:
        return f"rounds.csv is not the file the checkpoint continues (its first {rows} rows differ)"
    return None
