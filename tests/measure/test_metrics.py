"""The metric registry (fertility.measure.metrics) is the frame's one list of ratios: the frame
has exactly its columns, each value and interval computed as declared, and the accumulator's
state merges across processes by its own declaration."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fertility.measure import analyze
from fertility.measure.counters import COUNTS, Bootstrap, TokenizerAccumulator
from fertility.measure.frame import add_metrics
from fertility.measure.metrics import (
    DISTRIBUTIONS,
    METRIC,
    METRICS,
    NOSPACE_SHARE_MAX,
    Interval,
    Unit,
    interval_columns,
    shown,
)
from fertility.stats import wilson
from fertility.tokenizers.pretokenizer import PretokenizerFamily
from tests.bpe import byte_level_bpe
from tests.textdata import SENTENCE

ID_COLUMNS = ["tokenizer", "kind", "group", "key"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("metrics")
    corpus = root / "corpus"
    corpus.mkdir()
    texts = {
        "bn": [SENTENCE, SENTENCE + " " + SENTENCE, "আমি গান"],
        "en": ["Rain fell. Rivers rose!", "the wet river fields", "x"],
        "th": ["ฉันกินข้าวแล้ว", "ฉันกิน ข้าว"],
        "ja": ["今日は雨です。", "カタカナ"],
    }
    for lang, lines in texts.items():
        (corpus / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    lines = [x for v in texts.values() for x in v]
    byte_level_bpe(lines[:4], 270, path=root / "tok.json")  # few merges: byte pieces
    return analyze([corpus], [f"bpe={root / 'tok.json'}"], pretokenizers=["gpt2"])


def test_the_registry_is_consistent():
    names = [m.name for m in METRICS]
    assert len(set(names)) == len(names) and set(METRIC) == set(names)
    for m in METRICS:
        assert set(m.numerator) | {m.denominator} <= set(COUNTS), m.name
        assert m.name not in COUNTS
        # a Wilson interval is for a proportion: its numerator counts items of its denominator
        assert m.interval is not Interval.WILSON or (m.unit.is_share and not m.of_all), m.name
        # the delta method's sums are streamed for chars / tokens only (counters.Bootstrap)
        if m.interval is Interval.DELTA:
            assert (m.numerator, m.denominator) == (("chars",), "tokens")
        assert m.anchor == f"docs/METRICS.md#{m.name}"
        assert isinstance(m.unit, Unit)
    table = shown("table")
    ranks = [m.table.rank for m in table]
    assert len(set(ranks)) == len(ranks)
    essential = [m.table.essential for m in table]
    assert essential == sorted(essential, reverse=True) and any(essential)  # ranked first
    assert [m.name for m in shown("html")][0] == "chars_per_token"
    assert interval_columns()["chars_per_token"] == ("chars_per_token_lo", "chars_per_token_hi")


def test_the_frame_has_exactly_the_registrys_columns(report):
    metric_columns = [c for m in METRICS for c in m.columns]
    dist = [m.name for m in DISTRIBUTIONS]  # the token-distribution metrics, after the ratios
    assert list(report.frame.columns) == [
        *ID_COLUMNS,
        *COUNTS,
        *metric_columns,
        *dist,
    ]
    row = report.to_dict()["tokenizers"][0]["rows"][0]
    assert list(row) == ["group", "key", *COUNTS, *metric_columns, *dist]


def _num(r, cols):
    return sum(float(r[c]) for c in cols)


def test_every_value_and_interval_is_computed_as_declared(report):
    f = report.frame
    checked = set()
    for _, r in f.iterrows():
        total = f[(f.tokenizer == r.tokenizer) & (f.group == "all")].iloc[0]
        unsegmented = r.nospace_chars / r.chars > NOSPACE_SHARE_MAX
        for m in METRICS:
            k = _num(r, m.numerator)
            n = float(total[m.denominator] if m.of_all else r[m.denominator])
            null = (
                n == 0
                or (m.spaced_only and unsegmented)
                or (m.needs_vocab and r.kind == "pretokenizer")
            )
            value = r[m.name]
            if null:
                assert math.isnan(value), (m.name, r.key)
            else:
                assert value == k / n, (m.name, r.key)
                checked.add(m.name)
            if m.interval is Interval.WILSON:
                lo, hi = r[m.lo], r[m.hi]
                if null:
                    assert math.isnan(lo) and math.isnan(hi), (m.name, r.key)
                else:  # the one Wilson interval, fertility.stats
                    assert (lo, hi) == wilson(k, n), (m.name, r.key)
                    # (stats.wilson's lower bound at k = 0 can round to 1e-18, not 0)
                    assert lo - 1e-12 <= value <= hi
    assert checked == set(METRIC)  # every metric seen with a value somewhere


def test_the_delta_interval_comes_from_the_streamed_sums(report):
    f = report.frame
    allrow = f[(f.tokenizer == "bpe") & (f.group == "all")].iloc[0]
    assert allrow.chars_per_token_lo < allrow.chars_per_token < allrow.chars_per_token_hi
    # one-document rows have no interval
    one = f[f.documents < 2]
    assert len(one) and one.chars_per_token_lo.isna().all() and one.chars_per_token_hi.isna().all()
    assert math.isnan(Bootstrap.interval([1, 5, 2, 25, 10, 4])[0])


def test_nulls_where_a_metric_does_not_apply(report):
    f = report.frame
    fam = f[f.kind == "pretokenizer"]
    for m in METRICS:
        if m.needs_vocab:
            assert fam[list(m.columns)].isna().all().all(), m.name
    th = f[(f.group == "language") & (f.key == "th")]
    for m in METRICS:
        if m.spaced_only:
            assert th[list(m.columns)].isna().all().all(), m.name
    bpe = f[f.tokenizer == "bpe"]
    assert bpe.byte_fallback_rate.gt(0).any() and bpe.byte_fallback_rate_lo.notna().all()


def test_add_metrics_gives_any_frame_of_counts_the_same_numbers(report):
    f = report.frame
    for kind, sub in f.groupby("kind"):
        counts = sub[ID_COLUMNS + list(COUNTS)].reset_index(drop=True)
        add_metrics(counts, has_vocab=kind != "pretokenizer")
        for m in METRICS:
            for col in m.columns:
                if m.interval is Interval.DELTA and col != m.name:
                    assert counts[col].isna().all()  # no document sums here
                    continue
                pd.testing.assert_series_equal(
                    counts[col], sub[col].reset_index(drop=True), check_names=False
                )


def test_the_columns_wilson_is_stats_wilson_to_the_bit():
    rng = np.random.default_rng(0)
    n = np.concatenate([[1, 1, 2, 7, 10**9, 10**12], rng.integers(1, 10**7, 3000)])
    k = rng.integers(0, n + 1)
    k[:6] = [0, 1, 0, 7, 1, 10**12]
    k[: len(n) // 3] = 0  # the k = 0 and k = n edges, many times
    k[len(n) // 3 : len(n) // 2] = n[len(n) // 3 : len(n) // 2]
    counts = dict.fromkeys(COUNTS, 0) | {"chars": 1}
    rows = pd.DataFrame([counts | {"unk_tokens": a, "tokens": b} for a, b in zip(k, n)])
    add_metrics(rows)
    for a, b, lo, hi in zip(k, n, rows.unk_rate_lo, rows.unk_rate_hi):
        want = wilson(float(a), float(b))
        assert (lo.hex(), hi.hex()) == tuple(x.hex() for x in want), (a, b)


def test_a_share_without_an_all_row_is_null():
    row = pd.DataFrame([dict.fromkeys(COUNTS, 3) | {"pretoken_zwj_initial": 0}])
    add_metrics(row)
    assert row.chars_per_token[0] == 1.0 and np.isnan(row.token_share[0])
    assert (row.unk_rate_lo[0], row.unk_rate_hi[0]) == wilson(3, 3)


class _Tok:
    kind, label, vocab_size, unk_id = "hf", "t", 4, None

    def partial_mask(self):
        return np.zeros(4, dtype=bool)


def test_the_accumulator_exports_its_whole_state_and_merges_it():
    a, b = TokenizerAccumulator(_Tok()), TokenizerAccumulator(_Tok())
    state = b.export()
    assert set(state) == set(TokenizerAccumulator.MERGE)
    assert set(state) | set(TokenizerAccumulator.CONFIG) == set(vars(b))
    b.counts.add_table(np.ones((2, len(COUNTS)), np.int64), np.ones_like(b.counts.script))
    b.vocab_all[2] = True
    b.unk_chars[5] = {"x": 2}
    a.merge(b.export())
    a.merge(b.export())
    assert a.counts.lang.shape == (2, len(COUNTS)) and (a.counts.lang == 2).all()
    assert (a.counts.script == 2).all() and a.vocab_all.tolist() == [False, False, True, False]
    assert a.unk_chars[5]["x"] == 4
    # a piece of state without a merge rule is refused, never silently dropped
    b.new_counter = 1
    with pytest.raises(TypeError, match="new_counter"):
        a.merge(b.export())


def test_a_pretokenizer_family_accumulates_no_vocabulary():
    acc = TokenizerAccumulator(PretokenizerFamily("gpt2"))
    assert not acc.track_vocab and acc.export()["vocab_all"].size == 0


def test_before_after_columns_are_columns_of_the_frame():
    """fix's and extend's comparisons read BEFORE_AFTER from the frame: every name must be a
    count column or a metric (or one of its bounds) the registry declares."""
    from fertility.measure.counters import COUNTS
    from fertility.measure.metrics import BEFORE_AFTER, METRICS

    columns = set(COUNTS) | {c for m in METRICS for c in (m.name, *(m.bounds or ()))}
    assert set(BEFORE_AFTER) <= columns, set(BEFORE_AFTER) - columns
