"""The held-out figures `fertility fix` and `fertility extend` both print (their texts are
fertility/fix/text.py and fertility/extend/text.py): one chars/token cell, and how the
held-out documents were chosen. Nothing here measures or decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def cell(m: Mapping[str, Any] | None) -> str:
    """Chars per token and its interval, 20 columns wide ("-" when not measured)."""
    if not m or m.get("chars_per_token") is None:
        return f"{'-':>20}"
    lo, hi = m.get("chars_per_token_lo"), m.get("chars_per_token_hi")
    iv = f"[{lo:.2f}, {hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{m['chars_per_token']:>6.2f} {iv:<13}"


def heldout_line(s: Mapping[str, Any]) -> str:  # a Split record
    """How the held-out documents were chosen, and what was dropped from training for them."""
    return (
        f"held out: {s['heldout_documents']:,} documents in runs of up to "
        f"{s['heldout_block']} lines (fraction {s['heldout_fraction']:g}, seed {s['seed']}); "
        f"{s['dropped_near_duplicates']:,} training documents that share a near-duplicate "
        "with one were dropped from training; every figure below is measured on them only"
    )
