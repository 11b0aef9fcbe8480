"""Batches whose documents interleave languages and mix scripts, counted by plain Python.

Most batches of a real corpus hold one language (documents come in file order) and the
measuring path has short cuts for that; here every batch holds several runs of languages and
documents of several scripts, against counts made document by document without numpy.
"""

import json
import random
import re
from collections import defaultdict

import numpy as np
import pytest
import regex

from fertility import unicode as U
from fertility.corpus import CorpusOptions
from fertility.measure import analyze
from fertility.measure.batch import _overlapped_twice
from fertility.measure.counters import Bootstrap
from fertility.tokenizers.patterns import FAMILIES
from tests.unicode.test_unicode import _reference_scripts

WORDS = {
    "en": ["rain", "river", "don't", "city"],
    "ru": ["дождь", "река", "город", "Moskva"],
    "bn": ["বৃষ্টি", "নদী", "কলকাতা", "city"],
}
PIECE = re.compile(r"\s?\S+|\s")  # the whitespace pre-tokenizer's pieces (tokenizers.patterns)
OWN = regex.compile(r"[^\p{Script=Common}\p{Script=Inherited}]")


@pytest.fixture(scope="module")
def docs():
    rng = random.Random(3)
    out = []
    for i in range(60):
        lang = ("en", "ru", "bn", "ru")[i % 4 if i < 40 else 0]  # runs of 1, then one of 20
        words = [rng.choice(WORDS[lang] + WORDS[rng.choice(list(WORDS))]) for _ in range(5)]
        out.append((lang, " ".join(words) + rng.choice([".", "!", ""])))
    return out


@pytest.fixture(scope="module")
def report(docs, tmp_path_factory):
    path = tmp_path_factory.mktemp("groups") / "mixed.jsonl"
    path.write_text("".join(json.dumps({"text": t, "lang": lang}) + "\n" for lang, t in docs))
    return analyze(
        [path],
        pretokenizers=["whitespace"],
        corpus_options=CorpusOptions(lang_field="lang"),
        batch_size=7,
        workers=1,
    )


def test_counts_per_language_and_script(docs, report):
    want = defaultdict(lambda: defaultdict(int))
    for lang, text in docs:
        scripts = _reference_scripts([text])
        pieces = [m.start() for m in PIECE.finditer(text)]
        for group in (("language", lang), *(("script", s) for s in set(scripts))):
            want[group]["documents"] += 1
        want[("language", lang)]["chars"] += len(text)
        want[("language", lang)]["bytes"] += len(text.encode())
        want[("language", lang)]["tokens"] += len(pieces)
        for i, s in enumerate(scripts):
            want[("script", s)]["chars"] += 1
            want[("script", s)]["bytes"] += len(text[i].encode())
        for m in PIECE.finditer(text):
            # a token counts in the script of its first character with a script of its own
            # (a leading space carries none); all Common: where it starts (docs/METRICS.md)
            own = OWN.search(m.group())
            want[("script", scripts[m.start() + own.start() if own else m.start()])]["tokens"] += 1
    f = report.frame
    got = {
        (r.group, r.key): {c: getattr(r, c) for c in ("documents", "chars", "bytes", "tokens")}
        for r in f[f.group.isin(["language", "script"])].itertuples()
    }
    assert got == {k: dict(v) for k, v in want.items()}


def test_interval_sums_per_language(docs, report):
    per_lang = defaultdict(list)
    for lang, text in docs:
        per_lang[lang].append((len(text), len(PIECE.findall(text))))
    f = report.frame
    for lang, rows in per_lang.items():
        c, t = (np.array(x, dtype=np.int64) for x in zip(*rows))
        lo, hi = Bootstrap.interval(Bootstrap.sums(c, t))
        r = f[(f.group == "language") & (f.key == lang)].iloc[0]
        assert (r.chars_per_token_lo, r.chars_per_token_hi) == (lo, hi)


def _plain_overlapped_twice(spans, words):
    return [sum(s < we and e > ws for s, e in spans) >= 2 for ws, we in words]


