"""The held-out split and the temperature sampler of `fertility fix` (fertility.corpus.sampling).

Expected values are worked out by hand from the documented formulas: p_g = n_g**T / sum n**T,
each language receives at least p_g * budget characters, k = round(f * n) documents held out.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fertility.corpus import sampling as S
from fertility.hashing import mix64


def test_mix64_is_splitmix64():
    # splitmix64 seeded with 0: its first output is 0xE220A8397B1DCDAF (reference C code)
    assert int(mix64(np.array([0], np.uint64))[0]) == 0xE220A8397B1DCDAF


def test_temperature_shares_by_hand():
    # 9000 and 1000 characters at T = 0.5: sqrt -> 94.868 and 31.623 -> 0.75 and 0.25
    p = S.temperature_shares(np.array([9000, 1000]), 0.5)
    # float64 closed forms: two powers, a 2-term sum and a division, a few ulps (~1e-16);
    # approx's default rel=1e-6 is only that rounding. A wrong exponent (T = 1 for 0.5, say)
    # moves a share by 0.15. At T = 0 every weight is 1.0, so the shares are exact.
    assert p == pytest.approx([0.75, 0.25])
    assert S.temperature_shares(np.array([9000, 1000]), 1.0) == pytest.approx([0.9, 0.1])
    assert S.temperature_shares(np.array([9000, 1000]), 0.0).tolist() == [0.5, 0.5]
    # a group without training text gets nothing, not a share of 0**T
    assert S.temperature_shares(np.array([100, 0]), 0.0).tolist() == [1.0, 0.0]


def corpus(sizes: dict[int, tuple[int, int]]):
    """groups/lengths arrays: {group: (documents, chars per document)}."""
    groups, lengths = [], []
    for g, (n, chars) in sizes.items():
        groups += [g] * n
        lengths += [chars] * n
    return np.array(groups), np.array(lengths)


def test_minority_language_gets_at_least_its_documented_share():
    # 1000 documents of 100 chars (100,000) against 10 documents of 50 chars (500).
    groups, lengths = corpus({0: (1000, 100), 1: (10, 50)})
    train = np.ones(len(groups), bool)
    plan = S.plan_copies(groups, lengths, train, temperature=0.3, budget=None, seed=1)
    share = 500**0.3 / (500**0.3 + 100_000**0.3)  # 6.44 / (6.44 + 31.62) = 0.169
    budget = 100_500
    got = np.bincount(groups, weights=plan.copies * lengths)  # recomputed from the copies
    assert plan.budget == budget
    assert got[1] >= share * budget  # the guarantee
    assert got[1] < share * budget + 50  # overshoot below one document
    assert got[0] >= (1 - share) * budget and got[0] < (1 - share) * budget + 100
    # proportional sampling would have given it 0.5%; temperature 0.3 gives it ~17%
    assert got[1] / got.sum() > 0.16
    # the minority is repeated (every document at least 33 times: 0.169 * 100500 / 500)
    assert plan.copies[groups == 1].min() >= math.floor(share * budget / 500)
    # the majority is subsampled: no document is taken more than once
    assert plan.copies[groups == 0].max() == 1


def test_budget_and_held_out_documents():
    groups, lengths = corpus({0: (20, 10), 1: (20, 10)})
    train = np.ones(40, bool)
    train[::4] = False  # held out: never sampled
    plan = S.plan_copies(groups, lengths, train, temperature=1.0, budget=1000, seed=0)
    assert (plan.copies[~train] == 0).all()
    got = np.bincount(groups, weights=plan.copies * lengths)
    assert list(got) == [500, 500]  # 15 docs * 10 chars, 3.33 times each


def test_plan_is_deterministic_per_seed():
    groups, lengths = corpus({0: (50, 7), 1: (5, 13)})
    train = np.ones(55, bool)
    a = S.plan_copies(groups, lengths, train, 0.3, 1234, seed=3).copies
    b = S.plan_copies(groups, lengths, train, 0.3, 1234, seed=3).copies
    c = S.plan_copies(groups, lengths, train, 0.3, 1234, seed=4).copies
    assert (a == b).all() and not (a == c).all()


def test_heldout_counts_by_hand():
    assert list(S.heldout_counts(np.array([60, 10, 3, 2, 1, 0]), 0.1)) == [6, 1, 1, 1, 0, 0]
    assert list(S.heldout_counts(np.array([10, 4]), 0.9)) == [9, 3]  # never all of them
    assert list(S.heldout_counts(np.array([50_000, 300]), 0.1, 2000)) == [2000, 30]


def test_heldout_split_keeps_parallel_files_aligned():
    # two parallel files of 60 lines (groups 0 and 1), a third language of 7 documents
    lines = np.r_[np.arange(1, 61), np.arange(1, 61), np.arange(1, 8)]
    groups = np.r_[np.zeros(60), np.ones(60), np.full(7, 2)].astype(int)
    files = groups.copy()
    held = S.heldout_mask(groups, lines, files, 0.2, seed=0)
    assert held[groups == 0].sum() == 12 and held[groups == 2].sum() == 1
    assert (lines[held & (groups == 0)] == lines[held & (groups == 1)]).all()
    again = S.heldout_mask(groups, lines, files, 0.2, seed=0)
    other = S.heldout_mask(groups, lines, files, 0.2, seed=1)
    assert (held == again).all() and not (held == other).all()
