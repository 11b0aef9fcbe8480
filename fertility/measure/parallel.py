"""Measuring with several processes: each takes every k-th batch of the same corpus pass.

One process keeps 1.7-1.9 of two cores busy (the encoding threads, the reading thread and the
numpy measuring share the interpreter and the cores); where more cores sit idle, worker
processes each run the tokenizer on one thread (RAYON_NUM_THREADS=1) and measure their own
batches. `Switch` decides at run time whether they would finish sooner, and they take over
from the next batch. Every worker reads the whole corpus so that everything that depends on
corpus order (language ids, the first documents per language that get the detail checks, the
position in the per-document table) comes out exactly as in one process. The parent adds the
counters up. The result equals the single-process one (tests/measure/test_parallel.py,
tests/measure/test_switch.py).
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import queue
import signal
import threading
import time

from fertility.corpus import Corpus, warn
from fertility.errors import FertilityError, one_line
from fertility.measure.counters import TokenizerAccumulator
from fertility.measure.passes import PassState, run_pass
from fertility.threads import usable_cores
from fertility.tokenizers import reload_key, reload_tokenizer
from fertility.tokenizers.kinds import can_reload

MAX_WORKERS = 4
# The one-process pass runs this long before the switch is weighed: past the start, where the
# first batches classify new code points and pandas is imported beside them.
PROBE_SECONDS = 4.0
# Workers take over only when they are projected to finish in at most this share of the time
# one process still needs: the projection assumes each worker keeps one core busy, which a
# worker (one tokenizer thread and its measuring) does not always reach, and workers spend
# more CPU in all (each reads the whole corpus). On 2 cores a 0.9 margin switched at 250 MB
# for 4% less wall time and 22% more CPU (benchmarks/RESULTS.md).
MARGIN = 0.75


def choose_workers(workers: int | None, paths, toks, warn=warn) -> int:
    """Processes to start with: `workers` when given (1 if the run cannot be rebuilt in a
    worker; at most the cores, see cap_workers), else 1, and a Switch may hand the rest to
    workers once it has measured."""
    if workers is not None:
        return cap_workers(max(1, int(workers)), warn) if reloadable(paths, toks) else 1
    return 1


def cap_workers(workers: int, warn, option: str = "--workers") -> int:
    """`workers` processes, or the usable cores when that is fewer, said in one warning:
    each worker keeps a core busy, so more only share the cores and cost their start-up
    (`--workers 100000` was still starting processes after 120 s; the run takes 1.2 s)."""
    cores = usable_cores()
    if workers <= cores:
        return workers
    warn(f"{option} {workers:,}: more than the {cores} core(s) this process may use; using {cores}")
    return cores


def reloadable(paths, toks) -> bool:
    """Workers rebuild the corpus from paths and each tokenizer by its kind's declared
    reload (fertility.tokenizers.kinds: a kind without one never gets workers)."""

    return not isinstance(paths, Corpus) and all(can_reload(t) for t in toks)


class Switch:
    """Whether worker processes would finish the rest of the corpus sooner than this one,
    decided once from this run's own timings (a threshold on corpus size can only be right
    for the machine it was measured on: benchmarks/RESULTS.md).

    After PROBE_SECONDS of the pass: `busy` = CPU seconds / wall seconds, the cores this
    process keeps busy; `idle` = the cores the whole machine left idle meanwhile (Linux
    /proc/stat; elsewhere cores - busy), so other jobs' use is not counted as room;
    `left` = the wall seconds this process still needs at the rate measured. A worker pays
    `startup` (the imports and tokenizer loading this process paid) plus reading again the
    part already measured (the reading thread's CPU so far) before it measures. n =
    min(cores, MAX_WORKERS) workers, each keeping one core busy, can use min(n, busy + idle)
    cores, so the rest takes about startup + reread + left * busy / min(n, busy + idle).
    Call it with (batch index, bytes measured so far); True means stop after that batch and
    start `self.workers` processes. `clock` () -> (wall s, CPU s of this process, idle
    CPU s of the machine or None) is for tests."""

    def __init__(self, total_bytes: int, startup: float, cores: int | None = None, clock=None):
        self.total = total_bytes
        self.startup = startup
        self.cores = cores or usable_cores()
        self.workers = min(self.cores, MAX_WORKERS)
        self.clock = clock or _clock
        self.read_seconds = 0.0  # CPU of the reading thread so far (fertility.measure.passes)
        self.start = self.clock()
        self.decided: dict | None = None

    def __call__(self, index: int, bytes_done: int) -> bool:
        if self.decided is not None or self.workers < 2:
            return False
        (wall0, cpu0, idle0), (wall1, cpu1, idle1) = self.start, self.clock()
        wall = wall1 - wall0
        if wall < PROBE_SECONDS or bytes_done <= 0:
            return False
        busy = (cpu1 - cpu0) / wall
        if idle0 is not None and idle1 is not None:  # /proc/stat readable
            idle = (idle1 - idle0) / wall
        else:
            idle = self.cores - busy
        idle = min(max(idle, 0.0), self.cores)
        left = wall * max(self.total - bytes_done, 0) / bytes_done
        usable = min(self.workers, busy + idle)
        projected = self.startup + self.read_seconds + left * busy / max(usable, 1e-9)
        self.decided = {
            "after_batch": index,
            "busy_cores": round(busy, 2),
            "idle_cores": round(idle, 2),
            "left_s": round(left, 1),
            "projected_s": round(projected, 1),
            "switch": projected <= MARGIN * left,
        }
        return self.decided["switch"]


def _clock() -> tuple[float, float, float | None]:
    return time.perf_counter(), time.process_time(), _idle_seconds()


def _idle_seconds() -> float | None:
    """CPU seconds all cores have spent idle since boot (idle + iowait of /proc/stat)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
        return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def run(
    corpus: Corpus,
    toks,
    state,
    n_workers: int,
    batch_size: int,
    progress,
    *,
    start: int = 0,
    accs: list | None = None,
):
    """Measure with `n_workers` processes the batches of `corpus` from number `start` on;
    returns (accumulators, state, corpus summary). With `start` > 0, `accs` and `state` hold
    what this process measured of the batches before it (a Switch), and the workers' counts
    are added to them. The stages: start the workers, collect what they send, merge."""
    procs, messages = _start(corpus, toks, state, n_workers, batch_size, start)
    try:
        results = _collect(procs, messages, state, progress, corpus.warn)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
    return _merge(results, toks, state, accs)


def _start(corpus: Corpus, toks, state, n_workers: int, batch_size: int, start: int):
    """The worker processes, started, and the queue they send on. Each rebuilds the corpus
    from its paths and options, every file read up to the size it had when `corpus` was
    opened (even if it grows meanwhile), and each tokenizer by its kind's reload."""
    options = dataclasses.replace(corpus.options, on_warning=None)  # sent to the workers
    sizes = corpus.sizes()
    # deferred: multiprocessing only when workers start (50 ms of every start otherwise)
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    messages = ctx.Queue()
    specs = [reload_key(t) for t in toks]
    procs = [
        ctx.Process(
            target=_worker,
            daemon=True,
            args=(
                os.getpid(),
                w,
                n_workers,
                [str(p) for p in corpus.paths],
                options,
                sizes,
                specs,
                (state.seed, state.detail_docs, state.keep_docs),
                batch_size,
                start,
                messages,
            ),
        )
        for w in range(n_workers)
    ]
    for p in procs:
        p.start()
    return procs, messages


def _collect(procs: list, messages, state, progress, warn) -> dict[int, dict]:
    """Each worker's result, by worker number, with their progress and the first worker's
    warnings passed on meanwhile; a worker's error is raised here, and so is a death."""
    results: dict[int, dict] = {}
    done: dict[int, int] = {}
    bytes_: dict[int, int] = {}
    quiet_exits: set[int] = set()
    before = (state.docs_measured, state.bytes_measured)
    while len(results) < len(procs):
        try:
            kind, w, payload = messages.get(timeout=0.5)
        except queue.Empty:
            dead = [p for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise FertilityError(
                    f"a measuring process died (exit code {dead[0].exitcode}); run with workers=1"
                ) from None
            # Exited cleanly with no result: its last message was lost. Asked on the
            # second empty wait, so a result still in the pipe when it exited arrives.
            silent = {i for i, p in enumerate(procs) if p.exitcode == 0} - set(results)
            if silent & quiet_exits:
                raise FertilityError(
                    "a measuring process ended without its result; run with workers=1"
                ) from None
            quiet_exits = silent
            continue
        if kind == "progress":
            done[w], bytes_[w] = payload
            if progress:
                progress(before[0] + sum(done.values()), before[1] + sum(bytes_.values()))
        elif kind == "warning":
            warn(payload)
        elif kind == "error":
            raise payload
        else:
            results[w] = payload
    return results


def _merge(results: dict[int, dict], toks, state, accs: list | None):
    """The workers' counts added up (onto `accs` when this process measured a part first):
    (accumulators, state, the corpus summary of the first worker, which read it all)."""
    accs = accs or [TokenizerAccumulator(t) for t in toks]
    for w in range(len(results)):
        part = results[w]
        for acc, exported in zip(accs, part["accs"]):
            acc.merge(exported)
        state.doc_rows += part["doc_rows"]
    first = results[0]
    state.langs = first["langs"]
    state.docs_table_full = first["docs_table_full"]
    return accs, state, first["summary"]


def _end_with_parent(parent: int) -> None:
    """A worker must not outlive the run that started it, whatever signal ended that run
    (SIGKILL leaves the parent no chance to terminate it). On Linux the kernel sends SIGKILL
    when the parent dies (PR_SET_PDEATHSIG); elsewhere, and for a parent that died before
    that was set, a thread notices the worker has been re-parented and exits."""

    try:
        # deferred: ctypes only where prctl exists
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PDEATHSIG
    except (OSError, AttributeError, TypeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _worker(
    parent, w, n_workers, paths, options, sizes, specs, settings, batch_size, start, messages
) -> None:
    _end_with_parent(parent)
    # One tokenizer thread per process: the processes are the parallelism.
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        warn = (lambda m: messages.put(("warning", w, m))) if w == 0 else (lambda m: None)
        corpus = Corpus(paths, options, sizes=sizes, on_warning=warn)
        toks = [reload_tokenizer(*s) for s in specs]
        state = PassState(*settings)
        accs = [TokenizerAccumulator(t) for t in toks]

        def progress(docs, nbytes):
            messages.put(("progress", w, (docs, nbytes)))

        run_pass(
            corpus,
            toks,
            accs,
            state,
            batch_size,
            progress=progress,
            owned=lambda i: i >= start and (i - start) % n_workers == w,
        )
        messages.put(
            (
                "result",
                w,
                {
                    "accs": [a.export() for a in accs],
                    "doc_rows": state.doc_rows,
                    "langs": state.langs,
                    "docs_table_full": state.docs_table_full,
                    "summary": corpus.summary() if w == 0 else None,
                },
            )
        )
    except BaseException as exc:  # handed to the parent, which raises it
        # The queue pickles in a background thread, where a failure is lost (a Rust panic
        # does not pickle): an error that cannot make the trip goes as one line instead.
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:
            exc = FertilityError(f"unexpected {type(exc).__name__}: {one_line(exc)}")
        messages.put(("error", w, exc))
