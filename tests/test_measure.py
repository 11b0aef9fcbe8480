"""The measurement frame against counts worked out by hand (see test_unicode for the text)."""

import json

import numpy as np
import pytest

from fertility.measure import analyze
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
    assert bn.chars_per_token == pytest.approx(40 / 26)
    assert bn.tokens_per_word == pytest.approx(26 / 8)
    assert bn.grapheme_split_rate == pytest.approx(14 / 24)


def test_scripts_partition_tokens_and_shares(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2", "whitespace"])
    for tok in ("gpt2", "whitespace"):
        f = rep.frame[rep.frame.tokenizer == tok]
        total = f[f.group == "all"].iloc[0]
        for group in ("language", "script"):
            part = f[f.group == group]
            for col in ("tokens", "chars", "bytes", "graphemes", "words"):
                assert part[col].sum() == total[col], (tok, group, col)
            assert part.token_share.sum() == pytest.approx(1.0)
    en = row(rep, "whitespace", "language", "en")
    # "Rain fell. Rivers rose!" -> 4 whitespace pieces, 4 words, 23 chars
    assert (en.tokens, en.words, en.chars) == (4, 4, 23)
    assert en.byte_share == pytest.approx(23 / (108 + 23))


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
    draws = [chars[i].sum() / toks[i].sum()
             for i in (rng.integers(0, 300, 300) for _ in range(2000))]
    lo, hi = np.percentile(draws, [2.5, 97.5])
    assert r.chars_per_token_lo == pytest.approx(lo, abs=0.03)
    assert r.chars_per_token_hi == pytest.approx(hi, abs=0.03)


def test_json_is_strict_and_has_schema(corpus):
    rep = analyze([corpus], pretokenizers=["gpt2"])
    data = json.loads(rep.to_json())
    assert data["schema"] == "fertility.report/1"
    assert data["corpus"]["documents"] == 3
    rows = data["pretokenizers"][0]["rows"]
    assert {r["group"] for r in rows} == {"all", "language", "script"}
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
    cols = ["documents", "chars", "graphemes", "bytes", "words", "tokens", "word_tokens",
            "continued_words", "mark_initial_tokens", "token_boundaries",
            "grapheme_split_boundaries"]
    assert one[cols].equals(big[cols])
    # and the sums are still the hand counts (13 GPT-2 pieces per Bengali sentence)
    assert one[(one.group == "language") & (one.key == "bn")].tokens.item() == 26
