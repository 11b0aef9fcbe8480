"""Grapheme cluster starts from fertility.unicode.graphemes, checked against regex's \\X (the second
method) and against a few clusters written out by hand."""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex

from fertility.unicode import graphemes
from fertility.unicode.graphemes import grapheme_starts

X = regex.compile(r"\X")


def cps_of(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def x_starts(text: str) -> list[int]:
    return [m.start() for m in X.finditer(text)]


def our_starts(text: str) -> list[int]:
    return np.flatnonzero(grapheme_starts(cps_of(text))).tolist()


def batch(docs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Documents concatenated, with the doc_starts mask."""
    cps = cps_of("".join(docs))
    doc_starts = np.zeros(len(cps), dtype=bool)
    offset = 0
    for doc in docs:
        if doc:
            doc_starts[offset] = True
        offset += len(doc)
    return cps, doc_starts


def x_starts_of_docs(docs: list[str]) -> list[int]:
    starts, offset = [], 0
    for doc in docs:
        starts += [offset + s for s in x_starts(doc)]
        offset += len(doc)
    return starts


SAMPLES = {
    "bengali vowel signs": "আমি বাংলায় গান গাই। কিছু শুনুন, পৌঁছে গেলাম।",
    "bengali conjuncts": "ক্ষমা মন্ত্র স্বপ্ন উজ্জ্বল বিজ্ঞান",
    "bengali zwj ya-phala": "র\u200d্যাব র\u200d্যালি",
    "bengali zwnj": "ক্\u200cষ",
    "devanagari": "हिन्दी में क्षत्रिय, स्त्री, क़्\u200dत और द्वार।",
    "gujarati malayalam telugu oriya": "ક્ષ ക്ഷ క్ష କ୍ଷ",
    "tamil": "தமிழ் க்ஷ ஸ்ரீ",
    "thai": "ภาษาไทยสำหรับน้ำ",
    "arabic harakat": "بِسْمِ اللَّهِ الرَّحْمَٰنِ",
    "hangul precomposed": "한국어 각",
    "hangul decomposed": "\u1100\u1161\u11a8 \u1100\u1100\u1161 \uac00\u11a8 \u1161\u11a8",
    "emoji zwj": "👨\u200d👩\u200d👧 👩🏽\u200d💻 ❤\ufe0f\u200d🔥",
    "flags": "🇧🇩🇮🇳 🇧🇩🇮🇳🇺",
    "skin tones and keycaps": "👍🏽 1\ufe0f\u20e3 🏴\U000e0067\U000e0062\U000e0065"
    "\U000e006e\U000e0067\U000e007f",
    "crlf and controls": "a\r\nb\n\rc\r\r\nd\x00e\x7f\u0300f\t\u200bg",
    "prepend": "\u0600\u0661\u0662 \U000110bd\U00011090 \u0d4e\u0d15",
    "marks at start": "\u0301a\u09cd\u0995",
    "myanmar and linkers outside extend": "\u1000\u1039\u1001 \u1cf5\u0995",
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_matches_regex_x(name: str) -> None:
    text = SAMPLES[name]
    assert our_starts(text) == x_starts(text)


@pytest.mark.parametrize(
    "text, clusters",
    [
        ("ক্ষ", ["ক্ষ"]),
        ("ন্ত্র", ["ন্ত্র"]),
        ("র\u200d্যা", ["র\u200d্যা"]),
        ("কি", ["কি"]),
        ("👨\u200d👩\u200d👧", ["👨\u200d👩\u200d👧"]),
        ("🇧🇩🇮🇳", ["🇧🇩", "🇮🇳"]),
        ("🇧🇩🇮", ["🇧🇩", "🇮"]),
        ("👍🏽", ["👍🏽"]),
        ("\r\n\n", ["\r\n", "\n"]),
        ("\u1100\u1161\u11a8", ["\u1100\u1161\u11a8"]),
        ("\u0600\u0661", ["\u0600\u0661"]),
        ("\u0301a", ["\u0301", "a"]),
        ("a\x00\u0301", ["a", "\x00", "\u0301"]),
    ],
)
def test_clusters_by_hand(text: str, clusters: list[str]) -> None:
    bounds = our_starts(text) + [len(text)]
    assert [text[s:e] for s, e in zip(bounds, bounds[1:])] == clusters


def test_documents_concatenated() -> None:
    # Each pair of neighbours would join if the rules looked across the document start.
    docs = [
        "ক্",
        "ষ",
        "ক্ষ",
        "\u09cd\u0995",  # virama | consonant; linker opening a document
        "👨\u200d",
        "👩",
        "\u200d👩",  # ZWJ | pictograph; ZWJ opening a document
        "🇧🇩🇮",
        "🇳🇧",
        "🇩",  # regional indicators counted per document
        "a\r",
        "\nb",
        "\u0301x",
        "\u0600",
        "a",
        "\u1100",
        "\u1161",
        "",
        "x\u0300",
        "",
    ]
    cps, doc_starts = batch(docs)
    assert np.flatnonzero(grapheme_starts(cps, doc_starts)).tolist() == x_starts_of_docs(docs)
    # Without the mask the same code points form one text, and \X of it is the answer.
    assert np.flatnonzero(grapheme_starts(cps)).tolist() == x_starts("".join(docs))


def test_every_code_point_its_own_document() -> None:
    cps = cps_of("ক্ষ👨\u200d👩\r\n🇧🇩")
    assert grapheme_starts(cps, np.ones(len(cps), dtype=bool)).all()


POOL = [
    0x00,
    0x1F,
    0x7F,
    0x85,
    0xAD,
    0x200B,
    0x0D,
    0x0A,  # Control, CR, LF
    0x300,
    0x9BC,
    0x9C1,
    0x9BE,
    0x981,
    0x200C,
    0xFE0F,
    0x1F3FD,
    0xE0067,
    0xE007F,
    0x20E3,
    0x200D,
    0x1F1E7,
    0x1F1E9,
    0x1F1EE,
    0x1F1F3,  # Extend, ZWJ, regional indicators
    0x600,
    0x110BD,
    0xD4E,
    0x9BF,
    0x903,
    0xE33,  # Prepend, SpacingMark
    0x1100,
    0x1161,
    0x11A8,
    0xAC00,
    0xAC01,  # Hangul L V T LV LVT
    0x1F468,
    0x1F469,
    0x2764,
    0xA9,
    0x1F44D,  # Extended_Pictographic
    0x995,
    0x9B7,
    0x9A4,
    0x9B0,
    0x9AF,
    0x915,
    0x924,
    0xA95,
    0xD15,
    0xC15,
    0xB15,
    0x1000,
    0x94D,
    0x9CD,
    0xACD,
    0xD4D,
    0xC4D,
    0xB4D,
    0x1039,
    0x1CF5,
    0x11A3A,
    0x93C,
    0x93F,
    0xB95,
    0xBCD,
    0xE01,
    0xE31,
    0x628,
    0x64E,
    0x651,  # Tamil, Thai, Arabic
    0x61,
    0x20,
    0x31,
    0xD800,
    0x378,
    0xFFFF,
    0xE000,
    0x10FFFF,  # plain, odd, unassigned
]


def random_texts(seed: int, count: int, max_len: int) -> list[str]:
    rng = random.Random(seed)
    return [
        "".join(chr(rng.choice(POOL)) for _ in range(rng.randint(1, max_len))) for _ in range(count)
    ]


@pytest.mark.parametrize("short_run", [graphemes._SHORT_RUN, 0])
def test_fuzz_against_regex(monkeypatch: pytest.MonkeyPatch, short_run: int) -> None:
    # short_run=0 sends every look-back through the bulk run search instead of the steps.
    monkeypatch.setattr(graphemes, "_SHORT_RUN", short_run)
    texts = random_texts(seed=29, count=4000, max_len=12)
    for text in texts:
        expected = x_starts(text)
        got = our_starts(text)
        assert got == expected, f"{[hex(ord(c)) for c in text]}: {got} != {expected}"
    cps, doc_starts = batch(texts)
    got = np.flatnonzero(grapheme_starts(cps, doc_starts)).tolist()
    assert len(got) == len(x_starts_of_docs(texts))
    assert got == x_starts_of_docs(texts)


def test_long_runs() -> None:
    # Look-backs longer than the stepped walk: marks stacked between the rule's two ends.
    texts = [
        "\u0995\u09cd" + "\u09bc" * 40 + "\u09b7",
        "a\u09cd" + "\u0981" * 9 + "\u09b7",
        "👨" + "🏽" * 30 + "\u200d👩",
        "x" + "🏽" * 30 + "\u200d👩",
        "🇧" * 41 + "a" + "🇧" * 40,
    ]
    for text in texts:
        assert our_starts(text) == x_starts(text)
    cps, doc_starts = batch(["🏽" * 5, "\u200d👩", "\u0981" * 7, "\u09b7", "🇧" * 9, "🇧"])
    assert np.flatnonzero(grapheme_starts(cps, doc_starts)).tolist() == x_starts_of_docs(
        ["🏽" * 5, "\u200d👩", "\u0981" * 7, "\u09b7", "🇧" * 9, "🇧"]
    )


@pytest.mark.parametrize(
    "text, starts",
    [
        ("\u0915\u094d\u0924", [0]),  # KA VIRAMA TA: a conjunct under either rule
        ("\u0915\u093c\u200d\u094d\u0924", [0]),
        ("a\u094d\u0924", [0, 2]),  # no consonant before the virama
        ("\u0915\u093f\u094d\u0924", [0, 3]),  # a spacing vowel sign breaks the chain
        ("\u0915\u094d\u0924\u094d\u092f", [0]),
    ],
)
def test_gb9c_before_unicode_18(
    monkeypatch: pytest.MonkeyPatch, text: str, starts: list[int]
) -> None:
    # Unicode 15.1-17 (regex before its 18.0 update) asked for a consonant before the
    # linker; the installed regex cannot serve as reference, so these are from the spec.
    monkeypatch.setattr(graphemes, "_GB9C_NEEDS_CONSONANT", True)
    assert our_starts(text) == starts


def test_gb9c_consonant_not_taken_from_previous_document(monkeypatch: pytest.MonkeyPatch) -> None:
    cps, doc_starts = batch(["\u0915", "\u094d\u0924"])
    assert (
        np.flatnonzero(grapheme_starts(cps, doc_starts)).tolist()
        == x_starts_of_docs(["\u0915", "\u094d\u0924"])
        == [0, 1]
    )  # Unicode 18: the linker alone suffices
    monkeypatch.setattr(graphemes, "_GB9C_NEEDS_CONSONANT", True)
    assert np.flatnonzero(grapheme_starts(cps, doc_starts)).tolist() == [0, 1, 2]


def test_input_forms() -> None:
    assert grapheme_starts(np.zeros(0, dtype=np.uint32)).shape == (0,)
    assert grapheme_starts(np.array([0x61, 0x300], dtype=np.int64)).tolist() == [True, False]
    with pytest.raises(ValueError, match="above"):
        grapheme_starts(np.array([0x110000], dtype=np.uint32))
    with pytest.raises(ValueError, match="negative"):
        grapheme_starts(np.array([-1], dtype=np.int64))
    with pytest.raises(ValueError, match="doc_starts"):
        grapheme_starts(cps_of("ab"), np.ones(3, dtype=bool))
