"""Per-code-point Unicode facts, vectorised over whole batches of documents.

Properties come from the `regex` module (the same Unicode version as its `\\X` and `\\w`), looked
up once per *distinct* code point and cached in flat tables indexed by code point, so the
per-character work on the measuring path is numpy indexing, never a Python loop.

The per-code-point tables and their lookups: fertility/unicode/tables.py; a batch of
documents as those facts (TextBatch, analyze_texts): fertility/unicode/batch.py.
"""

from fertility.unicode.batch import TextBatch, analyze_texts, grapheme_starts, resolved_scripts
from fertility.unicode.tables import (
    BREAK_RE,
    NO_SPACE_SCRIPTS,
    SCRIPT_INDEX,
    SCRIPTS,
    ZINH,
    ZYYY,
    ZZZZ,
    code_points,
    ensure_classified,
    is_mark_or_joiner,
    utf8_lengths,
)

__all__ = [
    "BREAK_RE",
    "NO_SPACE_SCRIPTS",
    "SCRIPTS",
    "SCRIPT_INDEX",
    "ZINH",
    "ZYYY",
    "ZZZZ",
    "TextBatch",
    "analyze_texts",
    "code_points",
    "ensure_classified",
    "grapheme_starts",
    "is_mark_or_joiner",
    "resolved_scripts",
    "utf8_lengths",
]
