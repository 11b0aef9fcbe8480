"""A tokenizer's card: the metrics of its token-id distributions (docs/METRICS.md, "Token
distributions"), the scripts of its vocabulary, the Gini coefficient and pairwise overlap of its
languages. All measured; the verdict the report JSON shows beside them is the gate's
(fertility.gate.verdicts), which reads these numbers and is never called from here.

The per-row distribution metrics (Rényi and Shannon efficiency, unique tokens, vocabulary
utilisation, average token rank) are declared in the registry (fertility.measure.metrics,
DISTRIBUTIONS) and computed here from a row's token-id histogram (fertility.measure.counters:
`vocab_lang`, `vocab_script`). The per-tokenizer parts go into the report JSON beside the rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from fertility import unicode as U
from fertility.measure.parity import premium_table
from fertility.policy import Policy, Thresholds
from fertility.tokenizers.base import TokenBytes
from fertility.tokenizers.pretokenizer import PRETOKENIZER

RENYI_ALPHA = 2.5  # Zouhar et al. (ACL 2023): the order that best predicted downstream BLEU


class Histogram(NamedTuple):
    """A row's token-id histogram as its used ids (ascending) and their counts: what the
    metrics read, sized by the text rather than by the vocabulary (a one-line row of o200k
    holds five ids of 199,998)."""

    ids: np.ndarray  # int64
    counts: np.ndarray  # int64, each > 0

    @classmethod
    def of(cls, h: np.ndarray) -> Histogram:
        """The histogram of a dense count per id (index = id)."""
        ids = np.flatnonzero(h)
        return cls(ids, np.asarray(h)[ids].astype(np.int64))


def _probabilities(h: Histogram) -> np.ndarray:
    """The (nonzero) probabilities of a histogram, float64."""
    c = h.counts.astype(np.float64)
    return c / c.sum()


def renyi_entropy(h: Histogram, alpha: float = RENYI_ALPHA) -> float:
    """H_alpha = log2(sum p^alpha) / (1 - alpha), in bits (alpha != 1)."""
    return float(np.log2(np.sum(_probabilities(h) ** alpha)) / (1.0 - alpha))


def shannon_entropy(h: Histogram) -> float:
    """H = -sum p log2 p, in bits."""
    p = _probabilities(h)
    return float(-np.sum(p * np.log2(p)))


def renyi_efficiency(h: Histogram, vocab: int) -> float:
    return renyi_entropy(h) / np.log2(vocab)


def shannon_efficiency(h: Histogram, vocab: int) -> float:
    return shannon_entropy(h) / np.log2(vocab)


def unique_tokens(h: Histogram, vocab: int) -> float:
    return float(len(h.ids))


def vocab_utilisation(h: Histogram, vocab: int) -> float:
    return len(h.ids) / vocab


def avg_token_rank(h: Histogram, vocab: int) -> float:
    """The token-weighted mean id: sum(id * count) / sum(count), exact in int64 sums while
    tokens x vocabulary < 9e18."""
    return int(np.dot(h.ids, h.counts)) / int(h.counts.sum())


# name -> f(histogram, vocabulary size); the registry's DISTRIBUTIONS name these
FUNCTIONS = {
    f.__name__: f
    for f in (
        renyi_efficiency,
        shannon_efficiency,
        unique_tokens,
        vocab_utilisation,
        avg_token_rank,
    )
}


def distribution_values(h: np.ndarray | None, vocab: int, names) -> list[float]:
    """The metrics `names` of one row's dense histogram (a count per id); NaN for no
    histogram (a pre-tokenizer family), an empty one (no tokens) or a vocabulary of fewer
    than 2 ids."""
    if h is None or vocab < 2:
        return [float("nan")] * len(names)
    used = Histogram.of(h)  # one pass over the vocabulary; the metrics read the used ids
    if not len(used.ids):
        return [float("nan")] * len(names)
    return [float(FUNCTIONS[n](used, vocab)) for n in names]


# ---------------------------------------------------------------- per tokenizer

BYTES = "bytes"  # byte pieces and tokens whose bytes are not complete UTF-8
MIXED = "mixed"  # letters of two or more scripts
SPECIAL = "special"  # special/control tokens and tokens that decode to nothing
COMMON = "Zyyy"  # spaces, digits, punctuation, symbols only


# every class by its code: the scripts in fertility.unicode's order, then these three
CLASS_NAMES = np.array([*U.SCRIPTS, MIXED, BYTES, SPECIAL], dtype=object)
_MIXED, _BYTES, _SPECIAL = len(U.SCRIPTS), len(U.SCRIPTS) + 1, len(U.SCRIPTS) + 2

_CODES: dict[str, np.ndarray] = {}  # fingerprint -> class_codes (a vocabulary is fixed)


def token_classes(tok) -> list[str]:
    """Each id's class: a script (ISO 15924) when the token's text has letters of that one
    script (Common and Inherited characters beside them take their neighbour's script, as in
    the text: fertility.unicode), `Zyyy` when it has none (spaces, digits, punctuation),
    `mixed` for two or more scripts, `bytes` for byte pieces and incomplete UTF-8, `special`
    for special tokens and ids that decode to nothing."""
    return CLASS_NAMES.take(class_codes(tok)).tolist()


def class_codes(tok) -> np.ndarray:
    """token_classes as codes into CLASS_NAMES, one per id (counted with a bincount, not a
    string per id: o200k's 200,000)."""
    key = tok.fingerprint
    if key in _CODES:
        return _CODES[key]
    size = int(tok.vocab_size)
    codes = np.full(size, _SPECIAL, dtype=np.int64)
    partial = tok.partial_mask()
    special = np.zeros(size, dtype=bool)
    special[[i for i in tok.special_tokens.values() if 0 <= i < size]] = True
    codes[partial & ~special] = _BYTES
    table = tok.vocabulary_bytes()
    # the vocabulary in chunks of ids: its decoded tokens and per-character tables at once
    # peaked 72 MB on o200k (the classes are per token, so chunks change none)
    for lo in range(0, size, CLASS_CHUNK):
        hi = min(lo + CLASS_CHUNK, size)
        tokens = list(table[lo:hi])
        for i in np.flatnonzero((partial | special)[lo:hi]).tolist():
            tokens[i] = b""  # left as they are: an empty token is never classified
        _classify(tokens, lo, codes)
    _CODES[key] = codes
    return codes


CLASS_CHUNK = 16384  # token ids classified at a time


def _classify(tokens: list[bytes], lo: int, codes: np.ndarray) -> None:
    """codes[lo : lo + len(tokens)] of `tokens`, each whole UTF-8 or empty (left as it is:
    special, bytes)."""
    data = b"".join(tokens)
    # Whole UTF-8 tokens joined are whole UTF-8, and a token's characters are its lead bytes
    # (TokenBytes): one decode and numpy sums, not a decode and a string per token (o200k:
    # 0.11 -> 0.06 s, the same classes)
    nchars = TokenBytes.of(tokens).leads
    which = np.flatnonzero(nchars)  # an empty token: special
    if not len(which):
        return
    lengths = nchars[which]
    # only the scripts: the word, grapheme and running-text tables of the whole vocabulary
    # cost 1 s and 360 MB on o200k and are not used here
    doc_of_char, scripts = U.resolved_scripts(data.decode("utf-8"), lengths)
    # a token is of its first character's script (after Common and Inherited took a
    # neighbour's) unless another character's differs: then it is mixed (no sort of the
    # (token, script) pairs and no loop over the ids)
    first = scripts[np.cumsum(lengths) - lengths]
    mixed = np.zeros(len(which), dtype=bool)
    mixed[doc_of_char[scripts != first[doc_of_char]]] = True
    codes[lo + which] = np.where(mixed, _MIXED, first)


def vocabulary_scripts(tok) -> dict[str, float]:
    """The share of the vocabulary in each class of token_classes, largest first."""
    codes = class_codes(tok)
    counts = np.bincount(codes, minlength=len(CLASS_NAMES))
    names = CLASS_NAMES.tolist()
    shares = [(names[c], int(counts[c])) for c in np.flatnonzero(counts).tolist()]
    return {k: n / len(codes) for k, n in sorted(shares, key=lambda kv: (-kv[1], kv[0]))}


def gini(values) -> float:
    """sum_i sum_j |x_i - x_j| / (2 n^2 mean): 0 when every x is equal, towards 1 when one
    takes everything. From the sorted values, O(n log n): sum_i (2i - n - 1) x_(i) / (n^2
    mean) with i = 1..n, the same double sum."""
    x = np.sort(np.asarray(values, dtype=np.float64))
    n = len(x)
    if n < 2 or x.sum() <= 0:
        return float("nan")
    i = np.arange(1, n + 1)
    return float(np.sum((2 * i - n - 1) * x) / (n * x.sum()))


def js_divergence(a: np.ndarray, b: np.ndarray) -> float:
    """Jensen-Shannon divergence of two histograms' distributions, in bits (0 to 1), over
    the ids either uses."""
    both = np.flatnonzero((a > 0) | (b > 0))
    p = a[both] / a.sum()
    q = b[both] / b.sum()
    m = (p + q) / 2
    with np.errstate(divide="ignore", invalid="ignore"):
        kp = np.where(p > 0, p * np.log2(p / m), 0.0).sum()
        kq = np.where(q > 0, q * np.log2(q / m), 0.0).sum()
    return float(max(0.0, (kp + kq) / 2))


def overlap(hists: Mapping[str, np.ndarray]) -> dict:
    """Pairwise 1 - Jensen-Shannon divergence (bits) of the languages' token distributions:
    1 when two languages use the same ids equally often, 0 when they share none."""
    langs = sorted(k for k, h in hists.items() if h.any())
    if len(langs) < 2:
        return {"languages": langs, "matrix": np.ones((len(langs), len(langs))).tolist()}
    # Each pair over the ids some language uses, not the whole vocabulary: a pair's ids are
    # the same ones in the same order (the others are 0 in both), so each divergence is the
    # same float as over the full histograms, and the cost follows the text (four real
    # tokenizers, o200k's 200,000 ids among them, 13 languages of 6 MB: 0.10 -> 0.05 s).
    used = np.flatnonzero(np.logical_or.reduce([hists[k] > 0 for k in langs]))
    small = {k: hists[k][used] for k in langs}
    m = np.ones((len(langs), len(langs)))
    for i, a in enumerate(langs):
        for j in range(i + 1, len(langs)):
            m[i, j] = m[j, i] = 1.0 - js_divergence(small[a], small[langs[j]])
    return {"languages": langs, "matrix": m.round(6).tolist()}


def language_gini(report, label: str, premium_table) -> dict:
    """Gini over languages of one tokenizer. On parallel files (the premium table,
    fertility.measure.parity.premium_table: each language's tokens over the reference's on
    the lines they share, the reference itself 1) it is over the tokens each language needs
    for the same lines; otherwise over each language's tokens per character (1 /
    chars_per_token) in the report's table."""
    prem = premium_table.of(label)
    if prem:
        values = [1.0, *(float(p["premium"]) for p in prem)]
        langs = [str(prem[0]["reference"]), *(str(p["lang"]) for p in prem)]
        return {"value": gini(values), "basis": "tokens_same_lines", "languages": langs}
    rows = [
        r
        for r in report.table
        if r["tokenizer"] == label and r["group"] == "language" and r["tokens"] > 0
    ]
    tokens = np.array([r["tokens"] for r in rows], dtype=np.float64)
    chars = np.array([r["chars"] for r in rows], dtype=np.float64)
    with np.errstate(divide="ignore"):  # a language of no characters: inf, as pandas divides
        per_char = tokens / chars
    return {
        "value": gini(per_char),
        "basis": "tokens_per_char",
        "languages": [str(r["key"]) for r in rows],
    }


def carded(report) -> list:
    """The report's tokenizers that have a card: loaded, with a vocabulary (no pre-tokenizer
    family). fertility.gate.verdicts judges the same ones."""
    return [i for i in report.tokenizers if i.tokenizer is not None and i.kind != PRETOKENIZER]


def cards(report, policy: Policy | None = None) -> dict[str, dict[str, Any]]:
    """label -> the per-tokenizer part of the report JSON that is measured, for every
    tokenizer with a card: vocabulary_scripts, gini, overlap. `policy` gives the premiums'
    reference, declared parallel files and parity thresholds (None: the built-in ones); the
    verdict beside them is the gate's (fertility.gate.verdicts, `Report.verdicts`)."""
    thresholds = policy.thresholds if policy is not None else Thresholds()
    reference = policy.reference if policy is not None else "en"
    parallel = policy.parallel if policy is not None else False
    prem = premium_table(report, thresholds, reference=reference, parallel=parallel)
    return {
        info.label: {
            "vocabulary_scripts": vocabulary_scripts(info.tokenizer),
            "gini": language_gini(report, info.label, prem),
            "overlap": report.overlap.get(info.label),
        }
        for info in carded(report)
    }
