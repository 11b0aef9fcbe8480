"""One self-overwriting line of progress on stderr, silent when stderr is not a terminal or
when quiet. Results go to stdout or files; this is only for a person watching.

`meter_text` is the one wording of "how far, how fast, how long still" (a percentage and an
ETA where the total is known); `Meter` shows it for any count of steps, `Progress` for
fertility.measure.analyze's (documents, bytes) callback with the corpus's size as the total,
`Stages` for a command made of named stages (fix, extend), each line with the time so far,
and `Waiting` for a stage whose library says nothing until it returns (the time so far only).

Not `rich.progress` (issue #32 asked, unless a measured reason says otherwise): rich's console,
table and progress imports cost ~60 ms and 7 MB a process against #36's 0.8 s / 160 MB budget
for a one-line report, and its cell widths disagree with the terminal's on Indic text
(tests/report/test_cells.py says where); this module is one line of text and a clock.
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the corpus is read by the commands; this module only reads its sizes
    from fertility.corpus import Corpus


def clock(seconds: float) -> str:
    """`1:05`, `1:02:05`: a duration as a person reads it."""
    s = max(0, int(round(seconds)))
    h, m = divmod(s, 3600)
    m, s = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def meter_text(done: float, total: float | None, elapsed: float) -> str:
    """`45%, ETA 0:42` from work done of a total in `elapsed` seconds: the rate so far
    carried to the end. Without a total, or before anything is done, "" (no guess)."""
    if not total or total <= 0 or done <= 0:
        return ""
    left = elapsed * max(total - done, 0) / done
    # never 100% before the end: a total can be an estimate (the size of the files)
    return f"{min(done / total * 100, 99.0):.0f}%, ETA {clock(left)}"


class _ToStderr:
    """Lines for stderr: to the stream given, else to sys.stderr as it is at each write."""

    _stream = None

    @property
    def stream(self):
        """The stream given, or sys.stderr as it is at each write: while a Rust call holds
        descriptor 2, sys.stderr is a stream on the real one (fertility.tokenizers.guard)."""
        return self._stream or sys.stderr


class StatusLine(_ToStderr):
    """Shows the latest `update(text)` at most every `every_s` seconds."""

    def __init__(self, quiet: bool = False, every_s: float = 0.25, stream=None) -> None:
        self._stream = stream
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.every_s = every_s
        self._last = 0.0

    def update(self, text: str, force: bool = False) -> None:
        now = time.monotonic()
        if self.enabled and (force or now - self._last >= self.every_s):
            self._last = now
            self.stream.write("\r\033[K" + text)
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._last:
            self.stream.write("\n")
            self.stream.flush()


class Meter(StatusLine):
    """`what: 45%, ETA 0:42 (450 of 1,000 steps, 12.0 steps/s)` for steps counted to a known
    total (None: the count and the rate only). `done()` ends the line with the time taken."""

    def __init__(
        self, what: str, total: float | None, unit: str = "steps", *, quiet=False, stream=None
    ) -> None:
        super().__init__(quiet, stream=stream)
        self.what, self.total, self.unit = what, total, unit
        self.start = time.perf_counter()

    def __call__(self, n: float, extra: str = "") -> None:
        elapsed = time.perf_counter() - self.start
        of = f" of {self.total:,.0f}" if self.total else ""
        rate = n / max(elapsed, 1e-9)
        head = meter_text(n, self.total, elapsed)
        self.update(
            f"{self.what}: {head + ' (' if head else ''}{n:,.0f}{of} {self.unit}, "
            f"{rate:,.1f} {self.unit}/s{')' if head else ''}{extra}"
        )

    def done(self) -> None:
        """The last line: what was done and how long it took."""
        if self.enabled and self._last:
            self.update(
                f"{self.what}: done in {clock(time.perf_counter() - self.start)}", force=True
            )
        self.close()


class Progress(StatusLine):
    """The `progress(documents, bytes)` callback of fertility.measure.analyze. total_bytes:
    the corpus's size (`corpus_bytes`), for a percentage and an ETA; max_docs: a cap on the
    documents (--max-docs), the other way to know the total."""

    def __init__(
        self,
        what: str,
        *,
        total_bytes: int | None = None,
        max_docs: int | None = None,
        quiet: bool = False,
        stream=None,
    ) -> None:
        super().__init__(quiet, stream=stream)
        self.what = what
        self.total_bytes, self.max_docs = total_bytes, max_docs
        self.start = time.perf_counter()
        self.docs = self.bytes = 0

    @classmethod
    def for_corpus(cls, what: str, corpus: Corpus, *, quiet: bool = False, stream=None) -> Progress:
        """A Progress whose total is the size of `corpus` (see `sized_by`)."""
        progress = cls(what, quiet=quiet, stream=stream)
        progress.sized_by(corpus)
        return progress

    def sized_by(self, corpus: Corpus) -> None:
        """Take the totals from `corpus`, as read with its options: the size of its files
        (`corpus_bytes`) times --sample, and --max-docs. A command whose Corpus is made
        further down (fertility.measure.analyze's `on_corpus`) hands this over."""
        total, sample = corpus_bytes(corpus), corpus.options.sample
        self.total_bytes = int(total * sample) if total is not None and sample else total
        self.max_docs = corpus.options.max_docs

    def __call__(self, docs: int, nbytes: int) -> None:
        self.docs, self.bytes = docs, nbytes
        elapsed = time.perf_counter() - self.start
        rate = nbytes / 1e6 / max(elapsed, 1e-9)
        # the larger of the two fractions: whichever total ends the run first
        known = [(d, t) for d, t in ((nbytes, self.total_bytes), (docs, self.max_docs)) if t]
        d, t = max(known, key=lambda p: p[0] / p[1], default=(0, None))
        head = meter_text(d, t, elapsed)
        of = f" of {self.total_bytes / 1e6:,.1f}" if self.total_bytes else ""
        self.update(
            f"{self.what}: {head + ', ' if head else ''}{nbytes / 1e6:,.1f}{of} MB, "
            f"{docs:,} documents, {rate:,.1f} MB/s"
        )

    def done(self) -> None:
        """The last line: what was measured and how long it took (then a new line)."""
        if self.enabled and self._last:
            self.update(
                f"{self.what}: {self.docs:,} documents, {self.bytes / 1e6:,.1f} MB in "
                f"{clock(time.perf_counter() - self.start)}",
                force=True,
            )
        self.close()


def corpus_bytes(corpus: Corpus) -> int | None:
    """The bytes of text `corpus` will give: the size of its files (as its walk found them:
    no path is resolved again), when every one is uncompressed text (a compressed or Parquet
    file's size says nothing of its text's); None when that is not known."""
    files = corpus.files
    if not files or any(f.compression or f.format == "parquet" for f in files):
        return None
    return sum(f.size for f in files)


class Stages(_ToStderr):
    """The lines of a command made of named stages (fix, extend): each on its own line with
    the time since the start, `[0:42] fix: training ...`; `done(verdict)` ends with the total
    time. Silent when quiet or stderr is not a terminal."""

    def __init__(self, quiet: bool = False, stream=None) -> None:
        self._stream = stream
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            self.stream.write(f"[{clock(time.perf_counter() - self.start)}] {message}\n")
            self.stream.flush()

    def done(self, what: str) -> None:
        if self.enabled:
            self.stream.write(f"{what}: done in {clock(time.perf_counter() - self.start)}\n")
            self.stream.flush()

    # The lines below a stage's, shown where the stages are (and only when they are).

    def corpus(self, what: str, corpus: Corpus) -> Progress:
        """A pass over `corpus`: its share of the corpus's size and an ETA."""
        return Progress.for_corpus(what, corpus, quiet=not self.enabled, stream=self._stream)

    def meter(self, what: str, total: float | None, unit: str) -> Meter:
        return Meter(what, total, unit, quiet=not self.enabled, stream=self._stream)

    def waiting(self, what: str, why: str) -> Waiting:
        return Waiting(what, why, quiet=not self.enabled, stream=self._stream)


def reading(progress: Progress, then: Callable[[int, str], None] | None = None):
    """fertility.corpus.sampling.scan_corpus's `inspect(index, text)` that feeds `progress`
    the documents and the UTF-8 bytes read so far (what analyze's callback counts), then
    calls `then`. `then` itself when the line is not shown: no cost off a terminal."""
    if not progress.enabled:
        return then
    read = [0]

    def inspect(index: int, text: str) -> None:
        read[0] += len(text.encode("utf-8", "surrogatepass"))
        progress(index + 1, read[0])
        if then is not None:
            then(index, text)

    return inspect


def fed(meter: Meter, batches: Iterable[list[str]], then: Waiting) -> Iterator[list[str]]:
    """`batches` of texts, passed on while `meter` counts their characters; when the last
    is taken the meter's line ends and `then` (the trainer's own work) starts."""
    n = 0
    for batch in batches:
        n += sum(map(len, batch))
        meter(n)
        yield batch
    meter.done()
    then.begin()


class Waiting(StatusLine):
    """`what: 0:42 so far (why)`: a stage inside a library that reports no progress (a
    trainer with no callback), so no percentage is possible; the time so far, rewritten
    every second from a thread while the library runs. `with waiting.begin(): ...`, or
    begin() and end(); end() leaves `what: done in 0:42`."""

    def __init__(self, what: str, why: str, *, quiet=False, stream=None) -> None:
        super().__init__(quiet, every_s=0.0, stream=stream)
        self.what, self.why = what, why
        self.start = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _tick(self) -> None:
        while True:
            self.update(
                f"{self.what}: {clock(time.perf_counter() - self.start)} so far ({self.why})"
            )
            if self._stop.wait(1.0):
                return

    def begin(self) -> Waiting:
        self.start = time.perf_counter()
        if self.enabled and self._thread is None:
            # a daemon: a library that never returns must not keep the process alive
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def end(self, finished: bool = True) -> None:
        """Stop the line: `what: done in 0:42` when `finished`, else just a new line."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            if finished:
                self.update(f"{self.what}: done in {clock(time.perf_counter() - self.start)}", True)
            self.close()

    def __enter__(self) -> Waiting:
        """Ends the line on leaving (begin() starts it: here, or later, as `fed` does)."""
        return self

    def __exit__(self, kind, *exc) -> None:
        self.end(finished=kind is None)


_COUNT = re.compile(r"^(?P<stage>.*?)(?P<done>\d[\d,]*)/(?P<total>\d[\d,]*)")


class Timed(StatusLine):
    """A StatusLine for a library's `progress(message)` lines (fertility.eval.run's): each
    message with the time so far, and where it counts `DONE/TOTAL` (`scoring model: 40/120
    windows`), the percentage and the ETA of that stage (timed from its first message)."""

    def __init__(self, quiet: bool = False, stream=None) -> None:
        super().__init__(quiet, stream=stream)
        self.start = time.perf_counter()
        self._stage: tuple[str, float] | None = None

    def update(self, text: str, force: bool = False) -> None:
        now = time.perf_counter()
        m = _COUNT.match(text)
        extra = ""
        if m:
            if self._stage is None or self._stage[0] != m["stage"]:
                self._stage = (m["stage"], now)
            done, total = (int(m[k].replace(",", "")) for k in ("done", "total"))
            extra = meter_text(done, total, now - self._stage[1])
        super().update(
            f"[{clock(now - self.start)}] {text}" + (f" ({extra})" if extra else ""), force
        )
