"""Parallel files and the token premium: a measurement (the card's Gini reads it), which
diagnose's parity rule and the gate's premium check judge.

Two files are parallel only on evidence, three things together:
    1. the layout says so: the user declares it (`--parallel`, the policy's `parallel = true`),
       or both files are FLORES-style, named by their label in one folder (`eng_Latn.txt`
       beside `ben_Beng.txt`);
    2. they hold different languages, have the same number of lines (the highest line number
       holding a document) and share at least `min_overlap` of their document lines (blank
       lines are not documents, so a few may differ);
    3. their records' lengths agree: the rank correlation (Spearman) of the characters of
       each aligned line reaches MIN_RANK_CORRELATION, as translations' do.
Otherwise there is no premium, and the table's `note` says why in one line (the report and
the gate print it). Lines align on their number. When a file could pair with
several reference files, the one with the same file name (`en/part-1.txt` with
`bn/part-1.txt`) wins; if that does not decide, it is skipped.

The reference is a language, matched on its label (fertility.corpus.labels.matching): `en`
is `eng_Latn` in FineWeb-2 / FLORES folders. The premium of language L is sum(tokens of L) /
sum(tokens of the reference) over aligned lines (sum then divide), with a 95% percentile
bootstrap interval over lines.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from fertility.corpus import labels
from fertility.errors import PolicyError
from fertility.measure.counters import factorize
from fertility.policy import Thresholds
from fertility.tokenizers.pretokenizer import PRETOKENIZER


class PremiumRow(TypedDict):
    """A row of the premium table: one tokenizer's premium for one language."""

    tokenizer: str
    lang: str
    reference: str  # the corpus's label of the reference language
    lines: int  # the aligned lines it was measured on
    premium: float  # the language's tokens over the reference's, on those lines
    lo: float  # its 95% bootstrap interval
    hi: float


@dataclass
class Premiums:
    """The premium table: a row per (tokenizer, language) with a premium, and `note`: why
    some or all languages have none, in one line ("" when every candidate pair is
    parallel)."""

    rows: list[PremiumRow] = field(default_factory=list)
    note: str = ""

    def of(self, label: str) -> list[PremiumRow]:
        """The rows of one tokenizer."""
        return [r for r in self.rows if r["tokenizer"] == label]


def pair_rng(seed: int, tokenizer: str, lang: str) -> np.random.Generator:
    """The bootstrap's draws for one (tokenizer, language): a stream of its own, so a
    tokenizer's interval is the same whether it is gated alone or beside others (one shared
    generator made the report's bounds depend on which tokenizers came before it)."""
    key = [zlib.crc32(tokenizer.encode("utf-8")), zlib.crc32(lang.encode("utf-8"))]
    return np.random.default_rng([seed, *key])


