"""One seeded, vectorised hash for every split and draw the project makes (held-out documents,
near-duplicate shingles, the attribution of mixed-script tokens, the trainer's held-out
lines): splitmix64's finaliser over numpy uint64 arrays. Its own module because corpus/,
measure/ and trainer/ all draw with it and none of them should import another for it."""

from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fast, well-mixed 64-bit hash of each element (vectorised)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
