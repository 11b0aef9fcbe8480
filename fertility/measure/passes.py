"""One pass over the corpus: batches read and encoded ahead in a thread, measured in order."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager

from fertility.measure.batch import DetailPlan, encode_checked, encode_flat, measure_batch
from fertility.threads import encoding_threads

_END = object()

# A batch ends at `batch_size` documents or this many characters, whichever comes first: big
# enough that numpy's per-call cost is spread over many characters (4,096 documents of real
# text measure in about two thirds of the main-thread time of 512), small enough that the
# per-character arrays of one batch (about 100 bytes a character) stay near 25 MB.
BATCH_CHARS = 1 << 18
# rows kept in the per-document table (the parity premium and the baseline check read it)
KEEP_DOCS = 200_000


def run_pass(
    corpus,
    toks,
    accs,
    state,
    batch_size: int,
    *,
    owned=None,
    progress=None,
    until=None,
    sink=None,
    route=None,
) -> int | None:
    """One pass over the corpus; with `owned` (batch number -> bool) only those batches are
    encoded and measured, the others only advance the order-dependent bookkeeping. With
    `until` ((batch number, bytes measured) -> bool, a fertility.measure.parallel.Switch, told
    the reading thread's CPU seconds in its read_seconds) the pass stops after the first batch
    it says True for and returns the next batch's number; None when the pass went to the end.
    `sink(batch, encoded)` sees every measured batch with its encodings (one per tokenizer,
    encode_flat's form): `fertility tokenize` writes its shards from the ids measured here.
    `route` (batch number -> accumulators, one per tokenizer, or None to leave the batch out)
    measures each batch into the accumulators it names instead of `accs` (--precision: each
    language into its own)."""

    def encode(item):
        batch, checked = item
        got = [encode_checked(t, batch.texts, checked) for t in toks]
        return [flat for flat, _ in got], [came for _, came in got]

    # each batch with the documents the detail checks will take (planned as it is read)
    plan = DetailPlan(state)
    docs = ((batch, plan(batch)) for batch in corpus.doc_batches(batch_size, BATCH_CHARS))
    if until is not None:
        docs = _reading_time(docs, until)
    with _read_and_encoded(docs, encode, owned) as batches:
        for index, ((batch, _), encoded) in enumerate(batches):
            enc, came = encoded if encoded is not None else (None, None)
            into = accs if route is None else route(index)
            if into is None:  # a batch `route` leaves out
                continue
            measure_batch(batch, enc, into, state, index, came)
            if sink is not None and enc is not None:
                sink(batch, enc)
            if progress and enc is not None:
                progress(state.docs_measured, state.bytes_measured)
            if until is not None and until(index, state.bytes_measured):
                return index + 1
    return None


def encode_pass(corpus, tok, batch_size: int, *, owned, sink, progress=None) -> None:
    """run_pass without the measuring (`fertility tokenize --no-counts`): every batch `owned`
    (batch number -> bool) says is this task's is encoded (encode_flat's form) and handed to
    `sink(batch, [encoded])`; the same reading and encoding threads, the same batches."""

    def encode(batch):
        return [encode_flat(tok, batch.texts)]

    docs = nbytes = 0
    with _read_and_encoded(corpus.doc_batches(batch_size, BATCH_CHARS), encode, owned) as batches:
        for batch, enc in batches:
            if enc is None:  # another task's
                continue
            sink(batch, enc)
            if progress:
                docs += len(batch)
                nbytes += sum(map(len, map(str.encode, batch.texts)))
                progress(docs, nbytes)


@contextmanager
def _read_and_encoded(docs, encode, owned):
    """(batch, encode(batch) or None) for each of `docs` in order (see _encoded), with the
    threads ahead of the measuring one: reading (Python, holds the interpreter) and encoding
    (the tokenizers' Rust code releases it), a batch per encoding thread. In one thread the
    tokenizer's cores sat idle while the next batch was read; apart, reading overlaps
    encoding. Leaving stops and waits for every one of them."""
    reading = _ahead(docs, depth=4, name="fertility-read")
    with (
        encoding_threads() as n,
        closing(reading),
        closing(_encoded(reading, encode, n, owned)) as batches,
    ):
        yield batches


def _encoded(batches, encode, workers: int, owned=None):
    """(batch, encode(batch)) for each of `batches` in order, encode run on `workers` threads
    up to workers + 1 batches ahead of the consumer; (batch, None) for a batch `owned`
    (batch number -> bool) says is not this process's. An error in encode is raised here;
    leaving early (an error while measuring, Ctrl-C) cancels what has not started and waits
    for what has."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix="fertility-encode")
    pending: deque = deque()
    numbered = enumerate(batches)
    try:
        while True:
            while len(pending) <= workers:
                index, batch = next(numbered, (None, _END))
                if batch is _END:
                    break
                mine = owned is None or owned(index)
                pending.append((batch, pool.submit(encode, batch) if mine else None))
            if not pending:
                return
            batch, job = pending.popleft()
            yield batch, None if job is None else job.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _reading_time(items, into):
    """`items`, adding the CPU seconds of the thread that produces them to into.read_seconds."""
    with closing(iter(items)) as it:
        while True:
            t = time.thread_time()
            item = next(it, _END)
            into.read_seconds += time.thread_time() - t
            if item is _END:
                return
            yield item


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
        self.detail_seen: dict[int, tuple[int, int]] = {}  # language: documents, characters
        self.docs_done = 0  # documents passed, measured here or not (corpus position)
        self.docs_measured = 0  # documents this process measured (progress)
        self.bytes_measured = 0
        self.doc_rows: list[dict] = []
        self.docs_table_full = False
