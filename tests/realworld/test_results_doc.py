"""docs/RESULTS.md is what `make results` (tests/realworld/results.py) builds from the fixtures.

The whole table measures twelve tokenizers on 9.8 MB of text: over a minute on the 2-core
machines the suite is sized for. So the tests check what is cheap in full (every tokenizer file
of the fixtures has its rows, in the order the generator writes them, and the Sources section
is SOURCES.json's) and measure one tokenizer afresh: its rows must be the committed ones, digit
for digit. A row depends only on its own tokenizer and the text (the gate's checks and the Gini
of one label), so one row measured alone is the row of the full build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.realworld

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "RESULTS.md"
FRESH = ["tekken"]  # measured afresh: the fastest of the twelve (about 6 s alone)


@pytest.fixture(scope="module")
def gen():
    from tests.realworld import results

    return results


def committed(gen) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return text.split(gen.BEGIN + "\n", 1)[1].split(gen.END, 1)[0].splitlines()


def label(line: str) -> str | None:
    cells = [c.strip() for c in line.strip("|").split("|")]
    return cells[0] if line.startswith("| ") else None


def test_every_tokenizer_file_of_the_fixtures_has_its_rows(rw, gen):
    files = {p.relative_to(rw / "tokenizers").as_posix() for p in (rw / "tokenizers").rglob("*")}
    files = {f for f in files if (rw / "tokenizers" / f).is_file()}
    assert {spec.split("#")[0] for spec in gen.TOKENIZERS.values()} == files
    rows = [label(x) for x in committed(gen) if label(x) in gen.TOKENIZERS]
    # one summary row and one per-script row for each, in the generator's order
    assert rows == list(gen.TOKENIZERS) * 2


def test_the_sources_are_those_of_the_fixtures(rw, gen):
    lines = committed(gen)
    start = lines.index("## Sources") + 2
    assert lines[start:] == gen.sources(rw)


def test_a_fresh_measurement_gives_the_committed_rows(rw, gen):
    fresh = gen.measure(rw, FRESH, workers=1)
    scripts = sorted(fresh[FRESH[0]]["cpt"])
    tables = gen.tables(rw, fresh, scripts)
    lines = committed(gen)
    block = lines[: lines.index("## Sources")]
    while block and not block[-1]:
        block.pop()
    # the committed tables with the other tokenizers' rows left out
    kept = [x for x in block if label(x) not in gen.TOKENIZERS or label(x) in FRESH]
    assert kept == tables
