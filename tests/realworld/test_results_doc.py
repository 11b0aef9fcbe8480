"""docs/RESULTS.md is what `make results` (tests/realworld/results.py) builds from the fixtures.

The whole table measures twelve tokenizers on 9.8 MB of text: over a minute on the 2-core
machines the suite is sized for, too long to run inside it. So `make test` builds it before
pytest into ROOT/results/RESULTS.<KEY>.md, KEY a hash of everything the table is a function of
(results.key: the package, the generator, the fixtures' files, the installed packages), again
only when KEY changes; here the committed file must be that build, byte for byte. The test
computes KEY itself, so a build made before the sources changed is not taken for a fresh one;
with none for the current KEY it fails, it does not skip.
"""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

pytestmark = pytest.mark.realworld

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "RESULTS.md"


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


def test_the_committed_table_is_a_fresh_build(rw, gen):
    path = gen.fresh_path(rw, gen.key(rw))
    if not path.is_file():
        pytest.fail(
            f"no fresh build of docs/RESULTS.md for the sources as they are ({path}): "
            "`make test` makes it before pytest, `make results` too"
        )
    if DOC.read_bytes() != path.read_bytes():
        got, want = (p.read_text(encoding="utf-8").splitlines() for p in (DOC, path))
        diff = difflib.unified_diff(got, want, "docs/RESULTS.md", str(path), lineterm="")
        pytest.fail(
            "docs/RESULTS.md is not the fresh build: run `make results` and commit "
            "docs/RESULTS.md\n" + "\n".join(list(diff)[:40]),
            pytrace=False,
        )
