"""The widened split: marks and joiners stay in words; text without them is cut as before."""

from pathlib import Path

import pytest
import regex
from tokenizers import Regex, pre_tokenizers

from fertility.extend.pattern import widen_letters
from fertility.tokenizers.patterns import FAMILIES

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
MARKED = regex.compile(r"[\p{M}\u200c\u200d]")
# "র‍্যাব" and "ক্‌ষ" are written with ZWJ and ZWNJ
JOINERS = "র\u200d্যাব আর ক্\u200cষ, বাংলা ভাষা।"


def lines(lang: str) -> list[str]:
    return [x for x in (CORPUS / f"{lang}.txt").read_text(encoding="utf-8").splitlines() if x]


def spans(pattern: str, text: str) -> list[tuple[int, int]]:
    return [m.span() for m in regex.finditer(pattern, text)]


@pytest.mark.parametrize("family", ["gpt2", "cl100k"])
def test_text_without_marks_is_cut_exactly_as_before(family):
    base, wide = FAMILIES[family], widen_letters(FAMILIES[family])
    assert wide != base
    texts = [
        t for lang in ("en", "es", "ru", "zh", "ja") for t in lines(lang) if not MARKED.search(t)
    ]
    assert len(texts) > 250
    for t in texts:
        assert spans(wide, t) == spans(base, t), t


@pytest.mark.parametrize("family", ["gpt2", "cl100k"])
def test_bengali_words_are_never_cut(family):
    wide = widen_letters(FAMILIES[family])
    for t in [*lines("bn"), JOINERS]:
        pieces = spans(wide, t)
        # every run of letters, marks and joiners lies inside one piece
        for m in regex.finditer(r"[\p{L}\p{M}\u200c\u200d]+", t):
            assert any(a <= m.start() and m.end() <= b for a, b in pieces), (t, m.group())
    # the base pattern does cut them: the widening is what changes
    assert spans(FAMILIES[family], "বাংলা") != [(0, 5)]


def test_a_pattern_that_keeps_marks_is_left_alone():
    assert widen_letters(FAMILIES["o200k"]) == FAMILIES["o200k"]
    assert widen_letters(FAMILIES["mark_aware"]) == FAMILIES["mark_aware"]


@pytest.mark.parametrize("family", ["gpt2", "cl100k"])
def test_tokenizers_split_cuts_the_widened_pattern_as_regex_does(family):
    import tiktoken

    wide = widen_letters(FAMILIES[family])
    split = pre_tokenizers.Split(Regex(wide), behavior="isolated")
    for t in [*lines("bn")[:20], JOINERS, *lines("en")[:20]]:
        assert [s for _, s in split.pre_tokenize_str(t)] == spans(wide, t)
    # tiktoken's regex engine takes it too (the rank-file output carries this pattern)
    enc = tiktoken.Encoding(
        "w", pat_str=wide, special_tokens={}, mergeable_ranks={bytes([b]): b for b in range(256)}
    )
    assert enc.decode(enc.encode_ordinary(JOINERS)) == JOINERS
