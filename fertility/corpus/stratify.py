"""Which documents a corpus keeps: the keyed hash of --sample and the stratified draw of
--max-docs, across every file and language.

Keys
    Every document has a key: the first 8 bytes of BLAKE2b over (seed, path relative to its
    argument, line or record number), read as a big-endian integer, uniform on [0, 2**64).
    `sample=f` keeps the documents whose key is below f * 2**64: about a share f of each
    file, whatever the order or the batch sizes.

max_docs: a stratified sample
    With `max_docs=N` the corpus is read once more before it is given out (the key pass:
    the same reader, so the same documents and numbers, but nothing measured and no text
    kept). It counts the documents of each language that --sample keeps (all of them
    without it), n_g of n in all, and gives language g a quota k_g of N: floor(N n_g / n),
    plus one for the N - sum(floor) languages with the largest remainders, those that would
    otherwise get none first (ties: a seeded hash of the label). So |k_g - N n_g / n| < 1
    for every language, and as many languages as that bound allows get a document (the
    remainders go first to those that would otherwise get none).
    Within a language the k_g documents with the smallest keys are kept (ties, which need
    the same relative path under two arguments: the first file, then the first line), a
    uniform random sample of it that the seed reproduces. With --sample too, the sampled
    documents are those with keys below f * 2**64, so these are the k_g smallest of them.

    Why stratified rather than the N smallest keys over the whole corpus (a simple random
    sample): that one's count of language g is binomial, N p_g (1 - p_g) in variance: at
    N = 3000 and p_g = 1/13 it is off by 15 documents (one standard deviation), and a
    language with a tenth of a percent of the corpus gets none with probability e**-3, 5%.
    Stratified, every share is exact up to one document.

Memory
    The key pass keeps, per language, the smallest keys met so far, not all of them: those
    under a shared cut (the pool, SPARE * N smallest keys over all languages, which hold
    each language in about its share, twice its quota) and at least FLOOR of each. Memory
    is then at most 2 * (SPARE * N + FLOOR * languages) keys plus one block's (one Python
    integer each, about 60 bytes with its list slot), and a sorted copy of them while they
    are cut. A language whose quota
    turns out larger than the keys held (twice as many expected: the chance is below
    e**(-FLOOR/4)) is drawn by one more key pass for those languages alone, keeping
    exactly their quotas. The selection is the same whatever these two settings are
    (tests/corpus/test_stratified.py sets them to force that pass).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain

# A key pass yields, per block of documents: file index, relative path, numbers, labels.
KeyBlock = tuple[int, str, Sequence[int], list[str]]

SPARE = 2.0  # the shared pool holds SPARE * N keys: each language about twice its quota
FLOOR = 100  # keys held per language whatever the pool: small quotas are always covered

# A held key packs (key, file index, number) into one integer that sorts as that tuple:
# one int per document, not a tuple of three (which costs about three times the memory).
# Numbers below 2**48 (a .txt line takes a byte, so that is 256 TB of one file).
_FILE_SHIFT = 48
_KEY_SHIFT = 96
_PLACE = (1 << _KEY_SHIFT) - 1  # (file index, number) of a packed key
_ABOVE_ALL = 1 << 192  # above every packed key: a language nothing has been cut from


def keys(seed: int, rel: str, numbers: Iterable[int]) -> list[int]:
    """The key of each document `numbers` names in the file at `rel` (see the top)."""
    prefix = f"{seed}\0{rel}\0".encode("utf-8", "surrogateescape")
    # the hash of the prefix copied and continued: 40% faster than hashing it each time
    copy, from_bytes = hashlib.blake2b(prefix, digest_size=8).copy, int.from_bytes
    out = []
    for n in numbers:
        h = copy()
        h.update(b"%d" % n)
        out.append(from_bytes(h.digest(), "big"))
    return out


def place(file_index: int, number: int) -> int:
    """The one integer that names a document in the selection (file index, number)."""
    return (file_index << _FILE_SHIFT) | number


def allocate(counts: dict[str, int], wanted: int, seed: int) -> dict[str, int]:
    """Quotas of `wanted` documents in proportion to `counts`, by largest remainder (integer
    arithmetic: no rounding error), languages that would otherwise get none first among
    the remainders. Each quota is the floor or the ceiling of wanted * count / total, so
    within one document of it; all of `counts` when wanted is at least their total."""
    total = sum(counts.values())
    if wanted >= total:
        return dict(counts)
    quota = {g: wanted * n // total for g, n in counts.items()}
    rest = {g: wanted * n % total for g, n in counts.items()}
    # sum(rest) = total * (wanted - sum(quota)), each rest < total: at least that many
    # languages have a remainder, and every language at 0 with documents has one.
    order = sorted(
        (g for g in counts if rest[g]),
        key=lambda g: (quota[g] > 0, -rest[g], _tiebreak(seed, g)),
    )
    for g in order[: wanted - sum(quota.values())]:
        quota[g] += 1
    return quota


def _tiebreak(seed: int, label: str) -> bytes:
    return hashlib.blake2b(f"{seed}\0{label}".encode("utf-8", "surrogateescape")).digest()


class Smallest:
    """Per language, the smallest packed keys met so far, in bounded memory.

    For each language, `held[g]` is every key met of g that is at most `bound[g]`: its
    smallest ones, all of them while nothing was cut. A cut only lowers the bound. `cap`
    gives the most keys a language can need; `pool` (None: no shared cut) and `floor` are
    the shared cut of the module docstring."""

    def __init__(self, cap: Callable[[str], int], pool: int | None, floor: int):
        self.cap, self.pool, self.floor = cap, pool, floor
        self.held: dict[str, list[int]] = {}
        self.bound: dict[str, int] = {}
        self.size = 0
        self.limit = 0  # held keys that start a cut; set at the first language

    def add(self, lang: str, file_index: int, numbers: Sequence[int], ks: list[int]) -> None:
        held = self.held.get(lang)
        if held is None:
            held = self.held[lang] = []
            self.bound[lang] = _ABOVE_ALL
            self._set_limit()
        bound = self.bound[lang]
        top, base = bound >> _KEY_SHIFT, file_index << _FILE_SHIFT
        # the key alone first: past the first cuts nearly every key is above it
        new = [(k << _KEY_SHIFT) | base | n for k, n in zip(ks, numbers) if k <= top]
        new = [p for p in new if p <= bound]
        held.extend(new)
        self.size += len(new)
        if self.size > self.limit:
            self._cut()

    def _set_limit(self) -> None:
        if self.pool is None:
            self.limit = 2 * sum(self.cap(g) for g in self.held)
        else:
            self.limit = 2 * (self.pool + self.floor * len(self.held))

    def _cut(self) -> None:
        for held in self.held.values():
            held.sort()
        shared = None
        if self.pool is not None and self.size > self.pool:
            shared = sorted(chain.from_iterable(self.held.values()))[self.pool - 1]
        for g, held in self.held.items():
            keep = len(held) if shared is None else max(bisect_right(held, shared), self.floor)
            keep = min(keep, self.cap(g))
            if keep < len(held):
                del held[keep:]
                self.bound[g] = held[-1] if held else -1
        self.size = sum(map(len, self.held.values()))

    def smallest(self, lang: str, k: int) -> list[int] | None:
        """The places of the k smallest keys of `lang`; None when fewer are held (a cut
        took the others: another pass must find them)."""
        held = sorted(self.held.get(lang, ()))
        if len(held) < k:
            return None
        return [p & _PLACE for p in held[:k]]


@dataclass
class Selection:
    """What the key pass of max_docs found: `chosen` holds the place (see `place`) of every
    document kept, None when max_docs is not below the documents --sample keeps (then all
    of them are); per language the documents met (`seen`), kept by --sample (`sampled`)
    and its `quota`."""

    chosen: set[int] | None
    seen: Counter = field(default_factory=Counter)
    sampled: Counter = field(default_factory=Counter)
    quota: dict[str, int] = field(default_factory=dict)
    passes: int = 1  # key passes it took: 2 when a language needed the second


def draw(
    blocks: Callable[[], Iterable[KeyBlock]], wanted: int, seed: int, threshold: int | None
) -> Selection:
    """The stratified sample of `wanted` documents (see the top). `blocks()` is a fresh key
    pass over the corpus; `threshold` is --sample's (None: every document)."""
    sel = Selection(None)
    pool = Smallest(lambda g: wanted, max(1, int(SPARE * wanted)), FLOOR)
    for file_index, rel, numbers, langs in blocks():
        _scan(pool, file_index, rel, numbers, langs, seed, threshold, sel)
    sel.quota = allocate(dict(sel.sampled), wanted, seed)
    if sum(sel.sampled.values()) <= wanted:
        return sel
    sel.chosen = set()
    missing = {}
    for g, k in sel.quota.items():
        places = pool.smallest(g, k) if k else []
        if places is None:
            missing[g] = k
        else:
            sel.chosen.update(places)
    if missing:  # languages a shared cut left short: their quotas exactly, one more pass
        sel.passes = 2
        exact = Smallest(missing.__getitem__, None, 0)
        for file_index, rel, numbers, langs in blocks():
            kept = [i for i, g in enumerate(langs) if g in missing]
            if kept:
                _scan(
                    exact,
                    file_index,
                    rel,
                    [numbers[i] for i in kept],
                    [langs[i] for i in kept],
                    seed,
                    threshold,
                    None,
                )
        for g, k in missing.items():
            places = exact.smallest(g, k)
            assert places is not None, "a pass that cuts nothing below the quota holds it"
            sel.chosen.update(places)
    return sel


def _scan(
    into: Smallest,
    file_index: int,
    rel: str,
    numbers: Sequence[int],
    langs: list[str],
    seed: int,
    threshold: int | None,
    sel: Selection | None,
) -> None:
    """One block of the key pass into `into`, counted into `sel` when given."""
    ks = keys(seed, rel, numbers)
    if sel is not None:
        tally(sel.seen, langs)
    if threshold is not None:
        kept = [i for i, k in enumerate(ks) if k < threshold]
        if len(kept) < len(ks):
            ks = [ks[i] for i in kept]
            numbers = [numbers[i] for i in kept]
            langs = [langs[i] for i in kept]
    if sel is not None:
        tally(sel.sampled, langs)
    if not langs:
        return
    if langs.count(langs[0]) == len(langs):  # one label (every .txt block): one group
        into.add(langs[0], file_index, numbers, ks)
        return
    groups: dict[str, list[int]] = {}
    for i, g in enumerate(langs):
        groups.setdefault(g, []).append(i)
    for g, idx in groups.items():
        into.add(g, file_index, [numbers[i] for i in idx], [ks[i] for i in idx])


def tally(counter: Counter, langs: list[str]) -> None:
    """Add the labels to counter, one update for a block of one label."""
    if langs and langs.count(langs[0]) == len(langs):
        counter[langs[0]] += len(langs)
    else:
        counter.update(langs)
