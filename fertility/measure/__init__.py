"""Counts per (tokenizer, language, script) -> one tidy DataFrame (docs/METRICS.md).

`analyze` streams the corpus in batches. For each batch the tokenizer-independent facts (scripts,
graphemes, words, bytes) are computed once (fertility.unicode), then every tokenizer encodes the
same documents and its counters are updated with vectorised numpy. Nothing here formats output.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fertility import unicode as U
from fertility.corpus import Corpus, CorpusOptions, warn
from fertility.errors import TokenizerError
from fertility.files import json_safe
from fertility.measure import card, parallel, precision
from fertility.measure.counters import COUNTS, NS, TokenizerAccumulator
from fertility.measure.frame import build_frame, docs_frame, running_by_language
from fertility.measure.passes import KEEP_DOCS, PassState, run_pass
from fertility.tokenizers import load_tokenizer_arg
from fertility.tokenizers.pretokenizer import PRETOKENIZER, PretokenizerFamily

if TYPE_CHECKING:  # the frame is built with pandas at the end; measuring needs only numpy
    import pandas as pd

    from fertility.policy import Policy

SCHEMA = "fertility.report/1"


@dataclass
class TokenizerInfo:
    """One measured tokenizer (or pre-tokenizer family) of a Report: what the JSON says of it
    (`to_dict`), its split/normaliser configuration and the loaded tokenizer itself."""

    label: str
    spec: str
    kind: str
    vocab_size: int | None = None
    fingerprint: str | None = None
    config: dict | None = None
    tokenizer: Any = None

    def to_dict(self) -> dict:
        """The report JSON's fields, in its order."""
        return {
            "label": self.label,
            "spec": self.spec,
            "kind": self.kind,
            "vocab_size": self.vocab_size,
            "fingerprint": self.fingerprint,
        }


@dataclass
class Report:
    frame: pd.DataFrame
    docs: pd.DataFrame
    corpus: dict
    tokenizers: list[TokenizerInfo]
    samples: dict = field(default_factory=dict)
    byte_fallback_chars: dict = field(default_factory=dict)
    unk_chars: dict = field(default_factory=dict)
    normalization: dict = field(default_factory=dict)
    roundtrip: dict = field(
        default_factory=dict
    )  # {(label, lang): fertility.measure.roundtrip changes}
    settings: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    # label -> the pairwise overlap of its languages' token distributions (card.overlap)
    overlap: dict = field(default_factory=dict)
    # (label, script) -> {language: characters of its running text in that language}: what a
    # script is judged by (fertility.measure.frame.language_shares)
    running_langs: dict = field(default_factory=dict)
    # the policy whose reference, declared parallel files and parity thresholds the JSON's
    # Gini reads its premiums under (None: the built-in ones); the report command sets it
    policy: Policy | None = None
    # label -> the JSON's per-tokenizer verdict: a judgement, so the judging side sets it
    # (fertility.gate.verdicts; the report command and fertility.analyze); none when empty
    verdicts: dict = field(default_factory=dict)

    def rows(self, label: str) -> list[dict]:
        sub = self.frame[self.frame["tokenizer"] == label]
        cols = [c for c in sub.columns if c not in ("tokenizer", "kind")]
        return [json_safe(r) for r in sub[cols].to_dict(orient="records")]

    def to_dict(self) -> dict:
        # vocabulary_scripts, gini, overlap, then the gate's verdict when one was set
        cards = json_safe(card.cards(self, self.policy))
        verdicts = json_safe(self.verdicts)

        def entry(t: TokenizerInfo) -> dict:
            judged = {"verdict": verdicts[t.label]} if t.label in verdicts else {}
            return {**t.to_dict(), **cards.get(t.label, {}), **judged, "rows": self.rows(t.label)}

        out = {
            "schema": SCHEMA,
            "corpus": self.corpus,
            "settings": self.settings,
            "tokenizers": [entry(t) for t in self.tokenizers if t.kind != PRETOKENIZER],
            "pretokenizers": [entry(t) for t in self.tokenizers if t.kind == PRETOKENIZER],
        }
        if self.findings:
            out["findings"] = [f.to_dict() for f in self.findings]
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)


