"""What a failed round trip changed, and why: recorded on the detail pass, read by the
`roundtrip` rule (fertility.diagnose) and the gate's round-trip check.

A document fails when decode(encode(text)) != text. Its change is recorded as two multisets
of code points: `lost` (in the text more often than in the decoded text) and `added` (the
reverse), so "U+0041 lost 12 times, U+0061 added 12 times" is lowercasing seen, not guessed.
Each failing document gets the causes its evidence shows (a document may have several):

  unk                    the tokenizer produced its unknown token in the document
  lowercase              a lost letter whose lowercase form was added
  stripped_accents       a lost combining mark, or a lost letter whose base letter (without
                         its marks) was added
  composition_exclusion  a lost character that NFC does not keep (Bengali U+09DC/U+09DD/
                         U+09DF, Devanagari U+0958..U+095F, ...): NFC decomposes it and never
                         recomposes it
  compatibility          a lost character that NFKC/NFKD folds (ligatures, full-width forms)
  prefix_space           decode gives the text with one space in front: the pre-tokenizer
                         added it (ByteLevel or Metaspace with add_prefix_space / prepend
                         "always") and the decoder keeps it; only when the text did not
                         begin with whitespace, and counted apart from `whitespace`
  whitespace             spaces or other whitespace lost or added (other than that one)
  reordered              the same code points in another order (canonical mark reordering)
  normaliser             the normaliser changed the text in a way none of the above explains
  decoder                decode does not give back even the normalised text, for a reason
                         none of the above explains
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from functools import lru_cache

import numpy as np

EXAMPLES = 3  # changed passages kept per (tokenizer, language)


def new_changes() -> dict:
    return {
        "failures": 0,
        "lost": Counter(),
        "added": Counter(),
        "causes": Counter(),
        "examples": [],
    }


def record(
    changes: dict, text: str, decoded: str, normalized: str, unk_text: str | None, order
) -> None:
    """Add one failing document (decoded != text) to `changes`. unk_text: how the unknown
    token decodes ("[UNK]") when the document has one, else None; its letters are the UNK's
    trace, not text the tokenizer added, so they are not counted as added. The causes: the
    normaliser's part is read from text -> normalized, the decoder's from normalized ->
    decoded, so a letter lost to UNK is never blamed on the normaliser."""
    had_unk = unk_text is not None
    seen = decoded.replace(unk_text, "") if unk_text else decoded
    space = decoded != normalized and prefix_space(normalized, decoded)
    rest = decoded[1:] if space else decoded
    # Every string's code points are counted once, in one array (a long document failed
    # by a lowercasing normaliser cost twelve Counters before: 6 ms a document of 6 KB).
    tally = _Tally(text, seen, normalized, rest)
    lost, added = tally.diff(0, 1)
    changes["failures"] += 1
    changes["lost"].update(lost)
    changes["added"].update(added)
    out = _char_causes(text, normalized, *tally.diff(0, 2))
    if normalized != text and not out - {"whitespace"}:
        out.add("normaliser")
    if had_unk:
        out.add("unk")
    if decoded != normalized:
        if space:
            out.add("prefix_space")
        if rest != normalized:
            dec = _char_causes(normalized, rest, *tally.diff(2, 3)) & {"whitespace", "reordered"}
            out |= dec
            if not had_unk and not dec:
                out.add("decoder")
    # sorted: a set's order follows the string hash, which differs per process (the counts
    # files of two runs of the same inputs list the causes in one order)
    changes["causes"].update(sorted(out))
    if len(changes["examples"]) < EXAMPLES:
        changes["examples"].append({**diff_example(text, decoded), "order": order})


class _Tally:
    """How often each code point occurs in each of several strings, each distinct one
    counted once."""

    def __init__(self, *texts: str):
        # Each distinct string is counted once (the decoded text is usually also the one
        # `seen` and `rest` name), its code points found by a search among the sorted
        # distinct ones: np.unique with the inverse sorts stably (the tally and its three
        # diffs over MiniLM's 562 failing 50-line documents: 0.25 -> 0.085 s, the same).
        distinct = list(dict.fromkeys(texts))
        self.which = [distinct.index(t) for t in texts]
        # surrogatepass: a decoder may hand back a lone surrogate, which is still a code point
        arrays = [np.frombuffer(t.encode("utf-32-le", "surrogatepass"), "<u4") for t in distinct]
        self.keys = np.unique(np.concatenate(arrays))
        self.counts = [
            np.bincount(np.searchsorted(self.keys, a), minlength=len(self.keys)) for a in arrays
        ]

    def diff(self, i: int, j: int) -> tuple[dict[str, int], dict[str, int]]:
        """The code points string i has more often than string j (lost on the way from i to
        j), and those it has less often (added), with how many more: plain dicts, split
        from the nonzero differences in one loop (two Counters and four masks a pair cost
        more than the tally on documents of a sentence or two)."""
        if self.which[i] == self.which[j]:
            return {}, {}
        d = self.counts[self.which[i]] - self.counts[self.which[j]]
        nz = np.flatnonzero(d)
        lost, added = {}, {}
        for c, v in zip(map(chr, self.keys[nz].tolist()), d[nz].tolist()):
            if v > 0:
                lost[c] = v
            else:
                added[c] = -v
        return lost, added


def prefix_space(before: str, after: str) -> bool:
    """`after` is `before` with a space put in front, where `before` began with no whitespace
    (what a pre-tokenizer's add_prefix_space does; anything else changed is judged apart)."""
    return after.startswith(" ") and not before[:1].isspace() and len(after) > len(before)


def _char_causes(before: str, after: str, lost: dict, added: dict) -> set[str]:
    """What turned `before` into `after`, from the code points lost and added (_Tally.diff)."""
    if before == after:
        return set()
    if not lost and not added:
        return {"reordered"}
    out = {"whitespace"} if any(c.isspace() for c in added) else set()
    for c in lost:
        space, nfc, nfkc, lower, lower_base, base, mark = _facts(c)
        if space:
            out.add("whitespace")
        elif nfc:
            out.add("composition_exclusion")
        elif nfkc:
            out.add("compatibility")
        elif lower is not None and (lower in added or lower_base in added):
            out.add("lowercase")
            if base is not None and base.lower() in added:
                out.add("stripped_accents")
        elif mark or (base is not None and base in added):
            out.add("stripped_accents")
    return out


@lru_cache(maxsize=8192)  # the characters that fail round trips: a few hundred per script
def _facts(c: str) -> tuple:
    """What _char_causes asks of a lost character, worked out once per character (a
    lowercasing normaliser loses the same capitals in every document): whitespace, not kept by
    NFC, folded by NFKC, its lowercase form and that form's first code point after NFD when it
    has one (else None), the base letter it decomposes to (NFD, else None), a mark."""
    nfd = unicodedata.normalize("NFD", c)
    lower = c.lower() if c != c.lower() else None
    return (
        c.isspace(),
        unicodedata.normalize("NFC", c) != c,
        unicodedata.normalize("NFKC", c) != c,
        lower,
        None if lower is None else unicodedata.normalize("NFD", lower)[0],
        nfd[0] if len(nfd) > 1 else None,
        unicodedata.category(c).startswith("M"),
    )


def merge(mine: dict, theirs: dict) -> None:
    """Add another process's changes of the same (tokenizer, language) into `mine`."""
    mine["failures"] += theirs["failures"]
    for k in ("lost", "added", "causes"):
        mine[k].update(theirs[k])
    mine["examples"] = sorted(mine["examples"] + theirs["examples"], key=lambda x: x["order"])[
        :EXAMPLES
    ]


def diff_example(before: str, after: str, context: int = 30) -> dict:
    """The passage around the first difference of two strings."""
    i = next(
        (k for k, (x, y) in enumerate(zip(before, after)) if x != y), min(len(before), len(after))
    )
    lo = max(0, i - context)
    return {"before": before[lo : i + context], "after": after[lo : i + context], "at": i}
