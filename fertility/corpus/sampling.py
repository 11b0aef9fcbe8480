"""What the trainer of `fertility fix` sees: the held-out split and the temperature sampler.

Streaming passes over the corpus. The first (`scan_corpus`) notes per document its group
(language), length in characters, line and file; the split (`heldout_mask`) and the sampling
plan (`plan_copies`) are computed on those numpy arrays. Between them,
`split_corpus` reads the documents twice more: once to write the held-out ones to files
(`HeldoutWriter`) and keep their shingle hashes, once to find the training documents that
share one (near-duplicates, dropped from training). The second pass (`training_stream`)
yields each training document as many times as the plan says. The later passes read the
documents kept by the first when the corpus has at most KEEP_CHARS characters, and the files
again otherwise (`Scan.documents`): beyond that size memory grows with the number of
documents and the held-out text, not with the corpus.

Held-out split
    Per language, ``k = round(fraction * n)`` documents are held out, at most ``max_docs``
    (`fertility fix` caps at 1000: enough for tight intervals, and a large corpus keeps the
    rest for training; as in `fertility report`, 200 of them per language also get the
    per-document checks such as the round trip); at least one when
    the language has two or more, never all of them (a language with one document keeps it
    for training). Which ones: whole runs of ``b`` consecutive lines (records), those with
    the smallest key ``mix64(seed, line // b)``, ties broken by a seeded hash of the file
    and then by line, so the last run taken may be cut. ``b`` is ``block`` (fix: 100), or
    ``k // MIN_RUNS`` (at least 1) for a language that holds out fewer than MIN_RUNS (10)
    runs of ``block``: its held-out text is never one or two runs (one or two topics). The key depends on the line number,
    not on the file or the language, so parallel files (``en.txt`` and ``bn.txt`` aligned line
    by line) hold out the *same* lines: the held-out text stays parallel and per-line premiums
    remain measurable.

    Why runs and not single lines: neighbouring lines of a real file share their topic (the
    strings of one dialog, the sentences of one article), so a held-out line whose neighbours
    were trained on scores better than text the tokenizer has not seen. On real Bengali
    (docs/FIX.md, "How honest is the held-out figure") single lines overstated the
    characters per token of an unseen tenth of the file by 13%, runs of 100 lines by 5%.

    Near-duplicates (`fertility.corpus.neardup`): every *training* document that shares a
    normalised text or a long run of words with a held-out document is dropped from training
    (`Split.dropped`; fix-report.json counts them). From training, not from the held-out
    side: the held-out documents stay a sample of the corpus as it is (dropping held-out
    documents with twins would leave the unusual ones, and break the parallel lines).

Temperature sampling
    With ``n_g`` the training characters of language ``g`` and temperature ``T``, each language
    receives the share ``p_g = n_g**T / sum_h n_h**T`` of a character budget ``B`` (default: all
    training characters, so the trainer sees as much text as the corpus has). ``T = 1`` keeps
    the corpus proportions, ``T = 0`` gives every language the same share; the default 0.3 sits
    between, as in multilingual pretraining mixes (XLM-R, mT5 use 0.3).
    A language whose target exceeds its text is repeated: every document ``floor(t_g / n_g)``
    times, plus a seeded random subset of documents, taken in a shuffled order until the
    remainder is covered. A language above its target is subsampled the same way (zero full
    copies). So each language receives at least ``p_g * B`` characters, overshooting by less than
    one of its documents: that is the documented share a minority language is guaranteed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fertility.corpus import Corpus
from fertility.corpus.neardup import BATCH_CHARS, HeldoutShingles
from fertility.errors import CorpusError
from fertility.files import partial_path
from fertility.hashing import mix64
from fertility.outputs import make_inside, open_inside, remove, replace_inside

if TYPE_CHECKING:  # the `split` and `sampling` records (fertility/schemas/fix.py), for mypy only
    from fertility.schemas import fix as fix_json

KEEP_CHARS = 1 << 28  # a corpus up to 256 M characters is read once, then served from memory


def split_keys(lines: np.ndarray, seed: int, block: Any = 1) -> np.ndarray:
    """The sort key of each document for the held-out split: a hash of (seed, line // block);
    `block` one number or one per document."""
    salt = mix64(np.array([seed & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))[0]
    runs = np.asarray(lines, dtype=np.uint64) // np.asarray(block, dtype=np.uint64)
    return mix64(runs ^ salt)


MIN_RUNS = 10  # a language holds out at least this many runs: shorter runs where it must


def run_lengths(k: np.ndarray, block: int) -> np.ndarray:
    """Lines per held-out run of each group holding out k documents: `block`, or k // MIN_RUNS
    (at least 1) where `block` would give it fewer than MIN_RUNS runs."""
    return np.clip(np.asarray(k, dtype=np.int64) // MIN_RUNS, 1, block)


def heldout_counts(
    docs_per_group: np.ndarray, fraction: float, max_docs: int | None = None
) -> np.ndarray:
    """Held out per group: round(fraction * n), capped at max_docs, at least 1, at most n - 1."""
    n = np.asarray(docs_per_group, dtype=np.int64)
    k = np.rint(fraction * n).astype(np.int64)
    if max_docs is not None:
        k = np.minimum(k, max_docs)
    k = np.clip(k, 1, np.maximum(n - 1, 1))
    return np.where(n >= 2, k, 0)


def heldout_mask(
    groups: np.ndarray,
    lines: np.ndarray,
    files: np.ndarray,
    fraction: float,
    seed: int,
    max_docs: int | None = None,
    block: int = 1,
) -> np.ndarray:
    """True for each held-out document (see the module docstring)."""
    groups = np.asarray(groups, dtype=np.int64)
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    k = heldout_counts(np.bincount(groups, minlength=n_groups), fraction, max_docs)
    keys = split_keys(lines, seed, run_lengths(k, block)[groups])
    ties = mix64(split_keys(files, seed))  # whole files all have line 1: the seed picks them
    # by group, then key (the run), then the file's hash, then the line inside the run
    order = np.lexsort((lines, ties, keys, groups))
    sorted_groups = groups[order]
    starts = np.searchsorted(sorted_groups, np.arange(n_groups), side="left")
    rank = np.arange(len(order)) - starts[sorted_groups]
    mask = np.zeros(len(groups), dtype=bool)
    mask[order] = rank < k[sorted_groups]
    return mask


def temperature_shares(chars: np.ndarray, temperature: float) -> np.ndarray:
    """p_g = n_g**T / sum_h n_h**T over groups with text (groups without text get 0)."""
    n = np.asarray(chars, dtype=np.float64)
    w = np.zeros_like(n)
    w[n > 0] = n[n > 0] ** temperature
    total = w.sum()
    return w / total if total > 0 else w


@dataclass
class SamplingPlan:
    copies: np.ndarray  # int64 per document: how many times the trainer sees it
    shares: np.ndarray  # documented share p_g of each group
    targets: np.ndarray  # p_g * budget, characters
    sampled: np.ndarray  # characters actually sampled per group (>= targets)
    available: np.ndarray  # training characters per group in the corpus
    budget: int


def plan_copies(
    groups: np.ndarray,
    lengths: np.ndarray,
    train: np.ndarray,
    temperature: float,
    budget: int | None,
    seed: int,
) -> SamplingPlan:
    """Copies per document so that each group gets at least its temperature share of `budget`.

    `train` masks the documents that may be sampled (the held-out ones are never trained on).
    `budget` None means all training characters.
    """
    groups = np.asarray(groups, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    n_groups = int(groups.max()) + 1 if len(groups) else 0
    available = np.bincount(groups[train], weights=lengths[train], minlength=n_groups)
    available = available.astype(np.int64)
    budget = int(available.sum()) if budget is None else int(budget)
    shares = temperature_shares(available, temperature)
    targets = shares * budget
    copies = np.zeros(len(groups), dtype=np.int64)
    sampled = np.zeros(n_groups, dtype=np.int64)
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0x5A3])  # a stream apart from the split's
    # One loop step per language (tens to hundreds), never per document.
    train_idx = np.flatnonzero(train)
    by_group = train_idx[np.argsort(groups[train_idx], kind="stable")]
    bounds = np.searchsorted(groups[by_group], np.arange(n_groups + 1), side="left")
    for g in range(n_groups):
        idx = by_group[bounds[g] : bounds[g + 1]]
        if len(idx) == 0 or available[g] == 0:
            continue
        full = int(targets[g] // available[g])
        remainder = targets[g] - full * available[g]
        copies[idx] = full
        extra = 0
        if remainder > 0:
            perm = idx[rng.permutation(len(idx))]
            cum = np.cumsum(lengths[perm])
            take = min(int(np.searchsorted(cum, remainder, side="left")) + 1, len(idx))
            copies[perm[:take]] += 1
            extra = int(cum[take - 1])
        sampled[g] = full * int(available[g]) + extra
    return SamplingPlan(copies, shares, targets, sampled, available, budget)


# ---------------------------------------------------------------- pass 1: what is there


@dataclass
class Scan:
    groups: np.ndarray  # language index per document
    lengths: np.ndarray  # characters (code points)
    lines: np.ndarray
    files: np.ndarray  # file index
    names: list[str]  # language label per index
    sources: list[str]  # file path per index
    max_bytes: int  # longest document in UTF-8 bytes (SentencePiece only)
    docs: list | None  # the documents themselves, when the corpus is small enough
    corpus: Corpus | None = None  # what was read: read again when `docs` is None

    def documents(self) -> Iterator:
        """The documents again, in the same order: the kept ones, or the same files read anew
        up to the same sizes (CorpusError if they no longer hold as many documents)."""
        if self.docs is not None:
            return iter(self.docs)
        assert self.corpus is not None, "a Scan without kept documents needs its corpus"
        c = self.corpus
        return _counted(c.again().documents(), len(self.lengths), c.paths)


def _counted(docs: Iterable, expected: int, paths) -> Iterator:
    """`docs`, checked to be `expected` documents long."""
    n = 0
    for n, doc in enumerate(docs, 1):
        if n > expected:
            break
        yield doc
    if n != expected:
        raise CorpusError(
            f"{', '.join(paths)}: the corpus changed while it was read "
            f"({expected} documents, then {n})"
        )


def scan_corpus(
    corpus: Corpus,
    want_bytes: bool,
    keep_chars: int | None = None,
    inspect: Callable[[int, str], None] | None = None,
) -> Scan:
    """First pass: the per-document arrays the split and the plan work on.

    `inspect(index, text)` is called on every document (fix's normaliser preview: it must see
    the text before training, and this is the one pass that reads all of it before then).

    While the text read so far is under `keep_chars` (default KEEP_CHARS) characters the
    documents are kept, so the second pass reads memory instead of the files again
    (`Scan.docs`; None when the corpus is bigger).
    """
    limit = KEEP_CHARS if keep_chars is None else keep_chars
    langs: dict[str, int] = {}
    files: dict[str, int] = {}
    # per document: its language's index, characters, line number and file's index
    g: list[int] = []
    n: list[int] = []
    ln: list[int] = []
    f: list[int] = []
    kept: list | None = []
    total = max_bytes = 0
    lang = source = None
    gi = fi = -1
    for doc in corpus.documents():  # per document, never per character
        size = len(doc.text)
        if doc.lang != lang:  # documents come file by file: look the labels up on change only
            lang = doc.lang
            gi = langs.setdefault(lang, len(langs))
        if doc.source != source:
            source = doc.source
            fi = files.setdefault(source, len(files))
        if inspect is not None:
            inspect(len(g), doc.text)
        g.append(gi)
        n.append(size)
        ln.append(doc.line)
        f.append(fi)
        if want_bytes:
            max_bytes = max(max_bytes, len(doc.text.encode("utf-8", "surrogatepass")))
        if kept is not None:
            total += size
            if total > limit:
                kept = None
            else:
                kept.append(doc)
    if not g:
        raise CorpusError(f"{', '.join(corpus.paths)}: no documents")
    return Scan(
        np.array(g, np.int64),
        np.array(n, np.int64),
        np.array(ln, np.int64),
        np.array(f, np.int64),
        list(langs),
        list(files),
        max_bytes,
        kept,
        corpus,
    )


@dataclass
class Split:
    held: np.ndarray  # bool per document: held out
    dropped: np.ndarray  # bool per document: training document with a held-out near-duplicate
    block: int  # lines per held-out run asked for
    run_lines: np.ndarray  # lines per held-out run of each group (run_lengths)

    @property
    def train(self) -> np.ndarray:
        return ~self.held & ~self.dropped


def split_corpus(
    scan: Scan,
    fraction: float,
    seed: int,
    max_docs: int | None,
    block: int,
    writer: HeldoutWriter | None = None,
) -> Split:
    """The held-out documents (written to `writer`) and the training documents dropped as
    their near-duplicates: two more reads of `scan`'s documents (module docstring)."""
    held = heldout_mask(scan.groups, scan.lines, scan.files, fraction, seed, max_docs, block)
    k = heldout_counts(np.bincount(scan.groups, minlength=len(scan.names)), fraction, max_docs)
    runs = run_lengths(k, block)
    dropped = np.zeros(len(held), dtype=bool)
    index = HeldoutShingles()
    held_l = held.tolist()  # plain lists: no numpy scalar per document
    for doc, h in zip(scan.documents(), held_l):
        if h:
            index.add(doc.text)
            if writer is not None:
                writer.write(doc)
    index.freeze()
    if not len(index.hashes):
        return Split(held, dropped, block, runs)
    at: list[int] = []
    texts: list[str] = []
    size = 0
    for i, (doc, h) in enumerate(zip(scan.documents(), held_l)):
        if h:
            continue
        at.append(i)
        texts.append(doc.text)
        size += len(doc.text)
        if size >= BATCH_CHARS:
            dropped[np.array(at)[index.shared(texts)]] = True
            at, texts, size = [], [], 0
    if texts:
        dropped[np.array(at)[index.shared(texts)]] = True
    return Split(held, dropped, block, runs)


def split_and_plan(
    scan: Scan, config, writer: HeldoutWriter | None = None
) -> tuple[Split, SamplingPlan]:
    """The split and the sampling plan that `config` (a FixConfig) gives `scan`.

    The one place fix's settings meet the split and the plan, so that whatever must reproduce
    fix's training text (the throughput benchmark) gets exactly the same documents.
    """
    split = split_corpus(
        scan,
        config.heldout_fraction,
        config.seed,
        config.heldout_max_docs,
        config.heldout_block,
        writer,
    )
    plan = plan_copies(
        scan.groups,
        scan.lengths,
        split.train,
        config.temperature,
        config.max_train_chars,
        config.seed,
    )
    return split, plan


def describe_split(
    scan: Scan, split: Split, fraction: float, max_docs, seed: int
) -> fix_json.Split:
    """The `split` object of fix-report.json and extend-report.json (per language)."""
    k = len(scan.names)
    held, dropped = split.held, split.dropped

    def count(mask: np.ndarray, weights=None) -> np.ndarray:
        return np.bincount(scan.groups[mask], weights=weights, minlength=k)

    docs = np.bincount(scan.groups, minlength=k)
    out: fix_json.Split = {
        "heldout_fraction": fraction,
        "heldout_max_docs": max_docs,
        "heldout_block": split.block,
        "seed": seed,
        "train_documents": int(split.train.sum()),
        "heldout_documents": int(held.sum()),
        "dropped_near_duplicates": int(dropped.sum()),
        "languages": {},
    }
    held_docs, held_chars = count(held), count(held, scan.lengths[held])
    drop_docs, drop_chars = count(dropped), count(dropped, scan.lengths[dropped])
    train_chars = count(split.train, scan.lengths[split.train])
    for i, name in enumerate(scan.names):
        out["languages"][name] = {
            "train_documents": int(docs[i] - held_docs[i] - drop_docs[i]),
            "train_chars": int(train_chars[i]),
            "heldout_documents": int(held_docs[i]),
            "heldout_chars": int(held_chars[i]),
            "heldout_run_lines": int(split.run_lines[i]),
            "dropped_near_duplicates": int(drop_docs[i]),
            "dropped_chars": int(drop_chars[i]),
        }
    return out


def describe_plan(
    scan: Scan, split: Split, plan: SamplingPlan, config
) -> tuple[fix_json.Split, fix_json.Sampling]:
    """The `split` and `sampling` objects of fix-report.json (per language)."""
    total = max(int(plan.sampled.sum()), 1)
    corpus_chars = max(int(plan.available.sum()), 1)
    described = describe_split(
        scan, split, config.heldout_fraction, config.heldout_max_docs, config.seed
    )
    sampling: fix_json.Sampling = {
        "temperature": config.temperature,
        "budget_chars": plan.budget,
        "sampled_chars": int(plan.sampled.sum()),
        "languages": {},
    }
    for i, name in enumerate(scan.names):
        avail = int(plan.available[i])
        sampling["languages"][name] = {
            "corpus_share": avail / corpus_chars,
            "share": float(plan.shares[i]),
            "target_chars": float(plan.targets[i]),
            "sampled_chars": int(plan.sampled[i]),
            "sampled_share": int(plan.sampled[i]) / total,
            "repeat": (int(plan.sampled[i]) / avail) if avail else None,
        }
    return described, sampling


# ---------------------------------------------------------------- pass 2: the stream


class HeldoutWriter:
    """Held-out documents as ``<folder>/<lang>.jsonl`` records (text, lang, source, line).

    Written under temporary names; commit() renames them and removes what an earlier run left
    in the folder, close() (always) closes the handles. A language label that is not a plain
    name gets the file ``_lang<N>.jsonl``; readers take the language from the ``lang`` field.
    """

    def __init__(self, folder: Path, names: list[str], temps: list[Path]):
        # every write below the output folder through fertility.outputs: no link followed
        self.root, self.rel = folder.parent, folder.name
        make_inside(self.root, self.rel)
        self.folder, self.names, self.temps = folder, names, temps
        self.handles: dict[str, tuple[Any, Path, Path]] = {}

    def _file(self, lang: str):
        if lang not in self.handles:
            plain = lang.isascii() and lang.replace("-", "").replace("_", "").isalnum()
            stem = lang if plain else f"_lang{self.names.index(lang)}"
            tmp = partial_path(self.folder / f"{stem}.jsonl")
            handle = open_inside(self.root, f"{self.rel}/{tmp.name}")
            self.temps.append(tmp)  # (after the open: a refused link is not ours to delete)
            self.handles[lang] = (handle, tmp, self.folder / f"{stem}.jsonl")
        return self.handles[lang][0]

    def write(self, doc) -> None:
        rec = {"text": doc.text, "lang": doc.lang, "source": doc.source, "line": doc.line}
        self._file(doc.lang).write(json.dumps(rec, ensure_ascii=False) + "\n")

    def close(self) -> None:
        for handle, _, _ in self.handles.values():
            handle.close()

    def commit(self) -> list[str]:
        self.close()
        finals = {final for _, _, final in self.handles.values()}
        for old in self.folder.glob("*.jsonl"):  # an earlier run's split must not mix in
            if old not in finals:
                remove(self.root, f"{self.rel}/{old.name}")
        for _, tmp, final in self.handles.values():
            replace_inside(tmp, self.root, f"{self.rel}/{final.name}")
        return sorted(str(f) for f in finals)


def training_stream(
    docs: Iterable, copies: np.ndarray, batch_chars: int = 1 << 20
) -> Iterator[list[str]]:
    """Batches of training texts: each document `copies[i]` times (0 for the held-out and the
    dropped ones). `docs` is the second pass: `Scan.documents()`."""
    batch: list[str] = []
    size = 0
    for doc, c in zip(docs, copies.tolist()):  # a plain list: no numpy scalar per document
        if c:
            if c == 1:
                batch.append(doc.text)
            else:
                batch.extend([doc.text] * c)
            size += c * len(doc.text)
            if size >= batch_chars:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch
