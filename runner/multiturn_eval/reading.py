"""Reading the files a suite names: bounded in size, never blocking, every problem in words.

A suite file, an ``instructions_file``, a judge's ``rubric_file`` or
``prompt_file``, a ``schema_file`` and a turn's ``files`` are read (or checked)
here, before any agent is called: :func:`file_problem` says why a path is not a
readable regular file within the limit, :func:`read_text` reads one as UTF-8 or
raises ``ValueError`` with the reason (the loader locates it);
:func:`open_binary` opens a JSON Lines file of test cases, which is read as a
stream (line by line, :mod:`multiturn_eval.jsonl_source`) and so has no size limit.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO

MAX_FILE_BYTES = 64 * 1024 * 1024
"""The largest file the loader reads or accepts: a suite, an ``instructions_file``
or a turn's ``files`` entry (64 MiB). A suite of a whole ConvFinQA dev split is
about 20 MB; anything past this cap is a mistake (a log, a data dump, ``/dev/zero``)
that would otherwise eat memory before any check ran."""

FILE_KINDS = (
    (stat.S_ISDIR, "is a directory, not a file"),
    (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
    (stat.S_ISCHR, "is a character device, not a regular file"),
    (stat.S_ISBLK, "is a block device, not a regular file"),
    (stat.S_ISSOCK, "is a socket, not a regular file"),
)


def _too_big(size: int, limit: int) -> str:
    return f"is {size:,} bytes, over the {limit / (1024 * 1024):g} MiB limit"


def _stat_problem(info: os.stat_result, limit: int) -> str | None:
    for test, problem in FILE_KINDS:
        if test(info.st_mode):
            return problem
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    return _too_big(info.st_size, limit) if info.st_size > limit else None


def _os_problem(exc: OSError) -> str:
    if exc.errno == errno.ENOENT:
        return "file not found"
    if exc.errno == errno.ELOOP:
        return "is a loop of symbolic links"
    if exc.errno == errno.EACCES:
        return "cannot read: permission denied"
    if exc.errno == errno.ENOTDIR:
        return "file not found (a part of the path is not a directory)"
    return f"cannot read: {exc.strerror or exc}"


def file_problem(path: Path, limit: int = MAX_FILE_BYTES) -> str | None:
    """Why ``path`` is not a readable regular file within ``limit`` bytes (None: it is)."""
    try:
        info = path.stat()
    except OSError as exc:
        return _os_problem(exc)
    except ValueError:  # an embedded NUL byte
        return "is not a valid path"
    return _stat_problem(info, limit)


def _open_checked(path: Path, limit: int) -> int:
    """A file descriptor of ``path``, opened non-blocking once stat says it is a regular
    file within ``limit`` bytes, and checked again with ``fstat``; ValueError says why not."""
    before = file_problem(path, limit)  # what stat says: no open() of a FIFO or socket
    if before is not None:
        raise ValueError(before)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        opened = FILE_KINDS[0][1] if exc.errno == errno.EISDIR else _os_problem(exc)
        raise ValueError(opened) from None
    except ValueError:
        raise ValueError("is not a valid path") from None
    try:
        problem = _stat_problem(os.fstat(fd), limit)  # the file may have changed since stat
    except OSError as exc:
        os.close(fd)
        raise ValueError(_os_problem(exc)) from None
    if problem is not None:
        os.close(fd)
        raise ValueError(problem)
    return fd


def read_text(path: Path, limit: int = MAX_FILE_BYTES) -> str:
    """A regular file's UTF-8 text, at most ``limit`` bytes; ValueError says why not.

    The path is checked with ``stat`` before it is opened (a FIFO or a socket is
    never opened), opened non-blocking and checked again with ``fstat`` (it may have
    been swapped meanwhile), and read no further than the limit even if it grows,
    so nothing can block the loader or stream into its memory.
    """
    fd = _open_checked(path, limit)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise ValueError(_os_problem(exc)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ValueError(_too_big(len(data), limit) + " (it grew while being read)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(_utf8_problem(data, exc)) from None


def open_binary(path: Path) -> BinaryIO:
    """A regular file opened for reading as a stream, whatever its size (a JSON Lines
    file of test cases); checked as :func:`read_text` checks, ValueError says why not."""
    return os.fdopen(_open_checked(path, sys.maxsize), "rb", buffering=1 << 16)


def _utf8_problem(data: bytes, exc: UnicodeDecodeError) -> str:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "is not UTF-8 text: it is UTF-16 (it starts with a UTF-16 byte-order mark); save it as UTF-8"
    line = data.count(b"\n", 0, exc.start) + 1
    column = (
        len(data[data.rfind(b"\n", 0, exc.start) + 1 : exc.start].decode("utf-8", "replace")) + 1
    )
    return (
        f"is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, column {column} "
        f"({exc.reason})"
    )
