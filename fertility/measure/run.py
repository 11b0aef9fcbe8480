"""analyze: every tokenizer measured on the same documents of one corpus, in one process,
in worker processes (fertility/measure/parallel.py) or to a precision (precision.py); its end
is build_report (fertility/measure/report.py)."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from fertility.corpus import Corpus, CorpusOptions, warn
from fertility.errors import TokenizerError
from fertility.measure import parallel
from fertility.measure.counters import TokenizerAccumulator
from fertility.measure.passes import KEEP_DOCS, PassState, run_pass
from fertility.measure.report import Report, build_report
from fertility.options import BATCH_DOCS, DETAIL_DOCS
from fertility.tokenizers import load_tokenizer_arg
from fertility.tokenizers.pretokenizer import PretokenizerFamily


def analyze(
    paths: Sequence[str | os.PathLike] | Corpus,
    tokenizers: Iterable = (),
    *,
    pretokenizers: Iterable[str] | None = None,
    corpus_options: CorpusOptions | None = None,
    detail_docs: int | None = DETAIL_DOCS,
    keep_docs: int = KEEP_DOCS,
    batch_size: int = BATCH_DOCS,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    on_corpus: Callable[[Corpus], None] | None = None,
) -> Report:
    """Measure every tokenizer (objects or specs) on the same documents.

    detail_docs: per language, how many documents get the per-document checks that call the
    tokenizer once per document (round trip, its own pre-tokenizer ceiling, normaliser changes);
    None checks all. keep_docs: rows kept in the per-document table (parity); the report says
    when it is full. With no tokenizers and pretokenizers=None, the standard families are
    measured so the corpus is profiled with its ceilings. workers: processes that share the
    batches (None: one, and a fertility.measure.parallel.Switch may hand the rest to workers
    once it has timed this process; the decision is in settings["switch"]); the result is
    the same. on_corpus: called with the run's one Corpus once it is made, before it is read
    (a progress line takes its total from it: fertility.progress.Progress.sized_by)."""
    toks = [load_tokenizer_arg(t) if isinstance(t, str) else t for t in tokenizers]
    if pretokenizers is None:
        pretokenizers = [] if toks else ["gpt2", "cl100k", "o200k", "whitespace"]
    toks += [PretokenizerFamily(name) for name in pretokenizers]
    labels = [t.label for t in toks]
    if len(set(labels)) != len(labels):
        raise TokenizerError(f"two tokenizers share a label: {labels}; name them LABEL=SPEC")

    startup = time.process_time()  # imports and tokenizer loading: what a worker pays too
    state = PassState(seed, detail_docs, keep_docs)
    threading.Thread(target=_ahead_of_the_end, args=(toks,), daemon=True).start()
    options = corpus_options or CorpusOptions()
    # workers repeat the corpus's warnings
    options = dataclasses.replace(options, on_warning=_once(options.on_warning))
    # --precision measures in one process: it stops between batches (fertility.measure.precision)
    precise = options.precision is not None
    if precise:
        # deferred: only --precision reads in blocks (12 ms of every report's start-up)
        from fertility.measure import precision

        precision.check(options)
    n_workers = (
        1 if precise else parallel.choose_workers(workers, paths, toks, options.on_warning or warn)
    )
    # the one Corpus of the run, handed down (workers rebuild it from its paths and sizes)
    corpus = paths if isinstance(paths, Corpus) else Corpus(list(paths), options)
    if on_corpus is not None:
        on_corpus(corpus)
    switch, weighted = None, None
    if precise:
        accs, summary, weighted = precision.run(corpus, options, toks, state, batch_size, progress)
    elif n_workers > 1:
        accs, state, summary = parallel.run(corpus, toks, state, n_workers, batch_size, progress)
    else:
        accs = [TokenizerAccumulator(t) for t in toks]
        if workers is None and parallel.reloadable(paths, toks):
            total = sum(corpus.sizes().values())
            switch = parallel.Switch(total, startup)
        rest = run_pass(corpus, toks, accs, state, batch_size, progress=progress, until=switch)
        if rest is None:
            summary = corpus.summary()
        else:  # the switch found workers would finish sooner: they measure the rest
            assert switch is not None, "run_pass stops before the end only when told to"
            n_workers = switch.workers
            accs, state, summary = parallel.run(
                corpus, toks, state, n_workers, batch_size, progress, start=rest, accs=accs
            )
    settings = {
        "detail_docs": detail_docs,
        "seed": seed,
        "keep_docs": keep_docs,
        "workers": n_workers,
        "switch": switch.decided if switch else None,
    }
    return build_report(accs, state, summary, toks, settings, weighted=weighted)


def _ahead_of_the_end(toks) -> None:
    """What the end needs and the measuring does not, done beside the first batches where it
    overlaps the tokenizer instead of following the last batch: each tokenizer's fingerprint
    (an HF one serialises the whole vocabulary). pandas is not among it: the report is built
    without it (Report.frame makes a DataFrame when asked for one)."""
    try:
        for tok in toks:
            tok.fingerprint  # noqa: B018  (cached on the tokenizer)
    except Exception:  # the end asks again and reports it there, on the main thread
        pass


def _once(on_warning: Callable[[str], None] | None) -> Callable[[str], None]:
    """on_warning (or the corpus's default) for each distinct message once: a worker that
    takes over reads the corpus again from its start and repeats what was already said."""
    seen: set[str] = set()
    say = on_warning or warn

    def once(message: str) -> None:
        if message not in seen:
            seen.add(message)
            say(message)

    return once
