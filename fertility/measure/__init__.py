"""Counts per (tokenizer, language, script) -> one tidy DataFrame (docs/METRICS.md).

`analyze` streams the corpus in batches. For each batch the tokenizer-independent facts (scripts,
graphemes, words, bytes) are computed once (fertility.unicode), then every tokenizer encodes the
same documents and its counters are updated with vectorised numpy. Nothing here formats output.

The run: fertility/measure/run.py (analyze); what it makes: fertility/measure/report.py
(Report, TokenizerInfo, build_report, the JSON).
"""

from fertility.measure.counters import COUNTS, NS
from fertility.measure.report import SCHEMA, Report, TokenizerInfo, build_report
from fertility.measure.run import analyze
from fertility.tokenizers.pretokenizer import PretokenizerFamily

__all__ = [
    "analyze",
    "build_report",
    "Report",
    "TokenizerInfo",
    "PretokenizerFamily",
    "COUNTS",
    "NS",
    "SCHEMA",
]
