"""A measured number that may be missing: the one way it is read (`finite`) and written
(`fmt`). A frame cell can be None, NaN or pandas' NA (a rate of no tokens, a pre-tokenizer's
UNK rate); evidence, gate checks, the terminal tables and the HTML page all treat those alike.
"""

from __future__ import annotations

import math
from typing import Any


def finite(x: Any) -> float | None:
    """`x` as a plain float; None for None, NaN, pandas' NA and anything that is not a number."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(v) else v


def fmt(x: Any, spec: str = "{:.3f}", missing: str = "-") -> str:
    """`x` written with `spec` (a str.format spec; `{:d}` writes it as an integer), or
    `missing` when it is not a number."""
    v = finite(x)
    if v is None:
        return missing
    return spec.format(int(v) if spec == "{:d}" else v)


def pct(share: Any, missing: str = "-") -> str:
    """A share in [0, 1] as a person reads it, in percent: two significant digits under 1%,
    one decimal under 10%, whole percents above ("0.44%", "6.4%", "13%")."""
    v = finite(share)
    if v is None:
        return missing
    p = v * 100
    return f"{p:.2g}%" if 0 < p < 1 else f"{p:.1f}%" if p < 10 else f"{p:.0f}%"
