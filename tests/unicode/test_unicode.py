"""Unicode facts on text whose counts were worked out by hand (code point by code point)."""

import numpy as np
import pytest

from fertility import unicode as U
from fertility.unicode.tables import SCRIPT_TABLE
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)
from tests.textdata import AMI, BANGLA, GAN, KSHAMA, SENTENCE  # noqa: F401


def batch(*texts):
    return U.analyze_texts(list(texts))


def test_bengali_sentence_counts_by_hand():
    tb = batch(SENTENCE)
    assert len(tb.cps) == 20
    assert int(tb.gstart.sum()) == 12  # 2 + 1 + 2 + 1 + 2 + 1 + 2 + 1 (danda)
    assert int(tb.nbytes.sum()) == 16 * 3 + 3 + 3  # 16 Bengali letters/signs, danda, 3 spaces
    assert len(tb.word_starts) == 4
    assert tb.word_starts.tolist() == [0, 4, 10, 14]
    assert tb.word_ends.tolist() == [3, 9, 13, 19]
    assert set(U.SCRIPTS[s] for s in tb.script) == {"Beng"}  # spaces and danda join Beng


def test_grapheme_starts_at_hand_positions():
    tb = batch(SENTENCE)
    assert np.flatnonzero(tb.gstart).tolist() == [0, 1, 3, 4, 7, 9, 10, 12, 13, 14, 17, 19]


def test_common_and_inherited_take_neighbouring_script():
    tb = batch("«হ্যাঁ» ok, 2024!", "123 !!")
    scripts = [U.SCRIPTS[s] for s in tb.script]
    first = scripts[: tb.doc_offsets[1]]
    # « at the start takes the following Bengali; the space before "ok" still follows Bengali
    assert first[:8] == ["Beng"] * 8
    assert first[8:] == ["Latn"] * (len(first) - 8)
    assert scripts[tb.doc_offsets[1] :] == ["Zyyy"] * 6  # nothing but Common stays Common


def test_resolved_scripts_alone_give_the_hand_worked_scripts():
    """The scripts without the word, grapheme and running tables (the card's vocabulary
    classes use them): the two tests above, worked by hand, through resolved_scripts."""
    texts = ["«হ্যাঁ» ok, 2024!", "123 !!", "", "abc", "।।", "কখ"]
    doc, script = U.resolved_scripts("".join(texts), [len(t) for t in texts])
    got = [U.SCRIPTS[s] for s in script]
    n = len("«হ্যাঁ» ok, 2024!")
    assert got[:8] == ["Beng"] * 8 and got[8:n] == ["Latn"] * (n - 8)
    assert got[n : n + 6] == ["Zyyy"] * 6
    assert got[n + 6 :] == ["Latn"] * 3 + ["Zyyy"] * 2 + ["Beng"] * 2
    assert doc.tolist() == [0] * n + [1] * 6 + [3] * 3 + [4] * 2 + [5] * 2


def test_scripts_do_not_leak_across_documents():
    tb = batch("abc", "।।", "কখ")
    scripts = [U.SCRIPTS[s] for s in tb.script]
    # the danda-only document has no real script: it must not borrow Latin from document 0
    assert scripts[3:5] == ["Zyyy", "Zyyy"]


def test_words_keep_marks_joiners_and_apostrophes_but_not_doc_boundaries():
    zwj_word = "র\u200d্যাব"  # ra ZWJ hasanta ya aa ba: one word
    tb = batch(f"don't {zwj_word}", "x", "y'")
    spans = list(zip(tb.word_starts.tolist(), tb.word_ends.tolist()))
    assert spans[0] == (0, 5)  # don't
    assert spans[1] == (6, 6 + len(zwj_word))  # whole Bengali word with ZWJ
    assert spans[2:] == [(12, 13), (13, 14)]  # "x", then "y" without the trailing '


def test_mark_or_joiner_flags():
    cps = U.code_points("া\u200ca\u0301b")
    assert U.is_mark_or_joiner(cps).tolist() == [True, True, False, True, False]


def test_script_table_knows_the_issue_scripts():
    for code in ("Beng", "Latn", "Deva", "Taml", "Arab", "Hani", "Thai", "Cyrl", "Hira", "Kana"):
        assert code in U.SCRIPT_INDEX
    cps = U.code_points("aбকक")
    U.ensure_classified(cps)
    tb = batch("aбকक")
    # each letter alone resolves to its own script (no Common involved)
    assert [U.SCRIPTS[s] for s in tb.script] == ["Latn", "Cyrl", "Beng", "Deva"]


def _reference_scripts(texts):
    """A per-character loop over each document: the rule of docs/METRICS.md, written plainly."""
    out = []
    for text in texts:
        raw = [U.SCRIPTS[SCRIPT_TABLE[ord(c)]] for c in text]
        real = [s not in ("Zyyy", "Zinh") for s in raw]
        for i, s in enumerate(raw):
            if real[i]:
                out.append(s)
                continue
            before = [raw[j] for j in range(i - 1, -1, -1) if real[j]]
            after = [raw[j] for j in range(i + 1, len(raw)) if real[j]]
            out.append(before[0] if before else after[0] if after else "Zyyy")
    return out


def test_script_resolution_matches_a_plain_loop_on_random_text():
    import random

    rng = random.Random(7)
    pool = list("ab кধা্ ।,.!?1২ \u0301\u200dกขあア漢") + ["\u0951", "\u064e"]
    # empty documents too: no code point of theirs, but they sit between two neighbours
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 12))) for _ in range(400)]
    tb = batch(*texts)
    assert [U.SCRIPTS[s] for s in tb.script] == _reference_scripts(texts)


@pytest.mark.realworld
def test_script_letters_counts_what_regex_counts_on_real_text(rw):  # noqa: F811
    import regex

    # the samples' "nine in ten letters in its script" reads these counts; regex's own
    # \p{L} and \p{sc=...} over the same text are the second method
    texts, checked = [], 0
    for path in sorted((rw / "text").glob("*.txt")):
        texts += [x for x in path.read_text("utf-8").splitlines() if x.strip()][:40]
    texts.append("Firefox ফায়ারফক্স 火狐 ১২৩ ~ {brand}")  # mixed, with digits and symbols
    tb = U.analyze_texts(texts)
    for i, text in enumerate(texts):
        start = int(tb.doc_offsets[i])
        for s in sorted(set(tb.script[start : start + len(text)].tolist())):
            code = U.SCRIPTS[s]
            if code in ("?", "Zzzz"):
                continue
            for cut in (len(text), min(len(text), 17)):
                want = (
                    len(regex.findall(r"\p{L}", text[:cut])),
                    len(regex.findall(rf"(?=\p{{L}})\p{{sc={code}}}", text[:cut])),
                )
                assert tb.script_letters(start, start + cut, s) == want, (text, code)
                checked += 1
    assert checked > 13 * 40


def test_no_whitespace_is_a_breaker():
    """fertility.unicode.running counts a token's breakers without masking out whitespace:
    it relies on BREAK_RE holding none of the code points `\\s` matches (regex's own
    classes, the two patterns the flag table is filled from)."""
    import regex

    from fertility.unicode.tables import BREAK_RE

    spaces = "".join(regex.findall(r"\s", "".join(map(chr, range(0x110000)))))
    assert len(spaces) >= 25 and " " in spaces and "\u3000" in spaces  # the classes work
    assert BREAK_RE.search(spaces) is None