def analyze(
    paths: Sequence[str | os.PathLike] | Corpus,
    tokenizers: Iterable = (),
    *,
    pretokenizers: Iterable[str] | None = None,
    corpus_options: CorpusOptions | None = None,
    detail_docs: int | None = 200,
    keep_docs: int = KEEP_DOCS,
    batch_size: int = 4096,
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
        precision.check(options)
    n_workers = (
        1 if precise else parallel.choose_workers(workers, paths, toks, options.on_warning or warn)
    )
    # the one Corpus of the run, handed down (workers rebuild it from its paths and sizes)
    corpus = paths if isinstance(paths, Corpus) else Corpus(list(paths), options)
    if on_corpus is not None:
        on_corpus(corpus)
    switch = None
    if precise:
        accs, summary = precision.run(corpus, options, toks, state, batch_size, progress)
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
    return build_report(accs, state, summary, toks, settings)


def build_report(accs, state: PassState, summary: dict, toks, settings: dict) -> Report:
    """The Report of measured accumulators (one per tokenizer of `toks`, same order) and the
    pass's bookkeeping: analyze's end, and fertility.engine's merge of its tasks' counts."""
    summary["docs_table_full"] = state.docs_table_full
    lang_names = {i: name for name, i in state.langs.items()}
    return Report(
        frame=build_frame(accs, state.langs),
        docs=docs_frame(state),
        corpus=summary,
        tokenizers=[_describe(t) for t in toks],
        samples={
            (a.tok.label, U.SCRIPTS[s]): _in_order(v) for a in accs for s, v in a.samples.items()
        },
        byte_fallback_chars={
            (a.tok.label, U.SCRIPTS[s]): dict(c.most_common(10))
            for a in accs
            for s, c in a.byte_fallback_chars.items()
        },
        unk_chars={
            (a.tok.label, U.SCRIPTS[s]): dict(c.most_common(10))
            for a in accs
            for s, c in a.unk_chars.items()
        },
        normalization={
            a.tok.label: {**a.normalization, "examples": _in_order(a.normalization["examples"])}
            for a in accs
            if a.tok.kind != PRETOKENIZER
        },
        roundtrip={
            (a.tok.label, lang_names[k]): {**v, "examples": _in_order(v["examples"])}
            for a in accs
            for k, v in a.roundtrip.items()
        },
        overlap={
            a.tok.label: card.overlap(
                {lang: a.vocab_lang[i] for lang, i in state.langs.items() if i in a.vocab_lang}
            )
            for a in accs
            if a.track_vocab
        },
        running_langs=running_by_language(accs, lang_names),
        settings=settings,
    )


def _ahead_of_the_end(toks) -> None:
    """What the end needs and the measuring does not, done beside the first batches where it
    overlaps the tokenizer instead of following the last batch: pandas for the frame, and
    each tokenizer's fingerprint (an HF one serialises the whole vocabulary)."""
    try:
        importlib.import_module("pandas")
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


def _in_order(items: list[dict]) -> list[dict]:
    """Items tagged with their corpus position, in corpus order, without the tag."""
    return [
        {k: v for k, v in x.items() if k != "order"}
        for x in sorted(items, key=lambda x: x["order"])
    ]


def _describe(tok) -> TokenizerInfo:
    return TokenizerInfo(
        label=tok.label,
        spec=tok.spec,
        kind=tok.kind,
        vocab_size=int(tok.vocab_size or 0) or None,
        fingerprint=tok.fingerprint,
        config=tok.config(),
        tokenizer=tok,
    )


__all__ = ["analyze", "Report", "TokenizerInfo", "PretokenizerFamily", "COUNTS", "NS", "SCHEMA"]
