"""fertility.measure.roundtrip counts a failing document's lost and added code points in one
numpy pass; collections.Counter's subtraction is the second method it must agree with, on
real text in every fixture language changed the ways tokenizers change it."""

from __future__ import annotations

import unicodedata
from collections import Counter

import pytest

from fertility.measure.roundtrip import _Tally, new_changes, record
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)

pytestmark = pytest.mark.realworld


def _changed(text: str) -> dict[str, str]:
    """What normalisers and decoders do to a text (lowercasing, accent stripping, NFKC, one
    space in front, whitespace collapsed, a letter turned into [UNK])."""
    no_marks = "".join(
        c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c)
    )
    return {
        "lower": text.lower(),
        "no_marks": no_marks,
        "nfkc": unicodedata.normalize("NFKC", text),
        "prefix": " " + text,
        "spaces": " ".join(text.split()),
        "unk": text.replace(text[len(text) // 2], "[UNK]") if text else "[UNK]",
    }


def test_the_tally_agrees_with_counter_on_real_text(rw):  # noqa: F811
    pairs = 0
    for path in sorted((rw / "text").glob("*.txt")):
        # 100 lines joined: a long document, as the detail pass sees on web text
        text = " ".join(path.read_text("utf-8").splitlines()[:100])
        for how, other in _changed(text).items():
            lost, added = _Tally(text, other).diff(0, 1)
            assert lost == Counter(text) - Counter(other), (path.name, how)
            assert added == Counter(other) - Counter(text), (path.name, how)
            pairs += 1
    assert pairs >= 6 * 13  # every fixture language, every change


def test_a_string_named_twice_or_empty_is_counted_as_itself(rw):  # noqa: F811
    # record names the decoded text up to three times (decoded, seen, rest): each name
    # must still diff as its own string, whichever other name it is paired with
    text = " ".join((rw / "text" / "ru.txt").read_text("utf-8").splitlines()[:20])
    strings = [text, text.lower(), "", text.lower(), " " + text]
    tally = _Tally(*strings)
    for i, a in enumerate(strings):
        for j, b in enumerate(strings):
            assert tally.diff(i, j) == (Counter(a) - Counter(b), Counter(b) - Counter(a))


def test_astral_code_points_and_a_lone_surrogate_are_counted():
    text, other = "a\U0001f600\U0001f600b", "A\U0001f600\ud800b"
    assert _Tally(text, other).diff(0, 1) == (
        Counter(text) - Counter(other),
        Counter(other) - Counter(text),
    )


def test_record_counts_what_counter_counts_and_names_the_causes(rw):  # noqa: F811
    text = " ".join((rw / "text" / "ru.txt").read_text("utf-8").splitlines()[:50])
    decoded = normalized = text.lower()
    changes = new_changes()
    record(changes, text, decoded, normalized, None, (0, 0))
    assert changes["lost"] == Counter(text) - Counter(decoded)
    assert changes["added"] == Counter(decoded) - Counter(text)
    assert changes["failures"] == 1 and set(changes["causes"]) == {"lowercase"}
    # [UNK]'s letters are its trace, not text added; the space put in front is its own cause
    changes = new_changes()
    word = next(w for w in text.split()[1:] if len(w) <= 4)  # decode comes out longer
    decoded = " " + text.replace(word, "[UNK]", 1)
    record(changes, text, decoded, text, "[UNK]", (0, 1))
    assert changes["lost"] == Counter(word)
    assert changes["added"] == Counter(" ")
    assert set(changes["causes"]) == {"unk", "prefix_space"}
