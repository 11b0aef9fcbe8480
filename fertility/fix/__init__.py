"""`fertility fix`: train a corrected vocabulary and prove it on held-out text.

The run is fertility/fix/run.py (its stages, in order, are described there); what it reports,
fix-report.json, is fertility/fix/result.py; the training backends fertility/fix/train.py.
"""

from fertility.fix.result import (
    AFTER,
    BEFORE,
    SCHEMA,
    WORSE_SHARE,
    FixResult,
    preview_lines,
    tradeoffs,
)
from fertility.fix.run import (
    DEFAULT_SPECIALS,
    OUTPUTS,
    UNK,
    fix,
    heldout_documents,
    split_documents,
)

__all__ = [
    "AFTER",
    "BEFORE",
    "DEFAULT_SPECIALS",
    "OUTPUTS",
    "SCHEMA",
    "UNK",
    "WORSE_SHARE",
    "FixResult",
    "fix",
    "heldout_documents",
    "preview_lines",
    "split_documents",
    "tradeoffs",
]
