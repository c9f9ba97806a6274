"""Atomic file writes: write to a temp file in the same directory, fsync, rename.

A reader never sees a half-written file; a crash leaves either the old file or
the new one.  JSONL files that must never hold a duplicate line across resumes
are rewritten whole (``write_jsonl``) or appended through ``append_jsonl``,
which writes each line with a single ``write`` call followed by fsync.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask() & ~0o002  # what open() would give, never world-writable; mkstemp alone gives 0600


def never_world_writable() -> None:
    """Add o+w to this process's umask: every file and directory dw, torch (checkpoints) or W&B
    create follows the user's umask otherwise, but no other user can write into a run store."""
    os.umask(_umask() | 0o002)


def make_temp_dir(parent: str | os.PathLike, prefix: str) -> Path:
    """A new directory in ``parent`` (to be renamed into place whole), with the mode a plain
    mkdir would give under the umask, never world-writable (mkdtemp alone gives 0700)."""
    d = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.chmod(d, 0o777 & ~_umask() & ~0o002)
    return d


def check_creatable(option: str, path: str | os.PathLike) -> None:
    """BadInput (one line, exit 2) unless ``path`` is a folder dw can write: one that exists, or
    that can be created (tried, then removed again folder by folder: nothing is left behind).
    For the folders a user names (``run.dir``, ``--plots``, ``dw export``'s OUT), so that one that
    cannot be (``/proc/x``, a file's child, no permission) is refused before any work starts."""
    from depthwidth.core.errors import bad

    p = Path(path)
    if p.is_dir():
        if not os.access(p, os.W_OK | os.X_OK):
            raise bad(option, str(path), "a folder dw can write (permission denied)")
        return
    if p.exists() or p.is_symlink():
        raise bad(option, str(path), "a folder (created if missing), not a file")
    made, top = [], p
    while not top.exists():
        made.append(top)
        top = top.parent
    try:
        p.mkdir(parents=True)
    except OSError as e:
        raise bad(option, str(path), f"a folder dw can create ({e.strerror or e})") from None
    for d in made:  # deepest first; a folder someone else filled meanwhile stays
        try:
            d.rmdir()
        except OSError:
            break


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text(path: str | os.PathLike, text: str) -> None:
    write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=json_default) + "\n")


def write_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    write_text(path, "".join(json.dumps(r, default=json_default) + "\n" for r in rows))


def append_jsonl(path: str | os.PathLike, rows: Iterable[dict]) -> None:
    """Append lines, whole or not at all; each batch goes out in one write() then fsync, under an
    exclusive flock of the file (appenders take turns; readers never wait).  A write or fsync that
    fails (a full disk: the write stops part-way) takes its part back, so the file ends as it was,
    then raises.  A file whose last line is torn (a writer killed mid-append) gets its newline first,
    so the new lines are never glued to the torn one: readers skip that one line (``read_jsonl``)
    and keep the new.  The lock is what makes "torn" mean a dead writer, never a live one still
    writing its line."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = "".join(json.dumps(r, default=json_default) + "\n" for r in rows)
    if not payload:
        return
    with open(path, "ab", buffering=0) as f:  # unbuffered: nothing left to write at close
        fcntl.flock(f, fcntl.LOCK_EX)  # released when the file is closed
        if torn_tail(path) is not None:
            payload = "\n" + payload
        start = os.fstat(f.fileno()).st_size
        try:
            data = memoryview(payload.encode("utf-8"))
            while data:
                data = data[f.write(data) :]
            os.fsync(f.fileno())
        except OSError:
            try:
                os.ftruncate(f.fileno(), start)  # the lines this call began: none of them stays
            except OSError:
                pass
            raise


def torn_tail(path: str | os.PathLike) -> bytes | None:
    """The bytes after a JSONL file's last newline (its last line cut short: a writer killed
    mid-append), or None when the file ends whole (or is absent, or empty)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            if end == 0:
                return None
            f.seek(end - 1)
            if f.read(1) == b"\n":
                return None
            back = min(end, 1 << 16)
            f.seek(end - back)
            chunk = f.read()
    except OSError:
        return None
    return chunk.rsplit(b"\n", 1)[-1]


def read_jsonl(path: str | os.PathLike, bad: list | None = None) -> list[dict]:
    """The JSON objects of a JSONL file, skipping what is not one: a torn last line (a crash
    mid-append), garbage, bytes that are not UTF-8.  ``bad`` collects the 1-based numbers of
    the lines skipped, for whoever reports them (``dw status``)."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for i, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            row = None
        if isinstance(row, dict):
            rows.append(row)
        elif bad is not None:
            bad.append(i)
    return rows


def json_default(o):
    # numpy scalars and the like
    if hasattr(o, "item"):
        return o.item()
    if hasattr(o, "tolist"):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, os.PathLike):
        return os.fspath(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