@pytest.mark.parametrize("seed", range(20))
def test_overlapped_twice_counts_spans_like_a_loop(seed):
    rng = random.Random(seed)
    # spans in order that tile the text, some sharing a character (a byte-split character)
    spans, at = [], 0
    for _ in range(rng.randint(0, 40)):
        start = at - 1 if at and rng.random() < 0.2 else at
        at = start + rng.randint(1, 4)
        spans.append((start, at))
    words, w = [], 0
    while w < at + 3:
        w += rng.randint(0, 3)
        end = w + rng.randint(1, 6)
        words.append((w, end))
        w = end
    ss, se = (np.array([s[i] for s in spans], dtype=np.int64) for i in (0, 1))
    ws, we = (np.array([x[i] for x in words], dtype=np.int64) for i in (0, 1))
    got = _overlapped_twice(ss, se, ws, we).tolist()
    assert got == _plain_overlapped_twice(spans, words)


def test_overlapped_twice_with_a_span_inside_another():
    # [0, 9) holds [2, 4): the ends are not sorted; the words after 4 overlap only [0, 9), but
    # the count is of spans starting before the word minus those of the running maximum of
    # the ends that end by its start (the rule continued_words has always used)
    ss, se = np.array([0, 2, 9]), np.array([9, 4, 12])
    ws, we = np.array([0, 5, 8]), np.array([3, 7, 10])
    assert _overlapped_twice(ss, se, ws, we).tolist() == [True, True, True]
    assert not _plain_overlapped_twice(list(zip(ss, se)), list(zip(ws, we)))[1]


def test_mark_or_joiner_of_a_batch_matches_the_code_points():
    tb = U.analyze_texts(["া\u200ca\u0301b", "x\u200d"])
    pos = np.arange(len(tb.cps))
    assert tb.mark_or_joiner(pos).tolist() == [True, True, False, True, False, False, True]


def splitmix(x: int) -> int:
    """splitmix64's finaliser on Python integers (fertility.corpus.sampling.mix64's, written
    plainly: the second method of the draw's tests here and in tests/realworld)."""
    m = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def _drawn(start: int, token_id: int, doc_len: int, scripts: list[str]) -> str:
    """docs/METRICS.md's draw, written plainly: r uniform in [0, letters), the script whose
    letters (in order of first occurrence) cover r."""
    r = splitmix(splitmix(start) ^ splitmix(token_id + (1 << 40)) ^ doc_len) % len(scripts)
    for script in dict.fromkeys(scripts):
        if r < scripts.count(script):
            return script
        r -= scripts.count(script)
    raise AssertionError


def test_a_token_of_two_scripts_counts_in_one_drawn_by_its_letters(tmp_path):
    """The whitespace pre-tokenizer's pieces of "x aবববb abবc aব ক": `x` (Latin), ` aবববb`
    (Latin 2, Bengali 3: drawn, Bengali with probability 3/5), ` abবc` (3 and 1), ` aব` (1
    and 1) and ` ক` (Bengali). The pieces from `regex`, the draw from _drawn (a pre-token's
    id is 0)."""
    text = "x aবববb abবc aব ক"
    path = tmp_path / "mixed.jsonl"
    path.write_text(json.dumps({"text": text}) + "\n", encoding="utf-8")
    f = analyze([path], pretokenizers=["whitespace"], workers=1).frame
    tokens = dict(zip(f.loc[f.group == "script", "key"], f.loc[f.group == "script", "tokens"]))
    want = {"Latn": 1, "Beng": 1}  # x, ক
    for m in regex.finditer(FAMILIES["whitespace"], text):
        letters = ["Latn" if c.isascii() else "Beng" for c in m.group() if not c.isspace()]
        if len(set(letters)) > 1:
            script = _drawn(m.start(), 0, len(text), letters)
            want[script] += 1
    assert sum(want.values()) == 5 and tokens == want


def test_drawn_tokens_split_in_proportion_to_their_letters(tmp_path):
    """2,000 documents each holding one piece of Latin 2, Bengali 3 at another place: Bengali
    gets 3/5 of them within binomial noise (sd sqrt(0.24 / 2000) = 1.1%; 4.5 sd allowed)."""
    rng = random.Random(3)
    # (the draw is a hash of the piece's start, id and the document's length: vary both)
    docs = [
        " ".join(["x" * rng.randint(1, 300), "aবববb", "y" * rng.randint(1, 300)])
        for _ in range(2000)
    ]
    path = tmp_path / "many.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    f = analyze([path], pretokenizers=["whitespace"], workers=1).frame
    tokens = dict(zip(f.loc[f.group == "script", "key"], f.loc[f.group == "script", "tokens"]))
    beng = tokens["Beng"] / 2000
    assert abs(beng - 0.6) < 0.05, beng
