"""Measuring with several processes: each takes every k-th batch of the same corpus pass.

One process keeps about 1.7 cores busy (the tokenizer's threads, the reading thread and the
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

import os
import queue
import signal
import threading
import time
from collections import Counter

import numpy as np

from fertility.corpus import Corpus, warn
from fertility.errors import FertilityError
from fertility.measure import roundtrip
from fertility.measure.counters import TokenizerAccumulator, grow_rows
from fertility.measure.passes import PassState, run_pass
from fertility.tokenizers import reload_key, reload_tokenizer
from fertility.tokenizers.pretokenizer import PRETOKENIZER

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


def choose_workers(workers: int | None, paths, toks) -> int:
    """Processes to start with: `workers` when given (1 if the run cannot be rebuilt in a
    worker), else 1, and a Switch may hand the rest to workers once it has measured."""
    if workers is not None:
        return max(1, int(workers)) if reloadable(paths, toks) else 1
    return 1


def reloadable(paths, toks) -> bool:
    """Workers rebuild the corpus from paths and each tokenizer from its spec."""

    return not isinstance(paths, Corpus) and all(
        getattr(t, "kind", None) in ("hf", "sentencepiece", "tiktoken", "tekken", PRETOKENIZER)
        and isinstance(getattr(t, "spec", None), str)
        for t in toks
    )


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
        self.cores = cores or os.cpu_count() or 1
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
        idle = (idle1 - idle0) / wall if None not in (idle0, idle1) else self.cores - busy
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


def input_bytes(paths) -> int:
    return sum(Corpus(paths, on_warning=lambda m: None).sizes().values())


def run(
    paths,
    corpus_options: dict,
    toks,
    state,
    n_workers: int,
    batch_size: int,
    progress,
    *,
    start: int = 0,
    accs: list | None = None,
    sizes: dict | None = None,
):
    """Measure with `n_workers` processes the batches from number `start` on; returns
    (accumulators, state, corpus summary). With `start` > 0, `accs` and `state` hold what this
    process measured of the batches before it (a Switch), and the workers' counts are added
    to them."""

    options = {k: v for k, v in corpus_options.items() if k != "on_warning"}
    # every worker reads each file up to the size it has now (or had when `sizes` was
    # taken), even if it grows meanwhile
    options["sizes"] = (
        sizes or Corpus([str(p) for p in paths], **options, on_warning=lambda m: None).sizes()
    )
    on_warning = corpus_options.get("on_warning")
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
                [str(p) for p in paths],
                options,
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
    results, done, bytes_ = {}, {}, {}
    before = (state.docs_measured, state.bytes_measured)
    try:
        while len(results) < n_workers:
            try:
                kind, w, payload = messages.get(timeout=0.5)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise FertilityError(
                        f"a measuring process died (exit code "
                        f"{dead[0].exitcode}); run with workers=1"
                    ) from None
                continue
            if kind == "progress":
                done[w], bytes_[w] = payload
                if progress:
                    progress(before[0] + sum(done.values()), before[1] + sum(bytes_.values()))
            elif kind == "warning":
                if on_warning:
                    on_warning(payload)
                else:
                    warn(payload)
            elif kind == "error":
                raise payload
            else:
                results[w] = payload
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
            p.join()
    accs = accs or [TokenizerAccumulator(t) for t in toks]
    for w in range(n_workers):
        part = results[w]
        for acc, exported in zip(accs, part["accs"]):
            _merge(acc, exported)
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
    parent, w, n_workers, paths, options, specs, settings, batch_size, start, messages
) -> None:
    _end_with_parent(parent)
    # One tokenizer thread per process: the processes are the parallelism.
    os.environ["RAYON_NUM_THREADS"] = "1"
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        warn = (lambda m: messages.put(("warning", w, m))) if w == 0 else (lambda m: None)
        corpus = Corpus(paths, **options, on_warning=warn)
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
                    "accs": [_export(a) for a in accs],
                    "doc_rows": state.doc_rows,
                    "langs": state.langs,
                    "docs_table_full": state.docs_table_full,
                    "summary": corpus.summary() if w == 0 else None,
                },
            )
        )
    except BaseException as exc:  # handed to the parent, which raises it
        try:
            messages.put(("error", w, exc))
        except Exception:
            messages.put(("error", w, RuntimeError(f"{type(exc).__name__}: {exc}")))


def _export(acc) -> dict:
    """What the parent needs from an accumulator (everything but the tokenizer object)."""
    return {
        "lang": acc.counts.lang,
        "script": acc.counts.script,
        "boot": (acc.boot.lang, acc.boot.script),
        "vocab_all": acc.vocab_all,
        "vocab_lang": acc.vocab_lang,
        "vocab_script": acc.vocab_script,
        "byte_fallback_chars": acc.byte_fallback_chars,
        "unk_chars": acc.unk_chars,
        "samples": acc.samples,
        "normalization": acc.normalization,
        "roundtrip": acc.roundtrip,
    }


def _add_rows(mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    mine = grow_rows(mine, theirs.shape[0])
    mine[: theirs.shape[0]] += theirs
    return mine


def _merge(acc, part: dict) -> None:
    acc.counts.add_table(part["lang"], part["script"])
    lang, script = part["boot"]
    acc.boot.lang = _add_rows(acc.boot.lang, lang)
    acc.boot.script += script
    if acc.track_vocab:
        acc.vocab_all |= part["vocab_all"]
        for mine, theirs in (
            (acc.vocab_lang, part["vocab_lang"]),
            (acc.vocab_script, part["vocab_script"]),
        ):
            for key, mask in theirs.items():
                if key in mine:
                    mine[key] |= mask
                else:
                    mine[key] = mask
    for mine, theirs in (
        (acc.byte_fallback_chars, part["byte_fallback_chars"]),
        (acc.unk_chars, part["unk_chars"]),
    ):
        for key, counter in theirs.items():
            mine.setdefault(key, Counter()).update(counter)
    for key, items in part["samples"].items():
        merged = sorted(acc.samples.get(key, []) + items, key=lambda x: x["order"])
        acc.samples[key] = merged[: acc.samples_per_script]
    for lang, changes in part["roundtrip"].items():
        roundtrip.merge(acc.roundtrip.setdefault(lang, roundtrip.new_changes()), changes)
    norm, other = acc.normalization, part["normalization"]
    norm["checked_docs"] += other["checked_docs"]
    norm["changed_docs"] += other["changed_docs"]
    norm["examples"] = sorted(norm["examples"] + other["examples"], key=lambda x: x["order"])[:5]
