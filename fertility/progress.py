"""A one-line progress display on stderr, silent when stderr is not a terminal or when quiet."""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, what: str, *, quiet: bool = False, stream=None, every: float = 0.25):
        self.stream = stream or sys.stderr
        self.enabled = not quiet and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.what = what
        self.start = time.perf_counter()
        self.last = 0.0
        self.every = every

    def __call__(self, docs: int, nbytes: int) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self.last < self.every:
            return
        self.last = now
        rate = docs / max(now - self.start, 1e-9)
        self.stream.write(f"\r{self.what}: {docs:,} documents, {nbytes / 1e6:,.1f} MB, "
                          f"{rate:,.0f} docs/s ")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
