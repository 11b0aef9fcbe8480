"""`fertility fix`: train a corrected vocabulary and prove it on held-out text.

What the trained tokenizer has:
- the mark-aware split (`fertility.tokenizers.patterns` "mark_aware"): combining marks, ZWJ and ZWNJ stay
  inside words; digits in groups of 1-3 and whitespace as o200k splits them. (The SentencePiece
  backend cannot take a regex: it splits on whitespace and script changes, and SentencePiece
  counts combining marks with the letter before them, so words are not cut at vowel signs.)
- no normaliser by default, so decode(encode(doc)) == doc for every document: NFC, the usual
  "safe" choice, rewrites real text (Bengali U+09DF য় in হয় "is", U+09DC, U+09DD become
  letter + nukta; U+09C7 U+09BE becomes U+09CB). NFC or NFKC only when asked, and then the
  report first says what the normaliser changes in the user's text, per code point
  (`fertility.fix.normalize`), and names it as the cause of every held-out round-trip failure;
- byte fallback, so no text becomes UNK: byte-level BPE (the 256 ByteLevel symbols are the
  initial alphabet); Unigram with the 256 ``<0xNN>`` pieces and ``byte_fallback``; SentencePiece
  with ``byte_fallback=True``. Every held-out document gets the round-trip check (not only the
  200 per language `fertility report` checks), and the gate counts its failures.

The run, in order (all I/O at the two ends):
1. read the corpus, noting each document's language, length, line and file (a corpus of
   up to 256 M characters is also kept in memory for steps 2-3; a bigger one is read again
   in each) and, with --nfc or --nfkc, what the normaliser changes in it;
2. split documents into training and held-out parts (`fertility.corpus.sampling`: per language 10%,
   at most 1000 documents, in runs of 100 consecutive lines, seeded, chosen by line number so
   parallel files keep the same held-out lines), write the held-out ones to
   ``DIR/heldout/<lang>.jsonl`` (fields text, lang, source, line; `fertility report
   DIR/heldout --lang-field lang -t ...` measures them again), drop from training every
   document that shares a near-duplicate with a held-out one (`fertility.corpus.neardup`),
   and plan the temperature sampling (p_lang ∝ chars_lang ** 0.3);
3. stream the training documents to the trainer (repeated as the plan says);
4. write the tokenizer (a temporary name in DIR, then ``os.replace``: an interrupted run leaves
   no half-written tokenizer, and no earlier run's report beside a new tokenizer);
5. measure the old (``--from``) and the new tokenizer on the held-out files only, with the same
   metrics and intervals as `fertility report`; run the gate on the new one; name every
   language the new tokenizer serves more than WORSE_SHARE worse than ``--from``, with the
   temperature that trades it (`tradeoffs`); write ``fix-report.json`` (schema
   "fertility.fix/1") and ``report.html``.

Special tokens: without ``--from`` the new vocabulary gets ``<|endoftext|>`` (what `fertility
pretrain` uses to separate documents). With ``--from`` it gets that tokenizer's special tokens,
each at its old id when the id is inside the new vocabulary (Hugging Face backends: the ids
are permuted after training, which BPE merges and Unigram scores do not depend on;
SentencePiece: they are added first, in old-id order, so ids 0..k-1 are kept). The report
lists every special token with its old and new id.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import fertility.findings  # noqa: F401
import fertility.gate  # noqa: F401
import fertility.measure  # noqa: F401
import fertility.tokenizers  # noqa: F401
from fertility import progress as _progress
from fertility.corpus import Corpus, CorpusOptions
from fertility.corpus import sampling as _sampling
from fertility.errors import FixError
from fertility.files import (
    locked_folder,
    mark_finished,
    mark_unfinished,
    report_json,
)
from fertility.findings import diagnose_under
from fertility.fix import normalize
from fertility.fix.config import FixConfig
from fertility.fix.result import (
    AFTER,
    BEFORE,
    FixResult,
    changed_fields,
    heldout_rows,
    preview_lines,
    roundtrip_rows,
    special_ids,
    tradeoffs,
)
from fertility.fix.train import BYTES, train
from fertility.gate import evaluate
from fertility.options import HELDOUT_BLOCK
from fertility.outputs import Inputs, claim_folder, remove, write_inside
from fertility.policy import Policy, load_policy
from fertility.progress import Stages
from fertility.tokenizers import load_tokenizer, load_tokenizer_arg
from fertility.tokenizers.patterns import resolve_pattern

if TYPE_CHECKING:  # fix-report.json's records (fertility/schemas/fix.py), for mypy only
    from fertility.schemas import fix as fix_json
    from fertility.schemas.corpus import CorpusSummary

DEFAULT_SPECIALS = ("<|endoftext|>",)
UNK = "<unk>"
# What fix writes into --out (fertility.outputs lists them in the folder's manifest first).
OUTPUTS = (
    "tokenizer.json",
    "tokenizer.model",
    "fix-report.json",
    "report.html",
    "heldout/",
    ".unfinished",
)


# ---------------------------------------------------------------- the run


def fix(
    corpus_paths: Sequence[str | os.PathLike] | str | os.PathLike,
    out_dir: str | os.PathLike,
    config: FixConfig,
    *,
    from_tokenizer: str | None = None,
    corpus_options: CorpusOptions | None = None,
    policy=None,
    progress: Callable[[str], None] | None = None,
    allow_output_in_corpus: bool = False,
) -> FixResult:
    """Train the corrected vocabulary on `corpus_paths`, measure and gate it, write `out_dir`.

    from_tokenizer: "[LABEL=]SPEC" of the tokenizer being replaced (its special tokens are kept;
    it is measured beside the new one). policy: a Policy, a policy file or None (as `fertility
    gate`). progress: called with one-line status messages (the CLI prints them on stderr).
    One run at a time writes `out_dir` (a second one is refused: FixError); a killed run's
    temporary files there are removed by the next one. `out_dir` must be new, empty or an
    earlier fix's (fertility.outputs: nothing fix did not write is replaced or deleted), and
    outside the corpus unless `allow_output_in_corpus`.
    """
    config.validate()
    named = [corpus_paths] if isinstance(corpus_paths, (str, os.PathLike)) else corpus_paths
    inputs = Inputs.of(
        corpus=named,
        tokenizers=[from_tokenizer],
        files=[policy if isinstance(policy, (str, os.PathLike)) else None],
    )
    out = claim_folder(
        out_dir,
        "fix",
        OUTPUTS,
        inputs,
        allow_in_corpus=allow_output_in_corpus,
        error=FixError,
    )
    with locked_folder(out, FixError, "`fertility fix`", subfolders=["heldout"]):
        return _fix(
            corpus_paths,
            out,
            config,
            from_tokenizer=from_tokenizer,
            corpus_options=corpus_options,
            policy=policy,
            progress=progress,
        )


def _no_timings() -> fix_json.FixTimings:
    return {"scan_s": None, "train_s": None, "trainer_s": None, "measure_s": None, "total_s": None}


@dataclass
class _Run:
    """One run's settings, output folder, progress and timings, handed from stage to stage."""

    config: FixConfig
    out: Path
    progress: Callable[[str], None] | None  # one-line status messages (the CLI's Stages)
    t0: float = field(default_factory=time.perf_counter)
    # each stage sets its own, in this order (fix-report.json's)
    timings: fix_json.FixTimings = field(default_factory=_no_timings)

    def say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    @property
    def stages(self) -> Stages | None:
        """The CLI's Stages: the corpus pass and training get percentage lines below the
        stage lines."""
        return self.progress if isinstance(self.progress, Stages) else None


