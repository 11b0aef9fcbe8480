"""Split patterns: expected pieces are worked out by hand from each character's category."""

from pathlib import Path

import numpy as np
import pytest
import regex

from fertility.errors import TokenizerError
from fertility.tokenizers.patterns import (
    FAMILIES,
    compile_pattern,
    identify,
    known_names,
    pattern_from_filename,
    resolve_pattern,
    split_many,
    split_spans,
)
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)
from tests.realworld.test_counts import LLAMA3_PAT, LLAMA4_PAT  # llama-models' own strings

ZWJ, ZWNJ = "\u200d", "\u200c"

# বাংলা = ব U+09AC (Lo) া U+09BE (Mc) ং U+0982 (Mc) ল U+09B2 (Lo) া U+09BE (Mc)
BANGLA = "\u09ac\u09be\u0982\u09b2\u09be"
# বাংলাদেশ = বাংলা + দ U+09A6 (Lo) ে U+09C7 (Mc) শ U+09B6 (Lo)
BANGLADESH = BANGLA + "\u09a6\u09c7\u09b6"


def pieces(name, text):
    return [text[a:b] for a, b in split_spans(name, text)]


def test_bangla_word_in_code_points():
    assert [hex(ord(c)) for c in BANGLA] == ["0x9ac", "0x9be", "0x982", "0x9b2", "0x9be"]
    assert BANGLA == "বাংলা"


def test_gpt2_cuts_bengali_word_at_each_vowel_sign():
    # ` ?\p{L}+` takes the consonant; the marks (neither L nor N) go to ` ?[^\s\p{L}\p{N}]+`.
    assert split_spans("gpt2", BANGLA) == [(0, 1), (1, 3), (3, 4), (4, 5)]
    assert pieces("gpt2", BANGLA) == ["\u09ac", "\u09be\u0982", "\u09b2", "\u09be"]


def test_o200k_and_mark_aware_keep_bengali_word_whole():
    for name in ("o200k", "mark_aware"):
        assert split_spans(name, BANGLA) == [(0, 5)]
        assert split_spans(name, " " + BANGLADESH) == [(0, 9)]


def test_cl100k_gives_pieces_between_gpt2_and_o200k():
    # cl100k lets one non-letter (a vowel sign) lead a run of letters: "া"+"দ", "ে"+"শ".
    assert pieces("cl100k", BANGLADESH) == ["ব", "াং", "ল", "াদ", "েশ"]
    assert pieces("gpt2", BANGLADESH) == ["ব", "াং", "ল", "া", "দ", "ে", "শ"]
    assert pieces("o200k", BANGLADESH) == [BANGLADESH]


@pytest.mark.parametrize(
    "word, o200k",
    [
        # র ZWJ ্ য া ব: the Bengali "ra-phala with ZWJ" (র‍্যাব)
        ("\u09b0" + ZWJ + "\u09cd\u09af\u09be\u09ac", [(0, 1), (1, 6)]),
        # Malayalam old-style chillu: അ വ ന ് ZWJ (അവന്‍)
        ("\u0d05\u0d35\u0d28\u0d4d" + ZWJ, [(0, 4), (4, 5)]),
        # Persian ZWNJ between the prefix and the verb: م ی ZWNJ خ و ا ه م (می‌خواهم)
        ("\u0645\u06cc" + ZWNJ + "\u062e\u0648\u0627\u0647\u0645", [(0, 2), (2, 8)]),
        # Hindi half form with ZWJ: क ् ZWJ ष (क्‍ष)
        ("\u0915\u094d" + ZWJ + "\u0937", [(0, 2), (2, 4)]),
    ],
)
def test_mark_aware_keeps_joiners_inside_words(word, o200k):
    assert split_spans("o200k", word) == o200k  # ZWJ/ZWNJ (Cf) break o200k's words
    assert split_spans("mark_aware", word) == [(0, len(word))]
    assert split_spans("mark_aware", "x " + word + " y") == [
        (0, 1),
        (1, 2 + len(word)),
        (2 + len(word), 4 + len(word)),
    ]


def test_mark_aware_digits_and_whitespace_like_o200k():
    text = "\u09e7\u09e8\u09e9\u09ea\u09eb \u099f\u09be\u0995\u09be  12345\n\nok"  # ১২৩৪৫ টাকা
    assert split_spans("mark_aware", text)[:3] == [(0, 3), (3, 5), (5, 10)]
    assert split_spans("mark_aware", text) == split_spans("o200k", text)