def bootstrap_ratio(
    num: np.ndarray, den: np.ndarray, reps: int, rng: np.random.Generator
) -> tuple[float, float]:
    """95% percentile interval of sum(num)/sum(den), resampling paired items."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    n = len(num)
    if n == 0 or reps <= 0:
        return (float("nan"), float("nan"))
    step = max(1, min(reps, 4_000_000 // n))  # bounded memory for long corpora
    stats = []
    for done in range(0, reps, step):
        idx = rng.integers(0, n, size=(min(step, reps - done), n))
        d = den[idx].sum(axis=1)
        stats.append(np.divide(num[idx].sum(axis=1), d, out=np.full(len(d), np.inf), where=d > 0))
    lo, hi = np.percentile(np.concatenate(stats), [2.5, 97.5])
    return (float(lo), float(hi))


# Translations' lines are long and short together; unrelated records of the same count are
# not. Spearman's rho of the characters per aligned line, measured on tests/realworld
# (GTK messages translated line by line, 418 lines): every language of parallel/ against
# parallel/en.txt gives 0.706 (zh) to 0.964 (te): ja 0.711, ko 0.833, el 0.893, ten more
# 0.918-0.964 (0.867 and up on their first 200 lines, what the per-document table keeps).
# Unrelated text of the same record count (418 consecutive lines of each text/<lang>.txt,
# every 1,500 lines, against parallel/en.txt: 111 pairs) gives -0.419 to 0.248 (median
# 0.017). 0.5 sits between the two with a margin of 0.2 either way. Under independence rho
# has a standard deviation of about 1/sqrt(n - 1): 0.5 is 3.8 of them at the 60 lines of
# the published case, 1.5 at parity_min_lines (10), so a declared layout is required too.
MIN_RANK_CORRELATION = 0.5


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho: the Pearson correlation of the ranks (ties share their mean rank);
    NaN for fewer than three pairs or a constant side."""
    if len(a) < 3:
        return float("nan")
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(x) -> np.ndarray:
    """1-based ranks of `x`, ties sharing the mean of the ranks they span."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])  # each run of equal values
    sizes = np.diff(np.r_[starts, len(x)])
    out = np.empty(len(x))
    out[order] = np.repeat(starts + (sizes + 1) / 2, sizes)  # mean of starts+1 .. starts+size
    return out


def flores_pair(a: str, b: str) -> bool:
    """Both files named by a FineWeb-2 / FLORES label (`eng_Latn.txt`) in one folder."""
    stem = lambda path: os.path.basename(path).split(".", 1)[0]
    return (
        os.path.dirname(a) == os.path.dirname(b)
        and labels.flores_script(stem(a)) is not None
        and labels.flores_script(stem(b)) is not None
    )


@dataclass
class _File:
    """One source file of the per-document table: its language, and its documents' rows
    (positions in the table's columns) and line numbers, in line order."""

    source: str
    lang: str
    rows: np.ndarray
    lines: np.ndarray

    @property
    def nlines(self) -> int:
        return int(self.lines.max())

    @property
    def numbered(self) -> bool:
        """Each line number at most once, as a file's lines are: only such a file can align
        line for line. --precision numbers a document within its block (fertility.corpus.
        precision), so a file read in several blocks repeats numbers."""
        return bool((np.diff(self.lines) > 0).all())


def _files(cols: dict) -> list[_File]:
    """The table's files, by name (doc_columns)."""
    # numpy over the documents' file codes, not a dict append per document (200,000 of them)
    names, codes = factorize(cols["source"])
    lines = np.asarray(cols["line"])
    order = np.lexsort((lines, codes))  # by file, then line; stable: ties keep corpus order
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    out = []
    for k in sorted(range(len(names)), key=names.__getitem__):
        rows = order[bounds[k] : bounds[k + 1]]
        out.append(_File(names[k], cols["lang"][rows[0]], rows, lines[rows]))
    return out


def _aligned(a: _File, b: _File) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `a` and of `b` holding the lines both have, in line order."""
    _, ia, ib = np.intersect1d(a.lines, b.lines, assume_unique=True, return_indices=True)
    return a.rows[ia], b.rows[ib]


def _candidates(
    files: list[_File], reference: str, min_lines: int, min_overlap: float
) -> list[tuple[_File, _File, np.ndarray, np.ndarray]]:
    """(file, reference file, the rows of their aligned lines in each) for every file whose
    lines could align with a reference file's: each line number once in both, the same
    number of lines, most of them shared."""
    files = [f for f in files if f.numbered]
    refs = [g for g in files if g.lang == reference]
    out = []
    for f in files:
        if f.lang == reference:
            continue
        cands = []
        for g in refs:
            ia, ib = _aligned(f, g)
            if (
                f.nlines == g.nlines
                and len(ia) >= min_lines
                and len(ia) >= min_overlap * max(len(f.lines), len(g.lines))
            ):
                cands.append((g, ia, ib))
        if len(cands) > 1:
            base = os.path.basename(f.source)
            same = [c for c in cands if os.path.basename(c[0].source) == base]
            cands = same if len(same) == 1 else []
        if len(cands) == 1:
            out.append((f, *cands[0]))
    return out


def _evidence(
    chars: np.ndarray, pairs: list[tuple[_File, _File, np.ndarray, np.ndarray]], declared: bool
) -> tuple[list[tuple[str, np.ndarray, np.ndarray]], list[str]]:
    """The candidate pairs that are parallel on evidence, each as (its language, the rows
    of its aligned lines in it, theirs in the reference file), and why each other one is
    not."""
    kept, why = [], []
    for f, g, ia, ib in pairs:
        name = f"{_short(f.source)} / {_short(g.source)}"
        if not (declared or flores_pair(f.source, g.source)):
            why.append(
                f"{name} have the same number of records but are not declared parallel "
                "(--parallel, or FLORES-style names such as eng_Latn.txt in one folder)"
            )
            continue
        rho = rank_correlation(chars[ia], chars[ib])
        if not rho >= MIN_RANK_CORRELATION:  # NaN too: no evidence
            why.append(
                f"{name}: line lengths do not agree (rank correlation "
                f"{'n/a' if rho != rho else f'{rho:.2f}'} over {len(ia)} lines, "
                f"translations reach {MIN_RANK_CORRELATION})"
            )
            continue
        kept.append((f.lang, ia, ib))
    return kept, why


def _short(path: str) -> str:
    """A file by its folder and name (`ru/part-1.txt`): enough to find it in a message."""
    return os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))


def _reference(langs: list[str], reference: str) -> tuple[str | None, str]:
    """The corpus's label of the reference language, or None and why there is none."""
    found = labels.matching(reference, langs)
    if len(found) == 1:
        return found[0], ""
    if found:
        return None, (
            f"no premium: the reference {reference} is {', '.join(found)}; name one with "
            "--reference"
        )
    return None, (
        f"no premium: no language of the corpus is the reference {reference} "
        f"(have: {', '.join(sorted(langs))}); name one with --reference"
    )


def require_reference(langs, reference: str) -> str:
    """The corpus's label of a reference the user named (`--reference`), or PolicyError
    naming it: a reference that matches nothing would give no premium without a word."""
    langs = sorted({str(x) for x in langs})
    found, why = _reference(langs, reference)
    if found is None:
        raise PolicyError(f"--reference {reference}: {why.removeprefix('no premium: ')}")
    return found


def premium_table(
    report,  # a fertility.measure.Report (not imported: the package imports this module)
    t: Thresholds | None = None,
    *,
    reference: str = "en",
    parallel: bool = False,
) -> Premiums:
    """Token premium per (tokenizer, language) of a Report against `reference` on parallel
    files (`premiums` of its per-document table, pre-tokenizer families left out; only on
    evidence; parallel: the user declares the layout). fertility.findings names it
    `premiums`. No premium without parallel files; the table's `note` says why in one line.
    """
    t = t or Thresholds()
    families = {d.label for d in report.tokenizers if d.kind == PRETOKENIZER}
    # The card's Gini, the gate and the rules each ask for the table of one report: its
    # bootstraps (one per tokenizer and language, 18 ms each on FLORES' 1,012 lines: 3.6 s a
    # tokenizer over its 200 languages) run once per report and settings
    # (Report.premium_cache)
    settings = (parallel, t.parity_min_lines, t.parity_min_overlap, t.bootstrap, t.seed)
    key = (reference, frozenset(families), settings)
    cache = report.premium_cache
    if key not in cache:
        cache[key] = premiums(
            report.doc_columns,
            reference,
            skip=families,
            declared=parallel,
            min_lines=t.parity_min_lines,
            min_overlap=t.parity_min_overlap,
            reps=t.bootstrap,
            seed=t.seed,
        )
    return cache[key]


def premiums(
    cols: dict | None,
    reference: str,
    *,
    skip=(),
    declared: bool = False,
    min_lines: int,
    min_overlap: float,
    reps: int,
    seed: int,
) -> Premiums:
    """The premium table of the per-document table's columns (frame.doc_columns; None: no
    documents) for each tokenizer but those in `skip`; its `note`: why some or all
    languages have no premium, one line ("" when every candidate pair is parallel).
    declared: the user says the files are parallel (`--parallel`)."""
    labels_ = [label for label in (cols or {}).get("tokens", {}) if label not in skip]
    if cols is None or not labels_:
        return Premiums()
    langs = list(dict.fromkeys(cols["lang"]))
    if len(langs) < 2:
        return Premiums()
    ref, why = _reference(langs, reference)
    if ref is None:
        return Premiums(note=why)
    cands = _candidates(_files(cols), ref, min_lines, min_overlap)
    pairs, refused = _evidence(np.asarray(cols["chars"]), cands, declared)
    note = ""
    if not cands:
        note = (
            f"no premium: no file aligns line for line with a file of the reference {ref} "
            "(parallel text: translations of the same lines)"
        )
    elif refused:
        more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
        note = f"no premium for {len(refused)} of {len(cands)} file pairs: {refused[0]}{more}"
    rows: list[PremiumRow] = []
    for label in labels_ if pairs else []:
        tokens = np.asarray(cols["tokens"][label])
        by_lang: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        for lang, ia, ib in pairs:
            by_lang.setdefault(lang, []).append((tokens[ia], tokens[ib]))
        for lang, parts in by_lang.items():
            num = np.concatenate([p[0] for p in parts])
            den = np.concatenate([p[1] for p in parts])
            lo, hi = bootstrap_ratio(num, den, reps, pair_rng(seed, str(label), lang))
            rows.append(
                {
                    "tokenizer": str(label),
                    "lang": lang,
                    "reference": ref,
                    "lines": len(num),
                    "premium": float(num.sum() / den.sum()),
                    "lo": lo,
                    "hi": hi,
                }
            )
    return Premiums(rows, note)
