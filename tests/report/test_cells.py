"""fertility.report.table.cells (the width of text in terminal cells, which every table column
is laid out by) agrees with the C library's wcswidth, the rule a terminal's own line editor and
most terminal emulators count with, on the words of the real-world text in 13 languages.

This is also the measured reason the tables are not drawn by `rich` (issue #32 asked for it
where it does better): rich 15.0's `cell_len` counts a Bengali, Devanagari or Tamil word by
grapheme clusters ('বাংলা ভাষা' 5 cells where wcswidth says 10, 'हिन्दी' 3 against 5, a ZWJ
sequence 1 against 2), so its columns would drift under the very labels this tool exists for;
`cells` matched wcswidth on all 11 test strings where rich differed on 5 (measured 2026-12-05 in a
separate venv with rich 15.0; the script is in the commit message). Importing rich's console, table and progress also costs
~60 ms and 7 MB per process, against issue #36's 0.8 s / 160 MB budget for a one-line report.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import locale

import pytest

from fertility.report.table import cells
from tests.realworld.conftest import rw  # noqa: F401  (the fixture: real tokenizers and text)


@pytest.fixture(scope="module")
def wcswidth():
    name = ctypes.util.find_library("c")
    assert name, "no C library found (the second method this test needs)"
    libc = ctypes.CDLL(name)
    libc.wcswidth.restype = ctypes.c_int
    libc.wcswidth.argtypes = [ctypes.c_wchar_p, ctypes.c_size_t]
    old = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C.UTF-8")  # wcswidth knows widths only in a UTF-8 locale
    yield lambda s: libc.wcswidth(s, len(s))
    locale.setlocale(locale.LC_CTYPE, old)


def test_hand_counted_widths():
    # counted by hand: Bengali's vowel signs are spacing marks (one cell each), the virama
    # and chandrabindu-like Mn marks take none, CJK takes two, ZWJ none
    assert cells("বাংলা") == 5
    assert cells("हिन्दी") == 5  # ह ि न ् द ी: virama (Mn) 0, the rest 1
    assert cells("中文") == 4
    assert cells("a\u200db") == 2
    assert cells("e\u0301") == 1


def test_cells_equals_wcswidth_on_real_text(rw, wcswidth):  # noqa: F811
    compared = differing = 0
    bad: list[str] = []
    texts = sorted((rw / "text").glob("*.txt"))
    assert len(texts) >= 10
    for path in texts:
        words = set(path.read_text(encoding="utf-8").split()[:20000])
        for w in words:
            expected = wcswidth(w)
            if expected < 0:  # a character the C library calls unprintable: no second opinion
                continue
            compared += 1
            if cells(w) != expected:
                differing += 1
                if len(bad) < 10:
                    bad.append(f"{path.stem}: {w!r} cells={cells(w)} wcswidth={expected}")
    assert compared > 20000  # the comparison really ran over the languages' words
    assert differing == 0, bad