@dataclass
class _Inputs:
    """The run's inputs other than the corpus, resolved before it is read: the split pattern,
    the tokenizer being replaced (--from) and the special tokens the new vocabulary gets."""

    pattern_name: str
    pattern_regex: str
    old: Any  # the --from tokenizer, or None
    specials: list[tuple[str, int | None]]
    unk: str | None


@dataclass
class _Made:
    """What reading, splitting and training made: the tokenizer in OUT, the held-out files,
    the split and sampling descriptions and what the normaliser changes."""

    trained: Any  # fertility.fix.train's Trained, committed
    heldout_files: list[str]
    split: fix_json.Split
    sampling: fix_json.Sampling
    preview: dict | None
    heldout_changes: dict


def _fix(
    corpus_paths,
    out_dir: Path,
    config: FixConfig,
    *,
    from_tokenizer,
    corpus_options,
    policy,
    progress,
) -> FixResult:
    """The run's stages in order: resolve the inputs, read the corpus, split and train (all
    of OUT but the report), measure and gate on the held-out documents, write the report."""
    run = _Run(config, out_dir, progress)
    inputs = _resolve(config, from_tokenizer)
    corpus = Corpus(corpus_paths, corpus_options)
    made = _split_and_train(corpus, _read(corpus, run), run, inputs)
    run.say("fix: measuring old and new on the held-out documents")
    t2 = time.perf_counter()
    new, report, gate = _measure(config, inputs.old, made.trained.path, made.heldout_files, policy)
    run.say(f"fix: gate {'PASS' if gate.passed else 'FAIL'} on the held-out documents")
    return _write(corpus, run, inputs, made, new, report, gate, from_tokenizer, t2)