def test_whitespace_pattern_pieces():
    assert pieces("whitespace", "a  b\nc ") == ["a", " ", " b", "\nc", " "]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_family_tiles_the_text(name):
    text = "Hello,  wörld!! 12345 it's\r\n\n বাংলাদেশ " + ZWJ + " x\u0301 \t end  "
    spans = split_spans(name, text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    assert all(a < b for a, b in spans)
    assert all(spans[i][1] == spans[i + 1][0] for i in range(len(spans) - 1))


@pytest.mark.realworld
@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_split_many_is_regex_finditer_on_real_text(name, rw):  # noqa: F811
    # the second method: the regex module's own finditer over the family's pattern, text by
    # text; here every fixture language in one call, as lines and as 50 lines joined with
    # trailing blank lines and spaces, an empty text among them
    compiled = regex.compile(FAMILIES[name])
    texts = [""]
    for path in sorted((rw / "text").glob("*.txt")):
        lines = path.read_text("utf-8").splitlines()
        texts += [*lines[:20], " ".join(lines[:50]) + "\n\n  "]
    spans, counts = split_many(name, texts)
    assert counts.tolist() == [len(compiled.findall(t)) for t in texts]
    at = np.concatenate(([0], np.cumsum(counts)))
    for k, text in enumerate(texts):
        want = [list(m.span()) for m in compiled.finditer(text)]
        assert spans[at[k] : at[k + 1]].tolist() == want, (k, text[:40])


def test_split_many_where_the_pieces_do_not_tile():
    # gaps between the matches, and patterns whose findall gives their groups, not their
    # matches: the spans are finditer's (worked by hand), each text's own
    spans, counts = split_many(r"re:\S+", ["ab  cd\te", "", "x"])
    assert spans.tolist() == [[0, 2], [4, 6], [7, 8], [0, 1]] and counts.tolist() == [3, 0, 1]
    spans, _ = split_many(r"re:(\S)\S*", ["ab  cd\te"])
    assert spans.tolist() == [[0, 2], [4, 6], [7, 8]]
    # two groups a match: findall's pairs have two items whatever the match's length, and
    # here their count is the text's length
    assert split_many(r"re:(\S)(\S\S)?", ["abcd"])[0].tolist() == [[0, 3], [3, 4]]
    # one text that tiles beside one that does not: neither takes the other's form
    spans, counts = split_many(r"re:[a-z]+|\s", ["a b", "a-b"])
    assert spans.tolist() == [[0, 1], [1, 2], [2, 3], [0, 1], [2, 3]] and counts.tolist() == [3, 2]
    spans, counts = split_many("gpt2", [])
    assert spans.shape == (0, 2) and counts.tolist() == []


MIXED = [
    "Hello world, it's 2024!!  ok\n\n  next line\tTAB",
    "আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।  ১২৩৪",
    "I'LL   don't\r\nWe've 1234567 ...  €10",
]


def test_gpt2_matches_the_original_gpt2_regex():
    original = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    for text in MIXED:
        assert split_spans("gpt2", text) == [m.span() for m in regex.finditer(original, text)]


def test_gpt2_matches_hf_bytelevel_pretokenizer():
    from tokenizers import pre_tokenizers

    pre = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    for text in MIXED:
        assert split_spans("gpt2", text) == [span for _, span in pre.pre_tokenize_str(text)]


def test_cl100k_matches_tiktoken_spelling():
    # tiktoken 0.14's cl100k_base pat_str, copied: a second spelling of the same split
    tiktoken_pat = (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    )
    for text in MIXED:
        assert split_spans("cl100k", text) == [m.span() for m in regex.finditer(tiktoken_pat, text)]
    assert identify(tiktoken_pat) == "cl100k"
    assert pieces("cl100k", "1234567") == ["123", "456", "7"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_split_the_same_in_hf_split(name):
    # `fertility fix` trains through tokenizers' Split (Oniguruma): it must cut identically.
    from tokenizers import Regex, pre_tokenizers

    pre = pre_tokenizers.Split(Regex(FAMILIES[name]), behavior="isolated")
    for text in [*MIXED, "র" + ZWJ + "্যাব অবন্" + ZWJ + " می" + ZWNJ + "خواهم 1234567"]:
        assert [span for _, span in pre.pre_tokenize_str(text)] == split_spans(name, text)


def test_resolve_pattern_names_aliases_and_raw():
    assert resolve_pattern("cl100k_base") == ("cl100k", FAMILIES["cl100k"])
    assert resolve_pattern("llama3")[0] == "cl100k"
    assert resolve_pattern("r50k_base")[0] == resolve_pattern("p50k_base")[0] == "gpt2"
    assert resolve_pattern("gpt2")[0] == "gpt2"
    assert resolve_pattern("o200k_base")[0] == "o200k"
    assert resolve_pattern("mark_aware") == ("mark_aware", FAMILIES["mark_aware"])
    assert resolve_pattern(r"re:\S+") == (r"re:\S+", r"\S+")


def test_llama_names_give_the_splits_llama_models_builds_with():
    assert resolve_pattern("llama3")[1] == LLAMA3_PAT
    assert resolve_pattern("llama4")[1] == LLAMA4_PAT


def test_report_doc_lists_every_pattern_name():
    doc = Path(__file__).resolve().parents[2] / "docs" / "REPORT.md"
    readme = doc.read_text(encoding="utf-8")
    bullet = readme[readme.index("- **Tokenizers**") :].split("\n- ", 1)[0]
    assert [n for n in known_names() if f"`{n}`" not in bullet] == []


@pytest.mark.parametrize("bad", ["re:(", "re:[a-", "re:", "nope", "cl100"])
def test_resolve_pattern_rejects(bad):
    with pytest.raises(TokenizerError) as err:
        resolve_pattern(bad)
    assert "\n" not in str(err.value)


def test_split_spans_accepts_raw_and_prefixed_regex():
    assert split_spans(r"\S+", "ab  cd") == [(0, 2), (4, 6)]
    assert split_spans(r"re:\S+", "ab  cd") == [(0, 2), (4, 6)]
    compile_pattern.cache_clear()
    split_spans("o200k", "a b")
    split_spans("o200k", "c d")
    assert compile_pattern.cache_info().misses == 1  # compiled once, then cached


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/x/cl100k_base.tiktoken", "cl100k_base"),
        ("o200k_base.model", "o200k_base"),
        ("my-gpt2-ranks.tiktoken", "gpt2"),
        ("Meta-Llama-3-8B.model", "llama3"),
        ("llama_3.tiktoken", "llama3"),
        ("Llama-4-Scout.tiktoken", "llama4"),
        ("fixed.mark_aware.tiktoken", "mark_aware"),
        ("gpt20.model", None),
        ("tokenizer.model", None),
        ("/models/cl100k_base/ranks.tiktoken", None),  # folders are not read
    ],
)
def test_pattern_from_filename(path, expected):
    assert pattern_from_filename(path) == expected
