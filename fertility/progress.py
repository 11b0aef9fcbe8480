"""One self-overwriting line of progress on stderr, silent when stderr is not a terminal or
when quiet. Results go to stdout or files; this is only for a person watching."""

from __future__ import annotations

import sys
import time


class StatusLine:
    """Shows the latest `update(text)` at most every `every_s` seconds."""

    def __init__(self, quiet: bool = False, every_s: float = 0.25, stream=None) -> None:
        self.stream = stream or sys.stderr
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


class Progress(StatusLine):
    """The `progress(documents, bytes)` callback of fertility.measure.analyze."""

    def __init__(self, what: str, *, quiet: bool = False, stream=None) -> None:
        super().__init__(quiet, stream=stream)
        self.what = what
        self.start = time.perf_counter()

    def __call__(self, docs: int, nbytes: int) -> None:
        rate = docs / max(time.perf_counter() - self.start, 1e-9)
        self.update(f"{self.what}: {docs:,} documents, {nbytes / 1e6:,.1f} MB, {rate:,.0f} docs/s")

    done = StatusLine.close
