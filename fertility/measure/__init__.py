"""Counts per (tokenizer, language, script) -> one tidy DataFrame (docs/METRICS.md).

`analyze` streams the corpus in batches. For each batch the tokenizer-independent facts (scripts,
graphemes, words, bytes) are computed once (fertility.unicode), then every tokenizer encodes the
same documents and its counters are updated with vectorised numpy. Nothing here formats output.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import queue
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from fertility import _parallel
from fertility import unicode as U
from fertility._accumulate import COUNTS, NS, TokenizerAccumulator
from fertility._batch import encode_flat, measure_batch
from fertility._frame import build_frame, docs_frame
from fertility.corpus import Corpus
from fertility.tokenizers import load_tokenizer_arg

if TYPE_CHECKING:  # the frame is built with pandas at the end; measuring needs only numpy
    import pandas as pd

SCHEMA = "fertility.report/1"
# A batch ends at `batch_size` documents or this many characters, whichever comes first: big
# enough that numpy's per-call cost is spread over many characters (4,096 documents of real
# text measure in about two thirds of the main-thread time of 512), small enough that the
# per-character arrays of one batch (about 100 bytes a character) stay near 25 MB.
BATCH_CHARS = 1 << 18


class PretokenizerFamily:
    """A standard pre-tokenizer measured as if each pre-token were a token: the ceiling."""

    kind = "pretokenizer"
    vocab_size = 0
    unk_id = None
    special_tokens: dict = {}

    def __init__(self, name: str) -> None:
        from fertility.patterns import resolve_pattern

        self.label, self.pattern = resolve_pattern(name)
        self.spec = f"pretokenizer:{self.label}"
        self.fingerprint = hashlib.sha256(self.pattern.encode()).hexdigest()

    def pre_tokenize(self, text: str) -> list[tuple[int, int]]:
        from fertility.patterns import split_spans

        return split_spans(self.pattern, text)

    def encode_flat(self, texts: list[str]):
        spans = [np.asarray(self.pre_tokenize(t), dtype=np.int64).reshape(-1, 2) for t in texts]
        counts = np.fromiter((len(s) for s in spans), dtype=np.int64, count=len(spans))
        flat = np.concatenate(spans) if spans else np.zeros((0, 2), np.int64)
        return np.zeros(len(flat), np.int64), flat[:, 0], flat[:, 1], counts

    def config(self) -> dict:
        return {"pattern": self.pattern}


@dataclass
class Report:
    frame: pd.DataFrame
    docs: pd.DataFrame
    corpus: dict
    tokenizers: list[dict]
    samples: dict = field(default_factory=dict)
    byte_fallback_chars: dict = field(default_factory=dict)
    unk_chars: dict = field(default_factory=dict)
    normalization: dict = field(default_factory=dict)
    roundtrip: dict = field(default_factory=dict)  # {(label, lang): fertility._roundtrip changes}
    settings: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)

    def rows(self, label: str) -> list[dict]:
        sub = self.frame[self.frame["tokenizer"] == label]
        cols = [c for c in sub.columns if c not in ("tokenizer", "kind")]
        return [_clean(r) for r in sub[cols].to_dict(orient="records")]

    def to_dict(self) -> dict:
        def entry(t: dict) -> dict:
            return {**{k: t[k] for k in ("label", "spec", "kind", "vocab_size", "fingerprint")},
                    "rows": self.rows(t["label"])}

        out = {
            "schema": SCHEMA,
            "corpus": self.corpus,
            "settings": self.settings,
            "tokenizers": [entry(t) for t in self.tokenizers if t["kind"] != "pretokenizer"],
            "pretokenizers": [entry(t) for t in self.tokenizers if t["kind"] == "pretokenizer"],
        }
        if self.findings:
            out["findings"] = [f.to_dict() for f in self.findings]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        import json

        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)


def _clean(row: dict) -> dict:
    out = {}
    for k, v in row.items():
        if isinstance(v, (np.integer,)):
            v = int(v)
        elif isinstance(v, (float, np.floating)):
            v = None if not np.isfinite(v) else float(v)
        out[k] = v
    return out


def analyze(
    paths: Sequence[str | os.PathLike] | Corpus,
    tokenizers: Iterable = (),
    *,
    pretokenizers: Iterable[str] | None = None,
    corpus_options: dict | None = None,
    detail_docs: int | None = 200,
    keep_docs: int = 200_000,
    batch_size: int = 4096,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> Report:
    """Measure every tokenizer (objects or specs) on the same documents.

    detail_docs: per language, how many documents get the per-document checks that call the
    tokenizer once per document (round trip, its own pre-tokenizer ceiling, normaliser changes);
    None checks all. keep_docs: rows kept in the per-document table (parity); the report says
    when it is full. With no tokenizers and pretokenizers=None, the standard families are
    measured so the corpus is profiled with its ceilings. workers: processes that share the
    batches (None: fertility._parallel decides by corpus size); the result is the same.
    """
    toks = [load_tokenizer_arg(t) if isinstance(t, str) else t for t in tokenizers]
    if pretokenizers is None:
        pretokenizers = [] if toks else ["gpt2", "cl100k", "o200k", "whitespace"]
    toks += [PretokenizerFamily(name) for name in pretokenizers]
    labels = [t.label for t in toks]
    if len(set(labels)) != len(labels):
        from fertility.errors import TokenizerError

        raise TokenizerError(f"two tokenizers share a label: {labels}; name them LABEL=SPEC")

    state = _State(seed, detail_docs, keep_docs)
    # The frame needs pandas at the end: import it now, beside the first batches, where it
    # overlaps the tokenizer instead of following the last batch.
    threading.Thread(target=importlib.import_module, args=("pandas",), daemon=True).start()
    n_workers = _parallel.choose_workers(workers, paths, toks)
    if n_workers > 1:
        accs, state, summary = _parallel.run(paths, corpus_options or {}, toks, state,
                                             n_workers, batch_size, progress)
    else:
        corpus = paths if isinstance(paths, Corpus) else Corpus(list(paths),
                                                                **(corpus_options or {}))
        accs = [TokenizerAccumulator(t) for t in toks]
        run_pass(corpus, toks, accs, state, batch_size, progress=progress)
        summary = corpus.summary()
    summary["docs_table_full"] = state.docs_table_full
    lang_names = {i: name for name, i in state.langs.items()}
    return Report(
        frame=build_frame(accs, state.langs),
        docs=docs_frame(state),
        corpus=summary,
        tokenizers=[_describe(t) for t in toks],
        samples={(a.tok.label, U.SCRIPTS[s]): _in_order(v)
                 for a in accs for s, v in a.samples.items()},
        byte_fallback_chars={(a.tok.label, U.SCRIPTS[s]): dict(c.most_common(10))
                             for a in accs for s, c in a.byte_fallback_chars.items()},
        unk_chars={(a.tok.label, U.SCRIPTS[s]): dict(c.most_common(10))
                   for a in accs for s, c in a.unk_chars.items()},
        normalization={a.tok.label: {**a.normalization,
                                     "examples": _in_order(a.normalization["examples"])}
                       for a in accs if a.tok.kind != "pretokenizer"},
        roundtrip={(a.tok.label, lang_names[k]): {**v, "examples": _in_order(v["examples"])}
                   for a in accs for k, v in a.roundtrip.items()},
        settings={"detail_docs": detail_docs, "seed": seed,
                  "keep_docs": keep_docs, "workers": n_workers},
    )


def _in_order(items: list[dict]) -> list[dict]:
    """Items tagged with their corpus position, in corpus order, without the tag."""
    return [{k: v for k, v in x.items() if k != "order"}
            for x in sorted(items, key=lambda x: x["order"])]


def run_pass(corpus, toks, accs, state, batch_size: int, *, owned=None, progress=None) -> None:
    """One pass over the corpus; with `owned` (batch number -> bool) only those batches are
    encoded and measured, the others only advance the order-dependent bookkeeping."""
    def encode_all(texts):
        return [encode_flat(t, texts) for t in toks]

    batches = _prefetch(_batches(corpus.documents(), batch_size), encode_all, owned=owned)
    for index, (batch, texts, encoded) in enumerate(batches):
        measure_batch(batch, texts, encoded, accs, state, index)
        if progress and encoded is not None:
            progress(state.docs_measured, state.bytes_measured)


def _batches(docs, size: int, max_chars: int = BATCH_CHARS):
    """Documents in batches of `size`, cut early at `max_chars` characters."""
    if size < 1:
        from fertility.errors import CorpusError

        raise CorpusError(f"batch size {size}: must be >= 1")
    batch, chars = [], 0
    for doc in docs:
        batch.append(doc)
        chars += len(doc.text)
        if len(batch) >= size or chars >= max_chars:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def _prefetch(batches, encode, depth: int = 2, owned=None):
    """Read and encode batches in a worker thread, `depth` ahead of the measuring thread.

    The tokenizers' Rust code releases the GIL, so encoding batch k+1 overlaps measuring
    batch k; the order of the batches is the corpus order. An error in the worker is raised
    here; leaving the loop early (an error while measuring, Ctrl-C) stops the worker."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for index, batch in enumerate(batches):
                if owned is not None and not owned(index):
                    if not put((batch, None, None)):
                        return
                    continue
                texts = [d.text for d in batch]
                if not put((batch, texts, encode(texts))):
                    return
            put(done)
        except BaseException as exc:  # handed to the measuring thread, raised there
            put(exc)

    worker = threading.Thread(target=work, name="fertility-encode", daemon=True)
    worker.start()
    try:
        while True:
            item = q.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()


def _describe(tok) -> dict:
    return {"label": tok.label, "spec": tok.spec, "kind": tok.kind,
            "vocab_size": int(tok.vocab_size or 0) or None, "fingerprint": tok.fingerprint,
            "config": tok.config(), "tokenizer": tok}


class _State:
    """Cross-batch bookkeeping shared by all tokenizers."""

    def __init__(self, seed: int, detail_docs: int | None, keep_docs: int):
        self.seed = seed
        self.detail_docs = detail_docs
        self.keep_docs = keep_docs
        self.langs: dict[str, int] = {}
        self.detail_seen: dict[int, int] = {}
        self.docs_done = 0  # documents passed, measured here or not (corpus position)
        self.docs_measured = 0  # documents this process measured (progress)
        self.bytes_measured = 0
        self.doc_rows: list[dict] = []
        self.docs_table_full = False


__all__ = ["analyze", "Report", "PretokenizerFamily", "COUNTS", "NS", "SCHEMA"]
