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
    if k <= 1:
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


@contextlib.contextmanager
def serial_batches() -> Iterator[None]:
    """HF tokenizers' batch encode on the calling thread alone while inside (its rayon pool
    off: TOKENIZERS_PARALLELISM=false, which the library reads at each call), unless the
    user set that variable; as it was afterwards. For passes of small batches (--precision's
    16 KB blocks), where the pool's threads waiting between batches cost half again the
    encoding's CPU, which the measuring thread needed: 4.4-4.6 s against 4.7-5.8 s, and 6.5
    against 7.0-8.5 s of CPU, on the 206 MB benchmark (benchmarks/RESULTS.md, stop 46)."""
    if "TOKENIZERS_PARALLELISM" in os.environ:
        yield
        return
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        os.environ.pop("TOKENIZERS_PARALLELISM", None)
