"""Extended grapheme cluster boundaries (UAX #29), vectorised over code point arrays.

`regex.findall(r"\\X", text)` is correct but costs ~0.1 s per MB; the measuring path needs
the same answer an order of magnitude faster. We get it in three steps:

1. Every code point gets one class byte, looked up in a module-level table of 0x110000
   entries. The table is filled lazily, only for code points a batch actually contains, and
   every property comes from the installed `regex` module (`\\p{Grapheme_Cluster_Break=..}`,
   `\\p{Extended_Pictographic}`, `\\p{Indic_Conjunct_Break=..}`), so the boundaries follow
   the same Unicode version as its `\\X`; no Unicode data is written here by hand.
2. Rules GB3-GB9b depend only on the pair (previous class, current class), so a 128x128
   table answers them with one gather per code point. It also flags the pairs where a
   context rule (GB9c Indic conjuncts, GB11 emoji ZWJ sequences, GB12/13 regional-indicator
   pairs) may forbid the break.
3. The flagged positions (in Bengali text about one code point in eight, nearly all a
   consonant after a vowel sign or virama) are resolved by walking left over the rule's
   run of classes: a few vectorised steps on a shrinking set of positions, then
   flatnonzero/searchsorted over the batch for the rare longer runs.

The properties, and which form of GB9c applies, are those of the installed regex (checked
with regex 2026.11.19, Unicode 18.0.0, where GB9c is Linker InCB_Extend* x Consonant and a
few linkers are not Grapheme_Cluster_Break=Extend); tests/unicode/test_graphemes.py checks the
result against \\X itself.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import regex

# Class byte: bits 0-3 Grapheme_Cluster_Break, bit 4 Extended_Pictographic,
# bits 5-6 Indic_Conjunct_Break. The largest real value is 127, so 255 can mean "unseen".
GCB_NAMES = (
    "Other",
    "CR",
    "LF",
    "Control",
    "Extend",
    "ZWJ",
    "Regional_Indicator",
    "Prepend",
    "SpacingMark",
    "L",
    "V",
    "T",
    "LV",
    "LVT",
)
(OTHER, CR, LF, CONTROL, EXTEND, ZWJ, RI, PREPEND, SPACINGMARK, L, V, T, LV, LVT) = range(14)
EXT_PICT = 1 << 4
INCB_NONE, INCB_CONSONANT, INCB_EXTEND, INCB_LINKER = 0, 1, 2, 3
INCB_SHIFT = 5
_UNSEEN = 255
_MAX_CP = 0x10FFFF

# Pair-table verdicts: 0 = break, 1 = no break, higher bits = "no break if this context rule
# holds" (several may apply; the break is forbidden if any of them holds).
_NO_BREAK, _CHECK_GB9C, _CHECK_GB11, _CHECK_RI = 1, 2, 4, 8
_SHORT_RUN = 4  # steps walked one at a time before looking runs up in bulk


def _compile_properties() -> list[tuple[regex.Pattern, int]]:
    """(pattern, bits) per property value; the values of one property never overlap."""
    props = [
        (regex.compile(rf"\p{{Grapheme_Cluster_Break={name}}}"), code)
        for code, name in enumerate(GCB_NAMES)
        if code != OTHER
    ]
    props.append((regex.compile(r"\p{Extended_Pictographic}"), EXT_PICT))
    if _GB9C_APPLIES:
        for name, code in (
            ("Consonant", INCB_CONSONANT),
            ("Extend", INCB_EXTEND),
            ("Linker", INCB_LINKER),
        ):
            props.append((regex.compile(rf"\p{{Indic_Conjunct_Break={name}}}"), code << INCB_SHIFT))
    return props


def _probe_gb9c() -> tuple[bool, bool]:
    """Which rule GB9c the installed regex's \\X applies: (applies at all, needs a consonant
    before the linker). It arrived in Unicode 15.1 (regex 2024.6.22 implemented it) and
    Unicode 18 dropped the leading consonant. Without it, every code point keeps InCB=None."""
    try:
        regex.compile(r"\p{Indic_Conjunct_Break=Linker}")
    except regex.error:
        return False, False
    applies = len(regex.findall(r"\X", "\u0915\u094d\u0924")) == 1  # KA VIRAMA TA
    needs_consonant = len(regex.findall(r"\X", "a\u094d\u0924")) == 2  # a VIRAMA TA
    return applies, needs_consonant


_GB9C_APPLIES, _GB9C_NEEDS_CONSONANT = _probe_gb9c()
_PROPERTIES = _compile_properties()
_TABLE = np.full(_MAX_CP + 1, _UNSEEN, dtype=np.uint8)
_TABLE_LOCK = threading.Lock()


def _classify(cps: np.ndarray) -> None:
    """Fill the table for these distinct code points (one regex scan per property value)."""
    text = "".join(map(chr, cps.tolist()))
    classes = np.zeros(len(cps), dtype=np.uint8)
    for pattern, bits in _PROPERTIES:
        hits = [m.start() for m in pattern.finditer(text)]
        classes[hits] |= np.uint8(bits)
    _TABLE[cps] = classes


def _classes(cps: np.ndarray) -> np.ndarray:
    """Class byte of each code point, classifying the ones never seen before."""
    # take(): numpy's fancy indexing first copies a uint32 index to intp, 3-4x the gather
    try:
        cls = _TABLE.take(cps)
    except IndexError:
        raise ValueError(f"code point above U+{_MAX_CP:X} in the input array") from None
    if cls.max() == _UNSEEN:  # the cheapest "any unseen?": 255 is the largest byte
        # Distinct code points by scatter into a bitmap: no sort of the whole batch.
        unseen = np.zeros(_MAX_CP + 1, dtype=bool)
        unseen[cps[cls == _UNSEEN]] = True
        with _TABLE_LOCK:
            _classify(np.flatnonzero(unseen))
        cls = _TABLE.take(cps)
    return cls


def _pair_verdicts(prev: np.ndarray, cur: np.ndarray) -> np.ndarray:
    """GB3-GB13 for (previous, current) class pairs: the first rule that applies decides, in
    the order UAX #29 gives them (np.select takes the first condition that holds)."""
    gp, gc = prev & 0x0F, cur & 0x0F
    incb_p, incb_c = prev >> INCB_SHIFT, cur >> INCB_SHIFT
    controls = np.isin(gp, (CR, LF, CONTROL)) | np.isin(gc, (CR, LF, CONTROL))
    rules = [
        (gp == CR) & (gc == LF),  # GB3: no break
        controls,  # GB4, GB5: break
        (gp == L) & np.isin(gc, (L, V, LV, LVT)),  # GB6
        np.isin(gp, (LV, V)) & np.isin(gc, (V, T)),  # GB7
        np.isin(gp, (LVT, T)) & (gc == T),  # GB8
        np.isin(gc, (EXTEND, ZWJ, SPACINGMARK)) | (gp == PREPEND),  # GB9, GB9a, GB9b
    ]
    verdicts = [_NO_BREAK, 0, _NO_BREAK, _NO_BREAK, _NO_BREAK, _NO_BREAK]
    # GB999 unless a context check holds (several may apply)
    context = np.where(
        (incb_c == INCB_CONSONANT) & np.isin(incb_p, (INCB_EXTEND, INCB_LINKER)), _CHECK_GB9C, 0
    )  # GB9c
    context |= np.where((gp == ZWJ) & ((cur & EXT_PICT) != 0), _CHECK_GB11, 0)  # GB11
    context |= np.where((gp == RI) & (gc == RI), _CHECK_RI, 0)  # GB12, GB13
    return np.select(rules, verdicts, default=context).astype(np.uint8)


