"""Renderers: the terminal report and CSV (text.py) on the one table layout
(table.py), verdicts, grouped findings and the gate's text (summary.py), a GateResult
as text and JUnit XML (gate.py), fix's and extend's summaries (fix.py), the
self-contained HTML report (html.py). Nothing here measures or decides."""
