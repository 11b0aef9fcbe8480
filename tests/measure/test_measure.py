"""The measurement frame against counts worked out by hand (see test_unicode for the text)."""

import json

import numpy as np
import pytest

from fertility.measure import analyze
from fertility.measure.counters import DETAIL
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)
from tests.textdata import SENTENCE


@pytest.fixture()
def corpus(tmp_path):
    (tmp_path / "bn.txt").write_text(SENTENCE + "\n\n" + SENTENCE + "\r\n", encoding="utf-8")
    (tmp_path / "en.txt").write_text("Rain fell. Rivers rose!\n", encoding="utf-8")
    return tmp_path


def row(report, tok, group, key):
    f = report.frame
    sel = f[(f.tokenizer == tok) & (f.group == group) & (f.key == key)]
    assert len(sel) == 1, sel
    return sel.iloc[0]


def test_gpt2_pretokens_on_bengali_by_hand(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2"])
    bn = row(rep, "gpt2", "language", "bn")
    # Pieces of SENTENCE under the GPT-2 regex, by hand:
    # আম|ি| ব|াং|ল|া| গ|া|ন| ক|্|ষম|া।  -> 13 pieces, 6 begin with a mark
    assert bn.documents == 2
    assert bn.chars == 40 and bn.graphemes == 24 and bn.bytes == 108 and bn.words == 8
    assert bn.tokens == 26
    assert bn.mark_initial_tokens == 12
    assert bn.token_boundaries == 24
    assert bn.grapheme_split_boundaries == 14  # 7 of the 12 boundaries fall inside a grapheme
    assert bn.continued_words == 8
    # exact: the frame's ratios are one correctly rounded float64 division of integer counts,
    # as Python's int / int is (the same in this file's other hand-worked ratios)
    assert bn.chars_per_token == 40 / 26
    assert bn.tokens_per_word == 26 / 8
    assert bn.grapheme_split_rate == 14 / 24


def test_scripts_partition_tokens_and_shares(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2", "whitespace"])
    for tok in ("gpt2", "whitespace"):
        f = rep.frame[rep.frame.tokenizer == tok]
        total = f[f.group == "all"].iloc[0]
        for group in ("language", "script"):
            part = f[f.group == group]
            for col in ("tokens", "chars", "bytes", "graphemes", "words"):
                assert part[col].sum() == total[col], (tok, group, col)
            # shares each rounded once, summed: a few ulps from 1; approx's rel=1e-6 is that
            assert part.token_share.sum() == pytest.approx(1.0)
    en = row(rep, "whitespace", "language", "en")
    # "Rain fell. Rivers rose!" -> 4 whitespace pieces, 4 words, 23 chars
    assert (en.tokens, en.words, en.chars) == (4, 4, 23)
    assert en.byte_share == 23 / (108 + 23)


def test_interval_brackets_the_estimate(tmp_path):
    lines = [("ab " * (i % 7 + 1)).strip() for i in range(300)]
    (tmp_path / "en.txt").write_text("\n".join(lines) + "\n")
    rep = analyze([tmp_path], pretokenizers=["whitespace"])
    r = row(rep, "whitespace", "all", "all")
    assert r.chars_per_token_lo < r.chars_per_token < r.chars_per_token_hi
    # a second method: the spread of chars/token over documents resampled with replacement
    chars = np.array([len(x) for x in lines])
    toks = np.array([x.count(" ") + 1 for x in lines])
    rng = np.random.default_rng(1)
    draws = [
        chars[i].sum() / toks[i].sum() for i in (rng.integers(0, 300, 300) for _ in range(2000))
    ]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    # Statistical, not rounding (seeded draws of integer counts: the same on every CPU). The
    # interval is 2.749 +- 0.0142; the delta method and 2000 bootstrap draws differ by at
    # most 1.7e-3 over 20 seeds (the percentiles' Monte Carlo sd is 5e-4). abs=5e-3 (was
    # 0.03) is 3x that; 0.03 was twice the half-width, so an interval of zero width or twice
    # too wide (1.4e-2 off) would have passed.
    assert r.chars_per_token_lo == pytest.approx(lo, abs=5e-3)
    assert r.chars_per_token_hi == pytest.approx(hi, abs=5e-3)


def test_json_is_strict_and_has_schema(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2"])
    data = json.loads(rep.to_json())
    assert data["schema"] == "fertility.report/1"
    assert data["corpus"]["documents"] == 3
    rows = data["pretokenizers"][0]["rows"]
    assert {r["group"] for r in rows} == {"all", "language", "script", "running"}
    assert {"chars_per_token", "chars_per_token_lo", "tokens_per_word"} <= set(rows[0])
    assert all(r["unk_rate"] is None for r in rows)  # a pre-tokenizer has no UNK: null, not 0


def test_unsegmented_scripts_get_null_tokens_per_word(tmp_path):
    (tmp_path / "th.txt").write_text("ฉันกินข้าวแล้ว\n")
    rep = analyze([tmp_path], pretokenizers=["whitespace"])
    th = row(rep, "whitespace", "language", "th")
    assert th.words == 0 and np.isnan(th.tokens_per_word) and np.isnan(th.continued_word_rate)


def test_counts_add_up_across_batches(corpus):
    """Batches of one document and one batch of all give the same frame."""
    one = analyze([corpus], pretokenizers=["gpt2"], batch_size=1, seed=3).frame
    big = analyze([corpus], pretokenizers=["gpt2"], batch_size=512, seed=3).frame
    cols = [
        "documents",
        "chars",
        "graphemes",
        "bytes",
        "words",
        "tokens",
        "word_tokens",
        "continued_words",
        "mark_initial_tokens",
        "token_boundaries",
        "grapheme_split_boundaries",
    ]
    assert one[cols].equals(big[cols])
    # and the sums are still the hand counts (13 GPT-2 pieces per Bengali sentence)
    assert one[(one.group == "language") & (one.key == "bn")].tokens.item() == 26


# ---------------------------------------------------------------- the tokenizer's own pre-tokens


def test_pretoken_counts_by_hand(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2"])
    bn = row(rep, "gpt2", "language", "bn")
    # the 13 GPT-2 pieces above, twice: 6 begin with a vowel sign or the virama, all 4 words
    # (আমি বাংলা গান ক্ষমা) are cut into two or more pieces
    assert (bn.pretokens, bn.pretoken_mark_initial, bn.pretoken_zwj_initial) == (26, 12, 0)
    assert (bn.pretoken_words, bn.pretoken_cut_words) == (8, 8)
    assert bn.pretoken_mark_initial_rate == 12 / 26  # exact, as above
    assert bn.pretoken_cut_word_rate == 1.0
    assert bn.pretoken_mark_initial_rate_lo < 12 / 26 < bn.pretoken_mark_initial_rate_hi
    en = row(rep, "gpt2", "language", "en")  # Rain| fell|.| Rivers| rose|!
    assert (en.pretokens, en.pretoken_mark_initial, en.pretoken_cut_words) == (6, 0, 0)
    assert en.char_share == 23 / (40 + 23)


def test_a_joiner_cut_by_o200k_by_hand(tmp_path):
    # o200k's letter classes hold \p{M} but not ZWJ or ZWNJ (format characters), so the
    # conjunct ক্‍ষ is cut before its ZWJ and ওয়েব‌সাইট (web‌site) before its ZWNJ:
    # ক্ | ‍ষ | " ভাষা" | " ওয়েব" | ‌সাইট -> 5 pre-tokens, 1 begins with a ZWJ, 1 with a ZWNJ,
    # 2 of the 3 words are cut
    text = (
        "\u0995\u09cd\u200d\u09b7 \u09ad\u09be\u09b7\u09be "
        "\u0993\u09af\u09bc\u09c7\u09ac\u200c\u09b8\u09be\u0987\u099f"
    )
    (tmp_path / "bn.txt").write_text(text + "\n", encoding="utf-8")
    rep = analyze([tmp_path], pretokenizers=["o200k"])
    bn = row(rep, "o200k", "script", "Beng")
    assert (bn.pretokens, bn.pretoken_mark_initial) == (5, 0)
    assert (bn.pretoken_zwj_initial, bn.pretoken_zwnj_initial) == (1, 1)
    assert (bn.pretoken_words, bn.pretoken_cut_words) == (3, 2)
    assert bn.pretoken_mark_initial_rate == 1 / 5  # marks and ZWJ only (exact: 1 / 5)


def test_a_tokenizers_own_pretokens_agree_with_regex_over_the_text(tmp_path):
    """The HF tokenizer's ByteLevel(use_regex) pre-tokenizer against the GPT-2 pattern run
    with `regex` over the same lines (a second method)."""
    import unicodedata

    import regex

    from fertility.tokenizers.patterns import FAMILIES
    from tests.bpe import byte_level_bpe

    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    lines = (root / "examples/corpus/hi.txt").read_text(encoding="utf-8").splitlines()[:30]
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "hi.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    byte_level_bpe(lines, 400, path=tmp_path / "tok.json")
    rep = analyze([tmp_path / "c"], [f"bpe={tmp_path / 'tok.json'}"])
    hi = row(rep, "bpe", "language", "hi")
    pieces = [m.group() for x in lines for m in regex.finditer(FAMILIES["gpt2"], x)]
    marks = sum(unicodedata.category(p[0]).startswith("M") for p in pieces)
    assert hi.pretokens == len(pieces) and hi.pretoken_mark_initial == marks > 0


def test_round_trip_changes_are_recorded_per_code_point(tmp_path):
    from tokenizers import normalizers

    from tests.bpe import byte_level_bpe

    # NFKC folds the ligature U+FB01 into "fi" and NFC decomposes the Bengali nukta letter
    # U+09DC into U+09A1 U+09BC (a composition exclusion): two documents of three change
    (tmp_path / "c").mkdir()
    text = ["The \ufb01rst line.", "plain text", "\u09dc\u09be\u09b2"]
    (tmp_path / "c" / "en.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    byte_level_bpe(text, 300, normalizer=normalizers.NFKC(), path=tmp_path / "tok.json")
    rep = analyze([tmp_path / "c"], [f"nfkc={tmp_path / 'tok.json'}"])
    en = row(rep, "nfkc", "language", "en")
    assert (en.roundtrip_checked, en.roundtrip_failures) == (3, 2)
    ch = rep.roundtrip[("nfkc", "en")]
    assert ch["failures"] == 2
    assert ch["lost"] == {"\ufb01": 1, "\u09dc": 1}
    assert ch["added"] == {"f": 1, "i": 1, "\u09a1": 1, "\u09bc": 1}
    assert ch["causes"] == {"compatibility": 1, "composition_exclusion": 1}


def test_new_counters_merge_exactly_across_processes(tmp_path):
    from tokenizers import normalizers

    from tests.bpe import byte_level_bpe

    (tmp_path / "c").mkdir()
    lines = [
        f"{'Ｆｕｌｌ' if i % 3 == 0 else 'plain'} \u0995\u09cd\u200d\u09b7 \u09dc {i}"
        for i in range(300)
    ]
    (tmp_path / "c" / "bn.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    byte_level_bpe(lines, 300, normalizer=normalizers.NFKC(), path=tmp_path / "tok.json")
    kw = dict(pretokenizers=["o200k"], batch_size=16, detail_docs=None, seed=1)
    one = analyze([tmp_path / "c"], [f"t={tmp_path / 'tok.json'}"], workers=1, **kw)
    two = analyze([tmp_path / "c"], [f"t={tmp_path / 'tok.json'}"], workers=2, **kw)
    cols = list(DETAIL)  # the per-document checks' counts
    assert one.frame[cols].equals(two.frame[cols])
    assert one.roundtrip == two.roundtrip and one.roundtrip[("t", "bn")]["failures"] == 300
    # every line holds U+09DC (NFC and NFKC decompose it); every third full-width letters
    assert one.roundtrip[("t", "bn")]["causes"] == {
        "composition_exclusion": 300,
        "compatibility": 100,
    }


def test_the_fast_encode_path_gives_the_librarys_tokens_and_spans_on_real_text(tmp_path):
    """Measuring encodes byte-level BPEs with encode_batch_fast (no offsets) and rebuilds
    spans from token byte lengths; the library's encode_batch with its own character offsets
    must give the same ids and spans, in 13 languages of real text."""
    from pathlib import Path

    from tokenizers import Regex, Tokenizer, pre_tokenizers

    from fertility.tokenizers import load_tokenizer
    from fertility.tokenizers.patterns import FAMILIES
    from tests.bpe import byte_level_bpe

    excerpt = Path(__file__).resolve().parents[1] / "realworld" / "excerpt"
    texts = [
        x
        for p in sorted(excerpt.glob("*.txt"))
        for x in p.read_text(encoding="utf-8").splitlines()
        if x.strip()
    ]
    split = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(FAMILIES["o200k"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    byte_level_bpe(texts, 2000, pre_tokenizer=split, path=tmp_path / "tok.json")
    ours = load_tokenizer(str(tmp_path / "tok.json"))
    assert ours._fast  # the path under test
    ids, starts, ends, counts = ours.encode_flat(texts)
    lib = Tokenizer.from_file(str(tmp_path / "tok.json")).encode_batch(
        texts, add_special_tokens=False
    )
    assert counts.tolist() == [len(e.ids) for e in lib]
    assert ids.tolist() == [i for e in lib for i in e.ids]
    assert starts.tolist() == [s for e in lib for s, _ in e.offsets]
    assert ends.tolist() == [t for e in lib for _, t in e.offsets]
    assert len(texts) > 500 and (ends - starts).max() > 1


@pytest.mark.realworld
def test_the_detail_checks_stop_at_n_times_detail_chars_on_long_documents(tmp_path, rw):  # noqa: F811
    from fertility.options import DETAIL_CHARS

    # Russian: documents of 10 real lines (hundreds of characters); English: one line each
    ru = (rw / "text" / "ru.txt").read_text("utf-8").splitlines()
    en = (rw / "text" / "en.txt").read_text("utf-8").splitlines()
    docs = {
        "ru": [" ".join(ru[i : i + 10]) for i in range(0, 300, 10)],
        "en": [x for x in en if x.strip()][:30],
    }
    (tmp_path / "c").mkdir()
    for lang, lines in docs.items():
        (tmp_path / "c" / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    n = 6
    # by hand: a document is checked while fewer than n are and the ones before it hold
    # under n x DETAIL_CHARS characters (batches of 4 carry the count across batches)
    expect = {}
    for lang, lines in docs.items():
        checked = chars = 0
        for line in lines:
            if checked == n or chars >= n * DETAIL_CHARS:
                break
            checked, chars = checked + 1, chars + len(line)
        expect[lang] = (checked, chars)
    assert expect["en"][0] == n and 1 < expect["ru"][0] < n  # both limits are exercised
    tok = rw / "tokenizers" / "o200k_base.tiktoken"
    rep = analyze([tmp_path / "c"], [f"o200k={tok}"], detail_docs=n, batch_size=4)
    for lang, (checked, chars) in expect.items():
        r = row(rep, "o200k", "language", lang)
        assert (r.roundtrip_checked, r.pretoken_chars) == (checked, chars), lang
