"""Language labels as the premium's reference reads them (fertility.corpus.labels): `en` is
`eng_Latn` in FineWeb-2 and FLORES folders; the ISO 639-1 -> 639-3 table against Debian's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fertility.corpus import labels


@pytest.mark.parametrize(
    "label, lang, script",
    [
        ("en", "eng", None),
        ("eng", "eng", None),
        ("eng_Latn", "eng", "Latn"),
        ("en_GB", "eng", None),
        ("zh-Hans", "zho", None),  # a BCP 47 script subtag, not a FLORES label
        ("hin_Deva", "hin", "Deva"),
        ("und", "und", None),
    ],
)
def test_a_labels_language_and_script(label, lang, script):
    assert labels.language(label) == lang and labels.flores_script(label) == script


def test_the_reference_matches_its_language():
    have = ["ben_Beng", "eng_Latn", "und"]
    assert labels.matching("en", have) == ["eng_Latn"]
    assert labels.matching("eng_Latn", have) == ["eng_Latn"]
    assert labels.matching("bn", have) == ["ben_Beng"]
    assert labels.matching("fr", have) == []
    assert labels.matching("en", ["en", "eng_Latn"]) == ["en"]  # the label itself first


def test_the_shipped_pairs_are_iso_codes():
    path = Path("/usr/share/iso-codes/json/iso_639-3.json")
    if not path.is_file():
        pytest.skip("Debian's iso-codes is not installed")
    part3 = json.loads(path.read_text("utf-8"))["639-3"]
    assert labels.ISO639_3 == {c["alpha_2"]: c["alpha_3"] for c in part3 if "alpha_2" in c}