def _resolve(config: FixConfig, from_tokenizer: str | None) -> _Inputs:
    """The split pattern, --from loaded, and the special tokens planned (UNK where the model
    needs one); a vocabulary too small for them is refused before the corpus is read."""
    pattern_name, pattern_regex = resolve_pattern(config.pattern)
    old = _load_from(from_tokenizer)
    specials = _plan_specials(old, config)
    unk = None
    if config.model == "unigram" or config.trainer.needs_unk:
        unk = _old_unk(old) or UNK
        if unk not in dict(specials):
            specials.append((unk, None))
    if config.vocab_size < BYTES + len(specials):
        raise FixError(
            f"--vocab-size {config.vocab_size}: smaller than the base alphabet "
            f"({BYTES} bytes) plus {len(specials)} special tokens "
            f"= {BYTES + len(specials)}"
        )
    return _Inputs(pattern_name, pattern_regex, old, specials, unk)


def _read(corpus: Corpus, run: _Run) -> tuple[_sampling.Scan, normalize.ChangeLog | None]:
    """Step 1: the corpus read once, and with --nfc or --nfkc what the normaliser changes."""
    run.say("fix: reading the corpus")
    stages = run.stages
    norm = normalize.normalizer(run.config)
    log = normalize.ChangeLog(norm, normalize.FORMS[run.config.normalization]) if norm else None
    inspect = log.add if log else None
    pass_line = stages.corpus("fix: reading", corpus) if stages else None
    scan = _sampling.scan_corpus(
        corpus,
        want_bytes=run.config.trainer.byte_documents,
        inspect=_progress.reading(pass_line, inspect) if pass_line else inspect,
    )
    if pass_line:
        pass_line.done()
    return scan, log


def _split_and_train(
    corpus: Corpus, read: tuple[_sampling.Scan, normalize.ChangeLog | None], run: _Run, inputs
) -> _Made:
    """Steps 2-4: split, write the held-out files, train, and put the tokenizer in place.
    The held-out files and the tokenizer are written under temporary names, renamed only
    once training is done; whatever fails, none of them is left behind."""
    scan, log = read
    config, out = run.config, run.out
    temps: list[Path] = []
    writer = _sampling.HeldoutWriter(out / "heldout", scan.names, temps)
    try:
        parts, plan = _sampling.split_and_plan(scan, config, writer)
        held = parts.held
        if not held.any():
            raise FixError(
                f"{', '.join(corpus.paths)}: no language has two documents, so none "
                "can be held out to measure the new tokenizer on"
            )
        split, sampling = _sampling.describe_plan(scan, parts, plan, config)
        preview = log.summary(parts.train) if log else None
        heldout_changes = (
            {name: log.summary(held & (scan.groups == g)) for g, name in enumerate(scan.names)}
            if log
            else {}
        )
        run.timings["scan_s"] = time.perf_counter() - run.t0
        run.say(
            f"fix: {split['train_documents']:,} training / {split['heldout_documents']:,} "
            f"held-out documents ({split['dropped_near_duplicates']:,} dropped from training "
            f"as near-duplicates of held-out ones); sampling {sampling['sampled_chars']:,} "
            f"characters at temperature {config.temperature:g}"
        )
        for line in preview_lines(preview):
            run.say(f"fix: {line}")
        trained = _train(scan, plan, sampling["sampled_chars"], run, inputs, temps)
        mark_unfinished(out)  # from here until fix-report.json, readers refuse the folder
        heldout_files = writer.commit()
        trained.commit()
        for stale in ("fix-report.json", "report.html"):
            remove(out, stale, FixError)  # an earlier run's: they describe another tokenizer
    finally:
        writer.close()
        for tmp in temps:
            if tmp.exists():
                tmp.unlink()
    return _Made(trained, heldout_files, split, sampling, preview, heldout_changes)