def _build_pair_table() -> np.ndarray:
    """The verdict of every pair of class bytes, indexed by prev << 7 | cur."""
    prev, cur = np.divmod(np.arange(128 * 128), 128)
    return _pair_verdicts(prev, cur)


_PAIRS = _build_pair_table()


def _skip_back(
    cls: np.ndarray,
    pos: np.ndarray,
    barrier: np.ndarray,
    skipped: Callable[[np.ndarray], np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Walk left from each of `pos` over code points whose class is `skipped`.

    Returns (stop, inside): where each walk stopped, and False where it ran into the start
    of its document (a `barrier` position, always including 0) before finding a code point
    of another class; `stop` is then the position before that document start.
    """
    stop = pos.copy()
    inside = np.ones(len(pos), dtype=bool)
    walking = np.flatnonzero(skipped(cls[pos]))
    # Real runs are short (a vowel sign, a nukta): step them on a shrinking set ...
    for _ in range(_SHORT_RUN):
        if not len(walking):
            return stop, inside
        at = stop[walking]
        off = barrier[at]
        inside[walking[off]] = False
        stop[walking] = at - 1
        walking = walking[~off]
        walking = walking[skipped(cls[stop[walking]])]
    if len(walking):
        # ... and find the start of longer ones from the batch's runs, so a pathological
        # run of a million marks costs a few passes, not a million Python steps.
        runs = np.flatnonzero(skipped(cls))
        first = barrier[runs]
        first[0] = True
        first[1:] |= np.diff(runs) != 1
        run_first = np.maximum.accumulate(np.where(first, np.arange(len(runs)), 0))
        run_start = runs[run_first[np.searchsorted(runs, stop[walking])]]
        stop[walking] = run_start - 1
        inside[walking] = ~barrier[run_start]
    return stop, inside


def _incb(cls: np.ndarray) -> np.ndarray:
    return cls >> INCB_SHIFT


def _gcb(cls: np.ndarray) -> np.ndarray:
    return cls & 0x0F


# Each context rule gets the candidate positions (the code point after the flagged pair,
# never a barrier that matters: a document start is forced to break afterwards anyway).


def _gb9c_holds(cls: np.ndarray, cand: np.ndarray, barrier: np.ndarray) -> np.ndarray:
    """GB9c: Linker InCB_Extend* x Consonant (Unicode 18); before 18 the chain also had to
    hang on a Consonant: Consonant [Extend Linker]* Linker [Extend Linker]* x Consonant."""
    stop, inside = _skip_back(cls, cand - 1, barrier, lambda c: _incb(c) == INCB_EXTEND)
    holds = inside & (_incb(cls[stop]) == INCB_LINKER)
    if _GB9C_NEEDS_CONSONANT:
        # The last Linker is at `stop`; walk on over Extend/Linker to the consonant.
        holds[holds] = ~barrier[stop[holds]]  # a linker opening its document hangs on nothing
        linker = stop[holds]
        stop, inside = _skip_back(cls, linker - 1, barrier, lambda c: _incb(c) >= INCB_EXTEND)
        holds[holds] = inside & (_incb(cls[stop]) == INCB_CONSONANT)
    return holds


def _gb11_holds(cls: np.ndarray, cand: np.ndarray, barrier: np.ndarray) -> np.ndarray:
    """GB11: ExtPict Extend* ZWJ x ExtPict (the ZWJ sits at cand - 1)."""
    holds = ~barrier[cand - 1]  # the ZWJ opens its document: nothing before it counts
    cand = cand[holds]
    stop, inside = _skip_back(cls, cand - 2, barrier, lambda c: _gcb(c) == EXTEND)
    holds[holds] = inside & (cls[stop] & EXT_PICT > 0)
    return holds


def _ri_holds(cls: np.ndarray, cand: np.ndarray, barrier: np.ndarray) -> np.ndarray:
    """GB12/13: no break inside a pair, i.e. after an odd run of regional indicators."""
    stop, _ = _skip_back(cls, cand - 1, barrier, lambda c: _gcb(c) == RI)
    return (cand - (stop + 1)) % 2 == 1


def grapheme_starts(cps: np.ndarray, doc_starts: np.ndarray | None = None) -> np.ndarray:
    """cps: uint32 code points of one or many documents concatenated; doc_starts: bool mask
    (same length) True at the first code point of each document (a boundary is forced
    there, and no rule looks across it). Returns a bool mask: True where an extended
    grapheme cluster starts."""
    cps = np.asarray(cps)
    if cps.ndim != 1:
        raise ValueError(f"grapheme_starts expects a 1-D code point array, got {cps.ndim}-D")
    n = len(cps)
    if doc_starts is not None:
        doc_starts = np.asarray(doc_starts, dtype=bool)
        if doc_starts.shape != cps.shape:
            raise ValueError(
                f"doc_starts has shape {doc_starts.shape}, code points have {cps.shape}"
            )
    if n == 0:
        return np.zeros(0, dtype=bool)
    if cps.dtype.kind not in "iu":
        raise ValueError(f"grapheme_starts expects integer code points, got {cps.dtype}")
    if cps.dtype.kind == "i" and cps.min() < 0:
        raise ValueError("negative code point in the input array")
    cls = _classes(cps)
    if _PAIRS[0] == 0 and cls.max() == 0:  # all Other (much Latin, Cyrillic, Han text): GB999
        return np.ones(n, dtype=bool)
    barrier = np.zeros(n, dtype=bool) if doc_starts is None else doc_starts.copy()
    barrier[0] = True

    pair = cls[:-1].astype(np.uint16) << 7
    pair |= cls[1:]
    verdict = _PAIRS.take(pair)
    starts = np.empty(n, dtype=bool)
    np.not_equal(verdict, _NO_BREAK, out=starts[1:])

    cand = np.flatnonzero(verdict > _NO_BREAK) + 1  # context rules: position after the pair
    if len(cand):
        checks = verdict[cand - 1]
        holds = np.zeros(len(cand), dtype=bool)
        for flag, rule in (
            (_CHECK_GB9C, _gb9c_holds),
            (_CHECK_GB11, _gb11_holds),
            (_CHECK_RI, _ri_holds),
        ):
            sel = np.flatnonzero(checks & flag)
            if len(sel):
                holds[sel] |= rule(cls, cand[sel], barrier)
        starts[cand[holds]] = False
    starts[0] = True
    starts |= barrier  # document starts always break, whatever the pair said
    return starts
