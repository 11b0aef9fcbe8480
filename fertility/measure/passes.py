"""One pass over the corpus: batches read and encoded ahead in a thread, measured in order."""

from __future__ import annotations

import queue
import threading
from contextlib import closing

from fertility.corpus import DocBatch
from fertility.errors import CorpusError
from fertility.measure.batch import encode_flat, measure_batch

# A batch ends at `batch_size` documents or this many characters, whichever comes first: big
# enough that numpy's per-call cost is spread over many characters (4,096 documents of real
# text measure in about two thirds of the main-thread time of 512), small enough that the
# per-character arrays of one batch (about 100 bytes a character) stay near 25 MB.
BATCH_CHARS = 1 << 18


def run_pass(corpus, toks, accs, state, batch_size: int, *, owned=None, progress=None) -> None:
    """One pass over the corpus; with `owned` (batch number -> bool) only those batches are
    encoded and measured, the others only advance the order-dependent bookkeeping."""

    def encoded(batches):
        for index, batch in enumerate(batches):
            if owned is not None and not owned(index):
                yield batch, None
                continue
            yield batch, [encode_flat(t, batch.texts) for t in toks]

    # Two threads ahead of the measuring one: reading (Python, holds the interpreter) and
    # encoding (the tokenizers' Rust code releases it). In one thread the tokenizer's cores
    # sat idle while the next batch was read; apart, reading overlaps encoding.
    docs = map(DocBatch.of, _batches(corpus.documents(), batch_size))
    reading = _ahead(docs, depth=4, name="fertility-read")
    with closing(reading), closing(_ahead(encoded(reading), name="fertility-encode")) as batches:
        for index, (batch, enc) in enumerate(batches):
            measure_batch(batch, enc, accs, state, index)
            if progress and enc is not None:
                progress(state.docs_measured, state.bytes_measured)


def _batches(docs, size: int, max_chars: int = BATCH_CHARS):
    """Documents in batches of `size`, cut early at `max_chars` characters."""
    if size < 1:
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


def _ahead(items, depth: int = 2, name: str = "fertility-ahead"):
    """Iterate `items` in a worker thread, up to `depth` items ahead of the consumer, in
    order. An error in the worker is raised here; closing the generator early (an error
    while measuring, Ctrl-C) stops the worker and waits for it."""
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
            for item in items:
                if not put(item):
                    return
            put(done)
        except BaseException as exc:  # handed to the consuming thread, raised there
            put(exc)

    worker = threading.Thread(target=work, name=name, daemon=True)
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


class PassState:
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
