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

import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

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
from fertility.fix.train import BYTES, train
from fertility.gate import evaluate
from fertility.measure.metrics import BEFORE_AFTER
from fertility.options import HELDOUT_BLOCK
from fertility.outputs import Inputs, claim_folder, remove, write_inside
from fertility.policy import Policy, load_policy
from fertility.progress import Stages
from fertility.tokenizers import load_tokenizer, load_tokenizer_arg
from fertility.tokenizers.patterns import resolve_pattern

SCHEMA = "fertility.fix/1"
DEFAULT_SPECIALS = ("<|endoftext|>",)
UNK = "<unk>"
BEFORE, AFTER = "before", "after"  # tokenizer labels in the held-out measurement
# A language whose held-out chars/token falls by more than this share against --from is a
# warning: the temperature gave its share of the training text (and so of the vocabulary) to
# other languages. 5%: beyond the width of a held-out interval (about +-2% at 1000
# documents), and what a model pays in context and compute on that language.
WORSE_SHARE = 0.05
# What fix writes into --out (fertility.outputs lists them in the folder's manifest first).
OUTPUTS = (
    "tokenizer.json",
    "tokenizer.model",
    "fix-report.json",
    "report.html",
    "heldout/",
    ".unfinished",
)


@dataclass
class FixResult:
    paths: dict[str, str]  # tokenizer, model (.model), fix_report, report_html, heldout
    rows: list[dict]  # per (group, key): before/after metrics on held-out text
    gate: Any  # fertility.gate.GateResult of the new tokenizer
    special_tokens: list[dict]  # token, old_id, new_id, kept
    changes: dict  # what differs from --from: {field: [old, new]}
    tokenizer: dict  # kind, vocab_size, fingerprint of the new tokenizer
    settings: dict
    split: dict
    sampling: dict
    corpus: dict
    timings: dict
    report: Any = field(repr=False)  # the held-out measurement (fertility.measure.Report)
    normalizer_preview: dict | None = None  # what --nfc/--nfkc changes in the training text
    roundtrip: dict = field(default_factory=dict)  # per language: failures and their cause
    tradeoffs: list = field(default_factory=list)  # languages worse than --from (WORSE_SHARE)

    @property
    def passed(self) -> bool:
        return bool(self.gate.passed)

    def to_dict(self) -> dict:
        """The content of fix-report.json (schema "fertility.fix/1")."""
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "tokenizer": self.tokenizer,
            "paths": self.paths,
            "corpus": self.corpus,
            "split": self.split,
            "sampling": self.sampling,
            "special_tokens": self.special_tokens,
            "changes": self.changes,
            "rows": self.rows,
            "normalizer_preview": self.normalizer_preview,
            "roundtrip": self.roundtrip,
            "tradeoffs": {"worse_share": WORSE_SHARE, "languages": self.tradeoffs},
            "gate": self.gate.to_dict(),
            "timings": self.timings,
            "measurement": self.report.to_dict(),
        }


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
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
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
    out = out_dir

    corpus = Corpus(corpus_paths, corpus_options)
    say("fix: reading the corpus")
    # the CLI's Stages: this pass and training get percentage lines below the stage lines
    stages = progress if isinstance(progress, Stages) else None
    norm = normalize.normalizer(config)
    log = norm and normalize.ChangeLog(norm, normalize.FORMS[config.normalization])
    inspect = log.add if log else None
    pass_line = stages.corpus("fix: reading", corpus.paths, corpus_options) if stages else None
    scan = _sampling.scan_corpus(
        corpus,
        want_bytes=config.trainer.byte_documents,
        inspect=_progress.reading(pass_line, inspect) if pass_line else inspect,
    )
    if pass_line:
        pass_line.done()
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
        timings = {"scan_s": time.perf_counter() - t0}
        say(
            f"fix: {split['train_documents']:,} training / {split['heldout_documents']:,} "
            f"held-out documents ({split['dropped_near_duplicates']:,} dropped from training "
            f"as near-duplicates of held-out ones); sampling {sampling['sampled_chars']:,} "
            f"characters at temperature {config.temperature:g}"
        )
        for line in preview_lines(preview):
            say(f"fix: {line}")
        docs = scan.documents()
        scan.docs = None  # the stream holds the only reference: freed as training ends
        stream = _sampling.training_stream(docs, plan.copies)
        say(f"fix: training {config.model} ({config.backend}), vocabulary {config.vocab_size:,}")
        t1 = time.perf_counter()
        threading.Thread(target=_warm_up, daemon=True).start()
        # Our lines, not the library's bars (two self-overwriting lines garble each other):
        # the share of the sampled text fed to the trainer, then its own work, which has no
        # callback to count
        why = "no percentage: the trainer reports no progress"
        waiting = (stages or Stages(quiet=True)).waiting("fix: training", why)
        if stages:
            feeding = stages.meter("fix: feeding the trainer", sampling["sampled_chars"], "chars")
            stream = _progress.fed(feeding, stream, waiting)
        with waiting:
            trained = train(
                config,
                pattern_regex,
                specials,
                unk,
                stream,
                out,
                temps,
                max_doc_bytes=scan.max_bytes,
                show_progress=stages is None and progress is not None and sys.stderr.isatty(),
            )
        timings["train_s"] = time.perf_counter() - t1
        timings["trainer_s"] = trained.trainer_s
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

    say("fix: measuring old and new on the held-out documents")
    t2 = time.perf_counter()
    new, report, gate = _measure(config, old, trained.path, heldout_files, policy)
    say(f"fix: gate {'PASS' if gate.passed else 'FAIL'} on the held-out documents")
    roundtrip = _roundtrip_rows(report, heldout_changes)
    paths = {
        "tokenizer": str(trained.path),
        "fix_report": str(out / "fix-report.json"),
        "report_html": str(out / "report.html"),
        "heldout": str(out / "heldout"),
    }
    if trained.is_model:
        paths["model"] = str(trained.path)
    # deferred: plotly only when HTML is written
    from fertility.report.html import render_html

    write_inside(out, "report.html", render_html(report, report.findings, gate), FixError)
    timings["measure_s"] = time.perf_counter() - t2
    timings["total_s"] = time.perf_counter() - t0
    rows = _rows(report, old is not None)
    result = FixResult(
        paths=paths,
        rows=rows,
        gate=gate,
        special_tokens=_special_ids(specials, new, unk),
        changes=_changes(old, new),
        tokenizer={
            "kind": new.kind,
            "vocab_size": int(new.vocab_size),
            "requested_vocab_size": config.vocab_size,
            "fingerprint": new.fingerprint,
        },
        settings={
            **asdict(config),
            "special_tokens": [t for t, _ in specials],
            **_split_settings(config, pattern_name, pattern_regex),
            "byte_fallback": True,
            "from": from_tokenizer,
            "corpus": list(corpus.paths),
        },
        split=split,
        sampling=sampling,
        corpus=corpus.summary(),
        timings=timings,
        report=report,
        normalizer_preview=preview,
        roundtrip=roundtrip,
        tradeoffs=tradeoffs(rows, sampling),
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


def _special_ids(planned: list[tuple[str, int | None]], new, unk: str | None) -> list[dict]:
    have = dict(new.special_tokens)
    if unk is not None and new.unk_id is not None:
        have.setdefault(unk, int(new.unk_id))  # SentencePiece lists its UNK apart
    return [
        {"token": t, "old_id": i, "new_id": have.get(t), "kept": i is not None and have.get(t) == i}
        for t, i in planned
    ]


def _rows(report, has_before: bool) -> list[dict]:
    """Per (group, key) of the new tokenizer: its BEFORE_AFTER columns, the old one's, and
    the ratio."""

    def metrics(r: dict) -> dict:
        return {c: r[c] for c in BEFORE_AFTER if c in r}

    before = {
        (r["group"], r["key"]): metrics(r) for r in (report.rows(BEFORE) if has_before else [])
    }
    out = []
    for r in report.rows(AFTER):
        a, b = metrics(r), before.get((r["group"], r["key"]))
        ratio = (
            a["chars_per_token"] / b["chars_per_token"]
            if b and b["chars_per_token"] and a["chars_per_token"] is not None
            else None
        )
        out.append(
            {
                "group": r["group"],
                "key": r["key"],
                BEFORE: b,
                AFTER: a,
                "chars_per_token_ratio": ratio,
            }
        )
    return out


def tradeoffs(rows: list[dict], sampling: dict) -> list[dict]:
    """The languages whose held-out chars/token fell by more than WORSE_SHARE against --from,
    with their share of the training text now, at temperature 1 (the corpus's) and at 0 (all
    the same), and whether raising the temperature gives them more: d p_g / dT has the sign
    of ln n_g - sum_h p_h ln n_h, so a language larger than the mix's (geometric) average
    gains from a higher temperature and a smaller one from a lower."""
    langs = sampling["languages"]
    have = {k: v for k, v in langs.items() if v["corpus_share"] > 0}
    mean_log = sum(v["share"] * math.log(v["corpus_share"]) for v in have.values())
    out = []
    for row in rows:
        ratio, lang = row["chars_per_token_ratio"], row["key"]
        if row["group"] != "language" or ratio is None or ratio >= 1 - WORSE_SHARE:
            continue
        s = langs.get(lang)
        if not s or lang not in have:
            continue
        out.append(
            {
                "lang": lang,
                "before": row[BEFORE]["chars_per_token"],
                "after": row[AFTER]["chars_per_token"],
                "ratio": ratio,
                "share": s["share"],
                "share_at_1": s["corpus_share"],
                "share_at_0": 1 / len(have),
                "raise_gives_more": math.log(s["corpus_share"]) > mean_log,
            }
        )
    return out


def _changes(old, new) -> dict:
    if old is None:
        return {}
    a, b = old.config() or {}, new.config() or {}
    out: dict[str, list[Any]] = {"vocab_size": [int(old.vocab_size), int(new.vocab_size)]}
    if old.kind != new.kind:
        out["kind"] = [old.kind, new.kind]
    for key in ("model", "normalizer", "pattern", "pattern_regex", "byte_level", "byte_fallback"):
        if a.get(key) != b.get(key):
            out[key] = [a.get(key), b.get(key)]
    return out


def _roundtrip_rows(report, heldout_changes: dict) -> dict:
    """Per held-out language: documents checked, round-trip failures, and how many of the
    documents (and what in them) the normaliser changes: with byte fallback nothing else in
    the new tokenizer loses text, so those are the failures' cause."""
    out = {}
    for r in report.rows(AFTER):
        if r["group"] != "language":
            continue
        seen = heldout_changes.get(r["key"]) or {}
        out[r["key"]] = {
            "checked": int(r["roundtrip_checked"] or 0),
            "failures": int(r["roundtrip_failures"] or 0),
            "normalizer_changed": int(seen.get("changed_documents", 0)),
            "changes": list(seen.get("changes", []))[:5],
        }
    return out


def preview_lines(preview: dict | None, top: int = 5) -> list[str]:
    """What the asked-for normaliser changes (the run's progress and fix_text print it)."""
    if not preview:
        return []
    name = preview["normalizer"]
    head = (
        f"normaliser {name} (asked for) changes {preview['changed_documents']:,} of "
        f"{preview['documents']:,} training documents before training"
        + (":" if preview["changes"] else "; decode(encode(x)) is x for the others")
    )
    rows = preview["changes"][:top]
    more = preview["distinct_changes"] - len(rows)
    return (
        [head]
        + [f"  {normalize.describe(c, name)}" for c in rows]
        + ([f"  and {more} more (fix-report.json normalizer_preview)"] if more > 0 else [])
    )
