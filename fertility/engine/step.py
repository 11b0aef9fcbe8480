"""The datatrove pipeline steps that measure: each task writes its counts (fertility.engine.
codec) into `output`, and fertility.engine.merge adds them up into the Report.

MeasureCorpus is what `fertility report --tasks N` runs: every task reads the whole corpus
with fertility.corpus (its labels, sampling, warnings) and measures every N-th batch, as the
worker processes of fertility.measure.parallel do, so what depends on corpus order (language
ids, the first documents of each language that get the detail checks, the per-document table,
the samples' ties) comes out exactly as in one process. MeasureDocuments is the step for a
pipeline of your own (a datatrove reader, filters, this step): it measures the documents it
is given, grouped by their language label, and passes them on.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

from datatrove.data import Document, DocumentsPipeline
from datatrove.pipeline.base import PipelineStep
from loguru import logger

from fertility.corpus import Corpus, CorpusOptions, DocBatch
from fertility.errors import TokenizerError
from fertility.measure.batch import encode_flat, measure_batch
from fertility.measure.counters import TokenizerAccumulator
from fertility.measure.passes import BATCH_CHARS, KEEP_DOCS, PassState, run_pass
from fertility.options import BATCH_DOCS, DETAIL_DOCS
from fertility.tokenizers import load_tokenizer_arg, reload_key, reload_tokenizer
from fertility.tokenizers.kinds import can_reload
from fertility.tokenizers.pretokenizer import PretokenizerFamily

if TYPE_CHECKING:  # (datatrove.io is imported where a folder is not a local path: codec)
    from datatrove.io import DataFolderLike

COUNTS_FOLDER = "counts"  # under `output`: one NAME.npz + NAME.json per task, NAME = rank


@contextlib.contextmanager
def quiet_logs(quiet: bool) -> Iterator[None]:
    """datatrove's log lines (INFO lines of every task, the pipeline, the statistics) kept
    off stderr, and out of its log files, while the block runs, when `quiet`; a task process
    is silenced by its step (`quiet` set on it: _Measure.__setstate__)."""
    if not quiet:
        yield
        return
    logger.disable("datatrove")
    try:
        yield
    finally:
        logger.enable("datatrove")


def tokenizer_keys(tokenizers: Iterable, pretokenizers: Iterable[str] = ()) -> list[tuple]:
    """What a task needs to load each tokenizer (and pre-tokenizer family) again:
    fertility.tokenizers' reload keys. Specs are loaded here first, so a bad one fails before
    any task starts."""
    toks = [load_tokenizer_arg(t) if isinstance(t, str) else t for t in tokenizers]
    toks += [PretokenizerFamily(name) for name in pretokenizers]
    labels = [t.label for t in toks]
    if len(set(labels)) != len(labels):
        raise TokenizerError(f"two tokenizers share a label: {labels}; name them LABEL=SPEC")
    for tok in toks:
        if not can_reload(tok):
            raise TokenizerError(
                f"{tok.label}: a tokenizer built in Python cannot be sent to tasks; "
                "give its file or spec"
            )
    return [tuple(reload_key(t)) for t in toks]


def load_keys(keys) -> list:
    """The tokenizers of tokenizer_keys, loaded in this task (a changed file is an error)."""
    return [reload_tokenizer(*k) for k in keys]


class _Measure(PipelineStep):
    type = "📏 - MEASURE"

    def __init__(
        self,
        output: DataFolderLike,
        tokenizers: Sequence = (),
        pretokenizers: Sequence[str] = (),
        *,
        detail_docs: int | None = DETAIL_DOCS,
        keep_docs: int = KEEP_DOCS,
        batch_size: int = BATCH_DOCS,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.output = output  # a local path, a URL or a DataFolder (codec.save)
        loaded = [load_tokenizer_arg(t) if isinstance(t, str) else t for t in tokenizers]
        loaded += [PretokenizerFamily(name) for name in pretokenizers]
        self.keys = tokenizer_keys(loaded)
        # A task run in this process (one local task) uses these instead of loading them
        # again (a second of a short run); a task elsewhere reloads from the keys.
        self._loaded = loaded
        self.settings = (seed, detail_docs, keep_docs)
        self.batch_size = batch_size

    def __getstate__(self):  # sent to a task process: the keys, not loaded tokenizers
        state = dict(self.__dict__)
        state["_loaded"] = []
        return state

    def __setstate__(self, state):
        # A task process unpickles its steps before datatrove sets up its logging: `quiet`
        # (-q) silences it there, as quiet_logs does in the launching process.
        self.__dict__.update(state)
        if getattr(self, "quiet", False):
            logger.disable("datatrove")

    def __deepcopy__(self, memo):
        # datatrove's local executor deep-copies the pipeline before each task it runs in
        # this process (one worker): the copy shares the loaded tokenizers, which measuring
        # only reads, instead of loading and fingerprinting them again (a quarter of a
        # second for a 32k BPE, more for larger files). Everything else is copied as a
        # task process would receive it (__getstate__, __setstate__).
        new = self.__class__.__new__(self.__class__)
        memo[id(self)] = new
        new.__setstate__({k: copy.deepcopy(v, memo) for k, v in self.__getstate__().items()})
        new._loaded = self._loaded
        return new

    def _start(self, world_size: int):
        # The tasks are the parallelism: with several, the tokenizer's threads (HF's rayon
        # pool) are one task's share of the cores (one thread each where tasks outnumber
        # cores, as in fertility.measure.parallel's workers), a setting of the user's kept;
        # a single task keeps the tokenizer's own default, every core, and the environment
        # of the process it runs in untouched.
        if world_size > 1:
            share = max(1, (os.cpu_count() or 1) // world_size)
            os.environ.setdefault("RAYON_NUM_THREADS", str(share))
            if share == 1:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"
        # (keys set after __init__, as fertility.engine.measure does, are loaded here)
        toks = self._loaded if len(self._loaded) == len(self.keys) else load_keys(self.keys)
        return toks, [TokenizerAccumulator(t) for t in toks], PassState(*self.settings)

    def _save(self, rank: int, accs, state: PassState, summary: dict) -> None:
        # deferred: the codec imports only where counts are written
        from fertility.engine import codec

        part = {
            "labels": [a.tok.label for a in accs],
            "fingerprints": [a.tok.fingerprint for a in accs],
            "accs": [a.export() for a in accs],
            "langs": state.langs,
            "doc_rows": codec.pack_rows(state.doc_rows),
            "docs_table_full": state.docs_table_full,
            "summary": summary,
        }
        codec.save(self.output, f"{COUNTS_FOLDER}/{rank:05d}", part)


class MeasureCorpus(_Measure):
    """Measure a corpus read by fertility.corpus, every `world_size`-th batch in this task
    (what `fertility report --tasks N` runs). `sizes`: each file's size when the run was
    launched, so tasks started later read the same bytes (Corpus(...).sizes())."""

    name = "fertility: measure corpus"

    def __init__(
        self,
        output: DataFolderLike,
        paths: Sequence[str],
        tokenizers: Sequence = (),
        pretokenizers: Sequence[str] = (),
        *,
        corpus_options: CorpusOptions | None = None,
        sizes: dict | None = None,
        quiet: bool = False,
        **kw,
    ) -> None:
        super().__init__(output, tokenizers, pretokenizers, **kw)
        self.quiet = quiet  # datatrove's log lines off stderr in the tasks (quiet_logs)
        self.paths = [str(p) for p in paths]
        options = corpus_options or CorpusOptions()
        self.options = options.__class__(**{**vars(options), "on_warning": None})
        self.sizes = sizes

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        toks, accs, state = self._start(world_size)
        # the corpus's warnings once, from task 0 (every task reads the same files)
        quiet = None if rank == 0 else (lambda message: None)
        corpus = Corpus(self.paths, self.options, sizes=self.sizes, on_warning=quiet)
        run_pass(
            corpus,
            toks,
            accs,
            state,
            self.batch_size,
            owned=lambda i: i % world_size == rank,
        )
        self.stat_update("documents", value=state.docs_measured)
        self._save(rank, accs, state, corpus.summary())
        if data:
            yield from data


class MeasureDocuments(_Measure):
    """Measure the datatrove Documents a pipeline hands over, grouped by the language label
    in `metadata[language_key]` ("und" where it has none; FineWeb-2's readers and datatrove's
    LanguageFilter put it in "language"), and pass them on. Each task writes its counts into
    `output`; fertility.engine.merge_counts(output, tokenizers) gives the Report. Empty
    documents are passed on unmeasured. What depends on corpus order (which documents get
    the detail checks, the per-document table) follows each task's own order."""

    name = "fertility: measure documents"

    def __init__(
        self,
        output: DataFolderLike,
        tokenizers: Sequence = (),
        *,
        language_key: str = "language",
        **kw,
    ):
        super().__init__(output, tokenizers, kw.pop("pretokenizers", ()), **kw)
        self.language_key = language_key

    def run(self, data: DocumentsPipeline = None, rank: int = 0, world_size: int = 1):
        toks, accs, state = self._start(world_size)
        docs: list[Document] = []
        chars = 0
        index = 0
        seen = {"documents": 0, "chars": 0}

        def flush() -> None:
            nonlocal index
            batch = DocBatch(
                [d.text for d in docs],
                [str(d.metadata.get(self.language_key) or "und") for d in docs],
                [str(d.id) for d in docs],
                list(range(seen["documents"] - len(docs), seen["documents"])),
            )
            measure_batch(batch, [encode_flat(t, batch.texts) for t in toks], accs, state, index)
            index += 1
            docs.clear()

        for doc in data or ():
            if doc.text:
                docs.append(doc)
                chars += len(doc.text)
                seen["documents"] += 1
                seen["chars"] += len(doc.text)
                self.stat_update("measured")
                if len(docs) >= self.batch_size or chars >= BATCH_CHARS:
                    flush()
                    chars = 0
            yield doc
        if docs:
            flush()
        summary = {**seen, "bytes": state.bytes_measured, "engine": "datatrove documents"}
        self._save(rank, accs, state, summary)