def _train(scan, plan, sampled_chars: int, run: _Run, inputs: _Inputs, temps: list[Path]):
    """Step 3: stream the training documents (repeated as the plan says) to the trainer."""
    config, stages = run.config, run.stages
    docs = scan.documents()
    scan.docs = None  # the stream holds the only reference: freed as training ends
    stream = _sampling.training_stream(docs, plan.copies)
    run.say(f"fix: training {config.model} ({config.backend}), vocabulary {config.vocab_size:,}")
    t1 = time.perf_counter()
    threading.Thread(target=_warm_up, daemon=True).start()
    # Our lines, not the library's bars (two self-overwriting lines garble each other):
    # the share of the sampled text fed to the trainer, then its own work, which has no
    # callback to count
    why = "no percentage: the trainer reports no progress"
    waiting = (stages or Stages(quiet=True)).waiting("fix: training", why)
    if stages:
        feeding = stages.meter("fix: feeding the trainer", sampled_chars, "chars")
        stream = _progress.fed(feeding, stream, waiting)
    with waiting:
        trained = train(
            config,
            inputs.pattern_regex,
            inputs.specials,
            inputs.unk,
            stream,
            run.out,
            temps,
            max_doc_bytes=scan.max_bytes,
            show_progress=stages is None and run.progress is not None and sys.stderr.isatty(),
        )
    run.timings["train_s"] = time.perf_counter() - t1
    run.timings["trainer_s"] = trained.trainer_s
    return trained


def _write(
    corpus: Corpus, run: _Run, inputs: _Inputs, made: _Made, new, report, gate, spec, t2: float
) -> FixResult:
    """Step 5's end: report.html, then fix-report.json, which marks the folder finished."""
    out, config = run.out, run.config
    paths: fix_json.FixPaths = {
        "tokenizer": str(made.trained.path),
        "fix_report": str(out / "fix-report.json"),
        "report_html": str(out / "report.html"),
        "heldout": str(out / "heldout"),
    }
    if made.trained.is_model:
        paths["model"] = str(made.trained.path)
    # deferred: plotly only when HTML is written
    from fertility.report.html import render_html

    write_inside(out, "report.html", render_html(report, report.findings, gate), FixError)
    run.timings["measure_s"] = time.perf_counter() - t2
    run.timings["total_s"] = time.perf_counter() - run.t0
    held_rows = heldout_rows(report, inputs.old is not None)
    result = FixResult(
        paths=paths,
        rows=held_rows,
        gate=gate,
        special_tokens=special_ids(inputs.specials, new, inputs.unk),
        changes=changed_fields(inputs.old, new),
        tokenizer={
            "kind": new.kind,
            "vocab_size": int(new.vocab_size),
            "requested_vocab_size": config.vocab_size,
            "fingerprint": new.fingerprint,
        },
        # asdict gives FixConfig's fields as an untyped dict
        settings=cast(
            "fix_json.FixSettings",
            {
                **asdict(config),
                "special_tokens": [t for t, _ in inputs.specials],
                **_split_settings(config, inputs.pattern_name, inputs.pattern_regex),
                "byte_fallback": True,
                "from": spec,
                "corpus": list(corpus.paths),
            },
        ),
        split=made.split,
        sampling=made.sampling,
        # Corpus.summary() builds the corpus object from its pass's counters, untyped
        corpus=cast("CorpusSummary", corpus.summary()),
        timings=run.timings,
        report=report,
        normalizer_preview=made.preview,
        roundtrip=roundtrip_rows(report, made.heldout_changes),
        tradeoffs=tradeoffs(held_rows, made.sampling),
    )
    write_inside(out, "fix-report.json", report_json(result.to_dict()), FixError)
    mark_finished(out)
    return result


