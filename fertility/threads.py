"""The cores this process may use, and one pool of threads per process for work that lets go
of the interpreter (a tokenizer library's encode of one text)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_POOL: dict[int, ThreadPoolExecutor] = {}  # process id -> its pool
_serial = False  # inside encoding_threads: each batch is encoded on the calling thread alone


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says), at least 1."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def by_chunks(fn: Callable[[Sequence[T]], list[R]], items: Sequence[T]) -> list[R]:
    """fn over `items` cut into one contiguous chunk per usable core, run side by side on this
    process's pool, the results end to end in order. A library's own batch call that hands
    each item to a thread of its own costs more than the work on short items: tiktoken's
    encode_ordinary_batch took 0.9 s for 32,000 interface strings of 26 characters that a
    loop over them encodes in 0.17 s (o200k); in two chunks on two cores, 0.17 s, and on
    long documents 0.07 s against the batch call's 0.10 s (benchmarks/RESULTS.md)."""
    k = min(usable_cores(), len(items))
    if k <= 1 or _serial:  # (the pass runs several of these side by side: encoding_threads)
        return fn(items)
    step = -(-len(items) // k)
    out: list[R] = []
    for part in _pool().map(fn, [items[i : i + step] for i in range(0, len(items), step)]):
        out += part
    return out


def _pool() -> ThreadPoolExecutor:
    """This process's pool, a thread per usable core. A forked child makes its own: a pool's
    threads do not survive fork, and work handed to the parent's would wait forever."""
    pid = os.getpid()
    if pid not in _POOL:
        _POOL.clear()
        _POOL[pid] = ThreadPoolExecutor(usable_cores(), thread_name_prefix="fertility-chunk")
    return _POOL[pid]


# The one measuring thread keeps up with about this many: on the 25 MB benchmark it measured
# 14 MB/s of text on one core where one thread encoded 3.5 MB/s with the 32k BPE (both scale
# with the tokenizers a pass has). More would only hold more batches in memory (workers + 1
# of them), waiting to be measured.
MAX_ENCODING_THREADS = 4


@contextlib.contextmanager
def encoding_threads() -> Iterator[int]:
    """Inside, a pass encodes its batches on threads of its own, each batch wholly on one
    of them; yields how many. The libraries' own threads are off: HF tokenizers' rayon
    pool (TOKENIZERS_PARALLELISM=false, which it reads at each call), tiktoken's chunks
    (by_chunks) and SentencePiece's batch threads (library_threads). On two cores, 25 MB of
    real text and a 32k BPE, a whole report took 0.88-0.91 of the time at 0.96-0.99 of the
    CPU (quiet host; 0.81-0.94 when loaded): no core waits while the measuring thread
    works, where the rayon pool's threads waited for work between batches. The encode
    alone is about even on a quiet host and cheaper on a loaded one (10.0-12.0 s of CPU
    against 12.1-14.3 s: benchmarks/encode_threads.py, benchmarks/RESULTS.md, stop 47).
    How many: a core each (RAYON_NUM_THREADS where set, as fertility's task processes set
    their share), at most MAX_ENCODING_THREADS. Where TOKENIZERS_PARALLELISM is already set
    (the user's choice, or a worker process's of one thread) nothing changes: one thread, the
    libraries as set."""
    global _serial
    if "TOKENIZERS_PARALLELISM" in os.environ or _serial:
        yield 1
        return
    n = min(usable_cores(), MAX_ENCODING_THREADS)
    rayon = os.environ.get("RAYON_NUM_THREADS", "")
    if rayon.isdigit() and int(rayon) > 0:
        n = min(n, int(rayon))
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _serial = True
    try:
        yield n
    finally:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
        _serial = False


def library_threads() -> int:
    """The threads a library's own batch call may use: 1 inside encoding_threads, else -1
    (SentencePiece's "as many as the machine has")."""
    return 1 if _serial else -1
