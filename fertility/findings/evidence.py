"""The measured numbers a finding or a gate check quotes, read from a row of the measurement
table (Report.table: a dict per row)."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from fertility.numbers import finite
from fertility.stats import wilson


def number(x: Any) -> float | None:
    """A plain float for JSON evidence, rounded to 4 places; None for a missing value."""
    v = finite(x)
    return None if v is None else round(v, 4)


def rate_interval(row: Mapping[str, Any], rate: str, k: float, n: float) -> tuple[Any, Any]:
    """The 95% Wilson interval of the rate `rate` (k of n) on a row of the measurement table:
    the row's own `<rate>_lo` / `<rate>_hi`, nothing recounted."""
    if f"{rate}_lo" in row:
        return row[f"{rate}_lo"], row[f"{rate}_hi"]
    # A table without the columns (fertility.measure has not yet written them for every
    # rate; the tests' hand-built rows): the same value from the counts. When every table
    # holds them, this fallback (and the k, n arguments) goes.
    return wilson(k, n)


def char_names(counts: dict | None, top: int) -> list[dict]:
    """The `top` most frequent characters of {char: count}, with code point and name."""
    items = sorted((counts or {}).items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    return [
        {
            "char": c,
            "code": f"U+{ord(c):04X}" if len(c) == 1 else c,
            "name": unicodedata.name(c, "<unnamed>") if len(c) == 1 else "",
            "count": int(n),
        }
        for c, n in items
    ]