def _split_settings(config: FixConfig, name: str, regex: str) -> dict:
    """The split the new vocabulary was trained with: SentencePiece takes no regex (it splits on
    whitespace and script changes), so its runs record none rather than an unused one."""
    if not config.trainer.split_regex:
        return {"pattern": None, "pattern_regex": None}
    return {"pattern": name, "pattern_regex": regex}


def _warm_up() -> None:
    """Import what measuring needs (pandas, plotly, ...) while the trainer, which releases the
    GIL, keeps the cores busy: about a second less after training."""
    # deferred: plotly only when HTML is written
    import fertility.report.html  # noqa: F401


def heldout_documents(
    corpus_paths,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    corpus_options: CorpusOptions | None = None,
    heldout_max_docs: int | None = 1000,
    heldout_block: int = HELDOUT_BLOCK,
) -> list[tuple[str, int]]:
    """(source, line) of every document `fix` holds out with these settings.

    So a baseline can be trained on the training part only, as the walkthrough does
    (`split_documents` also names the training documents fix drops as near-duplicates).
    """
    return split_documents(
        corpus_paths, heldout_fraction, seed, corpus_options, heldout_max_docs, heldout_block
    )["heldout"]


def split_documents(
    corpus_paths,
    heldout_fraction: float = 0.1,
    seed: int = 0,
    corpus_options: CorpusOptions | None = None,
    heldout_max_docs: int | None = 1000,
    heldout_block: int = HELDOUT_BLOCK,
) -> dict[str, list[tuple[str, int]]]:
    """{"heldout": ..., "dropped": ...}: (source, line) of the documents `fix` holds out, and
    of the training documents it drops because they share a near-duplicate with one of them."""
    scan = _sampling.scan_corpus(Corpus(corpus_paths, corpus_options), False, keep_chars=0)
    parts = _sampling.split_corpus(scan, heldout_fraction, seed, heldout_max_docs, heldout_block)
    return {
        name: [(scan.sources[f], int(ln)) for f, ln in zip(scan.files[m], scan.lines[m])]
        for name, m in (("heldout", parts.held), ("dropped", parts.dropped))
    }


def _load_from(spec: str | None):
    if spec is None:
        return None

    return load_tokenizer_arg(spec, label=BEFORE)


def _plan_specials(old, config: FixConfig) -> list[tuple[str, int | None]]:
    """(token, old id or None) in the order they are added to the new vocabulary."""
    known = dict(old.special_tokens) if old is not None else {}
    unk = _old_unk(old)
    if unk is not None:
        known.setdefault(unk, int(old.unk_id))
    if config.special_tokens is not None:
        return [(t, known.get(t)) for t in dict.fromkeys(config.special_tokens)]
    if old is None:
        return [(t, None) for t in DEFAULT_SPECIALS]
    return sorted(known.items(), key=lambda kv: kv[1])


def _old_unk(old) -> str | None:
    if old is None or old.unk_id is None:
        return None
    unk = (old.config() or {}).get("unk_token")
    return unk if isinstance(unk, str) and unk else None


# ---------------------------------------------------------------- measure, report


def _measure(config: FixConfig, old, path: Path, heldout_files: list[str], policy):
    """Old and new side by side on the held-out files; the gate on the new one."""
    # deferred: looked up when called, so a test can replace it
    from fertility.measure import analyze

    new = load_tokenizer(str(path), label=AFTER)
    heldout = Corpus(heldout_files, lang_field="lang", on_warning=lambda m: None)
    # `fertility report`'s defaults, except that every held-out document gets the per-document
    # checks (the round trip among them): fix holds out at most --heldout-max per language.
    report = analyze(
        heldout,
        [t for t in (old, new) if t is not None],
        pretokenizers=[],
        seed=config.seed,
        detail_docs=None,
    )
    pol = policy if isinstance(policy, Policy) else load_policy(policy)
    report.findings = diagnose_under(report, pol)
    gate = evaluate(report, pol, label=AFTER, findings=report.findings)
    return new, report, gate
