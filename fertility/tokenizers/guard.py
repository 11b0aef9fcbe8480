"""Rust library panics as one-line errors naming the tokenizer file.

tokenizers and tiktoken are Rust. A panic inside them reaches Python as pyo3's
``PanicException``, which derives from BaseException (not Exception), after Rust's panic hook
has written its message to file descriptor 2, once from every thread that panicked (with
``RUST_BACKTRACE=1``, a backtrace each: 110 lines for one Tekken pattern). Known causes:

- Oniguruma's retry limit on a backtracking ``Split`` regex of a tokenizer.json
  ("retry-limit-in-match over");
- fancy-regex's backtrack limit on a tiktoken or Tekken split pattern
  ("BacktrackLimitExceeded");
- a tiktoken split pattern that matches the empty string at some place in the text (an empty
  piece; the load-time probe in fertility.tokenizers.patterns catches the usual ones).

`rust_call(where, library)` wraps the calls into such a library that load a tokenizer or
first meet a text (every encode): a panic becomes
``TokenizerError("<where>: <library> panicked ...")``, which the CLI prints as one line with
exit 2, and which a measuring worker process hands to its parent like any other error. While
the call runs, descriptor 2 is sent into a temporary file: what was written there is copied
back unchanged when no panic happened (and dropped when one did; the TokenizerError says what
happened). That costs a few system calls (about 10 us) per call, which is per batch on the
measuring path, not per document or token. Calls from several threads share one redirection
(the first to enter starts it, the last to leave ends it), during which Python's own writes
to sys.stderr go to the real stderr (`_Stderr`). The per-document calls on text
that was encoded already (the pre-tokenizer, decoding, the normaliser) only turn a panic into
the same error (`reraise_panic`, free when nothing goes wrong).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
import threading
from typing import IO

from fertility.errors import TokenizerError, one_line


def is_panic(exc: BaseException) -> bool:
    """A pyo3 ``PanicException`` (each Rust extension has its own class of that name)."""
    return any(c.__name__ == "PanicException" for c in type(exc).__mro__)


_BACKTRACKING = ("retry-limit-in-match", "BacktrackLimit", "backtrack limit")


def panic_error(where, library: str, exc: BaseException) -> TokenizerError:
    """The one-line TokenizerError for a panic of `library` while using the tokenizer `where`."""
    said = one_line(exc, 160)
    if any(word in said for word in _BACKTRACKING):
        hint = ": its split pattern backtracks catastrophically on this text; simplify it"
    elif library == "tiktoken" and "slice of length 0" in said:  # BPE of an empty piece
        hint = ": its split pattern matches the empty string in this text"
    else:
        hint = " (a tokenizer this library cannot run)"
    return TokenizerError(f"{where}: {library} panicked ({said}){hint}")


class _Stderr:
    """Descriptor 2 sent into a temporary file while any Rust call runs (reference-counted),
    Python's own writes to sys.stderr going on to the real stderr meanwhile.

    The pass encodes on several threads at once (fertility.threads.encoding_threads), so
    some call is nearly always running: a 25 MB report left the redirection 10 times in
    10 s. Held back with the Rust library's writes, the progress line and warnings came in
    bursts seconds apart. So while redirected, sys.stderr is a stream on `real`, a copy of
    the descriptor 2 the process had; only what is written to the descriptor itself (Rust's
    panic hook) is held. `real` is made once and kept, so a thread still holding that
    stream never writes into a descriptor number reused by another file; it is made again
    only where descriptor 2 was pointed elsewhere between calls (pytest's capfd)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.redirected = False
        self.real: int | None = None  # a copy of descriptor 2 as it was outside the calls
        self.real_id: tuple[int, int] | None = None  # what it points to (device, inode)
        self.through: IO[str] | None = None  # a text stream on `real`
        self.python: IO[str] | None = None  # sys.stderr as it was, while `through` stands in
        self.file: IO[bytes] | None = None
        self.panicked = False

    def enter(self) -> None:
        with self.lock:
            self.depth += 1
            if self.depth > 1:
                return
            try:
                _flush()  # what Python already wrote goes out before the redirection
                if self.file is None:
                    self.file = tempfile.TemporaryFile()
                self._keep_real()
                os.dup2(self.file.fileno(), 2)
                self.redirected = True
            except OSError:  # no descriptor 2, no temporary folder: run without it
                self.redirected = False
                return
            self._python_through()

    def _keep_real(self) -> None:
        st = os.fstat(2)
        if self.real is not None and self.real_id == (st.st_dev, st.st_ino):
            return
        if self.real is not None:
            os.close(self.real)
            self.real = self.through = None
        self.real = os.dup(2)
        self.real_id = (st.st_dev, st.st_ino)

    def _python_through(self) -> None:
        """sys.stderr on `real` where it writes to descriptor 2 (not where a test or a
        caller replaced it with a stream of its own)."""
        stream = sys.stderr
        try:
            plain = stream is not None and stream.fileno() == 2
        except (AttributeError, OSError, ValueError):  # no descriptor: io.UnsupportedOperation
            plain = False
        if not plain or self.real is None:
            return
        if self.through is None:
            raw = io.FileIO(self.real, "w", closefd=False)
            encoding, errors = getattr(stream, "encoding", None), getattr(stream, "errors", None)
            self.through = io.TextIOWrapper(
                raw, encoding=encoding, errors=errors, line_buffering=True, write_through=True
            )
        self.python, sys.stderr = stream, self.through

    def leave(self, panicked: bool) -> None:
        with self.lock:
            self.panicked = self.panicked or panicked
            self.depth -= 1
            if self.depth > 0 or not self.redirected:
                if self.depth == 0:
                    self.panicked = False
                return
            if self.python is not None:
                if sys.stderr is self.through:
                    sys.stderr = self.python
                self.python = None
            _flush()
            drop, self.panicked = self.panicked, False
            self.redirected = False
            if self.real is not None:
                os.dup2(self.real, 2)
            if self.file is None:  # (never: it was made before descriptor 2 was sent there)
                return
            fd = self.file.fileno()
            size = os.lseek(fd, 0, os.SEEK_CUR)
            if not size:
                return
            os.lseek(fd, 0, os.SEEK_SET)
            data = b""
            while not drop and len(data) < size and (chunk := os.read(fd, size - len(data))):
                data += chunk
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            with contextlib.suppress(OSError):
                while data:
                    data = data[os.write(2, data) :]


def _flush() -> None:
    for stream in (sys.stderr, sys.__stderr__):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.flush()


_STDERR = _Stderr()


class rust_call:  # noqa: N801  (used as a function: `with rust_call(path, "tokenizers"):`)
    """Run a call into `library` (tokenizers, tiktoken) for the tokenizer `where` (its file or
    spec): a panic becomes a one-line TokenizerError, and Rust's panic messages stay off
    stderr. For the calls that first meet a text (encoding) and for loading."""

    __slots__ = ("where", "library")

    def __init__(self, where, library: str) -> None:
        self.where, self.library = where, library

    def __enter__(self) -> None:
        _STDERR.enter()

    def __exit__(self, kind, exc, tb) -> None:
        panicked = exc is not None and is_panic(exc)
        _STDERR.leave(panicked)
        if panicked:
            raise panic_error(self.where, self.library, exc) from None


def reraise_panic(exc: BaseException, where, library: str) -> None:
    """Raise the one-line TokenizerError when `exc` is a panic (the caller re-raises anything
    else). For per-document calls on text the library has already encoded once (its
    pre-tokenizer, decoding, the normaliser), which cost nothing more this way: a panic
    there is unlikely after the encode went through, and its stderr lines are not held."""
    if is_panic(exc):
        raise panic_error(where, library, exc) from None
