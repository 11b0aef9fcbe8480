"""The integer type for positions and running counts over a batch, declared once: int32 where
the count fits, so a cumulative sum over every code point or byte moves half the memory of
int64's. Its own module because tokenizers/, unicode/ and measure/ all size arrays with it and
none of them should import another for it."""

from __future__ import annotations

from typing import Any

import numpy as np


def index_dtype(n: int) -> np.dtype[np.signedinteger[Any]]:
    """int32 for counts and positions up to `n` where they fit, else int64."""
    return np.dtype(np.int32 if n < 2**31 - 1 else np.int64)
