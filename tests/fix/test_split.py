"""The held-out split in runs of lines and the near-duplicates dropped from training
(fertility.corpus.sampling, fertility.corpus.neardup), worked out by hand."""

from __future__ import annotations

import numpy as np

from fertility.corpus import neardup
from fertility.corpus import sampling as S


def runs(lines: np.ndarray) -> list[tuple[int, int]]:
    """Maximal runs of consecutive line numbers, as (first, last)."""
    out: list[tuple[int, int]] = []
    for ln in sorted(lines.tolist()):
        if out and ln == out[-1][1] + 1:
            out[-1] = (out[-1][0], ln)
        else:
            out.append((ln, ln))
    return out


def test_runs_of_lines_are_held_out_whole_and_parallel_files_stay_aligned():
    # two parallel files of 2000 lines (groups 0 and 1): 10% in runs of 20 lines is exactly
    # 200 lines, ten whole runs (each starts at a multiple of 20), the same in both files
    lines = np.r_[np.arange(2000), np.arange(2000)]
    groups = np.r_[np.zeros(2000), np.ones(2000)].astype(int)
    held = S.heldout_mask(groups, lines, groups.copy(), 0.1, seed=3, block=20)
    assert held[groups == 0].sum() == held[groups == 1].sum() == 200
    assert (lines[held & (groups == 0)] == lines[held & (groups == 1)]).all()
    # (two neighbouring runs make one longer stretch)
    assert all(a % 20 == 0 and (b + 1) % 20 == 0 for a, b in runs(lines[held & (groups == 0)]))
    # the runs are the ten with the smallest keys mix64(seed, line // 20), by hand
    keys = S.split_keys(np.arange(100), 3)
    got = set((lines[held & (groups == 0)] // 20).tolist())
    assert got == set(np.argsort(keys)[:10].tolist())
    # block 1 is the single-line split
    assert (
        S.heldout_mask(groups, lines, groups.copy(), 0.1, seed=3, block=1)
        == S.heldout_mask(groups, lines, groups.copy(), 0.1, seed=3)
    ).all()


def test_a_small_language_gets_shorter_runs_and_the_last_run_is_cut():
    # 1000 lines hold out 100: runs of 20 would be five, so runs of 100 // 10 = 10 lines
    lines = np.arange(1000)
    held = S.heldout_mask(np.zeros(1000, int), lines, np.zeros(1000, int), 0.1, 0, block=20)
    assert held.sum() == 100 and len(set((lines[held] // 10).tolist())) == 10
    assert S.run_lengths(np.array([100, 205, 9, 0]), 20).tolist() == [10, 20, 1, 1]
    # 2050 lines hold out 205: ten whole runs of 20, then the first 5 lines of the eleventh
    lines = np.arange(2050)
    held = S.heldout_mask(np.zeros(2050, int), lines, np.zeros(2050, int), 0.1, 0, block=20)
    eleventh = int(np.argsort(S.split_keys(np.arange(103), 0))[10]) * 20
    assert held.sum() == 205 and held[eleventh : eleventh + 5].all()
    assert not held[eleventh + 5 : eleventh + 20].any()


def test_training_documents_sharing_a_shingle_are_the_ones_dropped():
    base = "one two three four five six seven eight nine ten"
    ja = "日本語の文章を書いていますこれはテストです"  # 21 characters, no space: 2 shingles
    held = [base, "short line", ja]
    train = [
        base.upper() + "!",  # the same after normalisation
        "zero " + " ".join(base.split()[:8]),  # shares the first 8 words
        "zero " + " ".join(base.split()[:7]),  # 7 words: shorter than a shingle
        "Short line.",  # a short document equal after normalisation
        "short line and more",  # a short document that is not equal
        "ここで" + ja[:20],  # 20 characters in common
        "ここで" + ja[:19],  # 19
        "1234 5678",  # nothing left after normalisation
    ]
    index = neardup.HeldoutShingles()
    for t in held:
        index.add(t)
    index.freeze()
    assert index.shared(train).tolist() == [True, True, False, True, False, True, False, False]
