"""docs/METRICS.md defines exactly the metrics of the registry (fertility.measure.metrics), each
under a heading of its name, with the registry's formula, unit and interval; and exactly the
counts of the frame."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fertility.measure.counters import COUNTS
from fertility.measure.metrics import METRIC, METRICS, Interval

DOC = Path(__file__).resolve().parents[1] / "docs" / "METRICS.md"
TEXT = DOC.read_text(encoding="utf-8")


def section(text: str, heading: str, level: str) -> str:
    """The text under the first heading starting `heading` at `level` ("##"), up to the next
    heading of that level or above."""
    m = re.search(rf"(?m)^{level} {re.escape(heading)}.*$", text)
    assert m, heading
    end = re.search(rf"(?m)^#{{1,{len(level)}}} ", text[m.end() :])
    return text[m.end() : m.end() + end.start()] if end else text[m.end() :]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation but - and _ dropped, spaces -."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


RATIOS = section(TEXT, "Ratios", "##")
HEADINGS = re.findall(r"(?m)^### (.+)$", RATIOS)


def test_the_doc_defines_exactly_the_registrys_metrics():
    anchors = {f"docs/METRICS.md#{slug(h)}" for h in HEADINGS}
    assert len(HEADINGS) == len(set(HEADINGS))
    assert anchors == {m.anchor for m in METRICS}  # both ways: none missing, none extra
    assert [slug(h) for h in HEADINGS] == [m.name for m in METRICS]  # in the frame's order


@pytest.mark.parametrize("name", [m.name for m in METRICS])
def test_each_definition_states_the_registrys_formula_unit_and_interval(name):
    m = METRIC[name]
    text = " ".join(section(RATIOS, name, "###").split())
    assert m.formula in text
    assert m.unit.value in text
    if m.interval is Interval.NONE:
        assert "No interval" in text and "_lo" not in text
    else:
        kind = "Wilson" if m.interval is Interval.WILSON else "delta method"
        assert f"Interval ({kind})" in text
        assert f"`{m.lo}`" in text and f"`{m.hi}`" in text
    if m.needs_vocab:
        assert "pre-tokenizer family" in text
    if m.spaced_only:
        assert "written without spaces" in text


def test_the_counts_table_lists_exactly_the_frames_counts():
    counts = section(TEXT, "Counts", "##")
    names = {
        name
        for row in re.findall(r"(?m)^\| (`[^|]+) \|", counts)
        for name in re.findall(r"`(\w+)`", row)
    }
    assert names == set(COUNTS)
