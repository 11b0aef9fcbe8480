"""`fertility extend`: add a script to an existing tokenizer, every base id kept.

The run, in order (docs/EXTEND.md has every field of what it writes):
1. load the base (any spec `fertility` loads): a byte-level BPE (`fertility.extend.bpe`) or a
   SentencePiece BPE/Unigram model (`fertility.extend.sentencepiece`); other kinds are refused
   with one line;
2. widen a byte-level BPE's split where it cuts combining marks (`fertility.extend.pattern`);
3. hold out documents per language exactly as `fertility fix` does (`fertility.corpus.sampling`:
   runs of --heldout-block lines; training documents that share a near-duplicate with a
   held-out one are dropped), writing them to ``DIR/heldout/<lang>.jsonl``;
4. pick the target languages: ``langs``, else every language the gate fails on the base
   (measured on the held-out documents);
5. learn ``add`` new tokens on the target languages' training text (base merges first, then new
   merges over the base tokens), ids from the first id after the base's;
6. write ``tokenizer.json`` (and, for a rank-file base, ``tokenizer.tiktoken`` and
   ``tokenizer.pattern.txt``) or, for SentencePiece, ``tokenizer.model``; ``ids-map.json``;
7. measure base and extended side by side on the held-out documents, gate the extended one,
   check that every held-out document of the other languages keeps its base ids, and write
   ``extend-report.json`` (schema "fertility.extend/1").
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypedDict

from fertility.corpus import Corpus, CorpusOptions, sampling
from fertility.errors import ExtendError
from fertility.extend import report as rep
from fertility.extend import sentencepiece as sp
from fertility.extend.bpe import from_tokenizer, hf_json, learn, rank_file, tekken_json
from fertility.extend.pattern import widen_letters
from fertility.files import report_json
from fertility.gate import evaluate
from fertility.options import HELDOUT_BLOCK
from fertility.outputs import Inputs, claim_folder, remove, write_inside
from fertility.progress import Stages, reading
from fertility.tokenizers import load_tokenizer, load_tokenizer_arg
from fertility.tokenizers.kinds import extension

if TYPE_CHECKING:  # extend-report.json's records (fertility/schemas/extend.py), for mypy only
    from fertility.gate import GateResult
    from fertility.measure import Report
    from fertility.schemas import extend as extend_json
    from fertility.schemas.fix import Split

SCHEMA: Final = "fertility.extend/1"
# What extend writes into --out (fertility.outputs lists them in the folder's manifest first).
OUTPUTS = (
    "tokenizer.json",
    "tokenizer.model",
    "tekken.json",
    "tokenizer.tiktoken",
    "tokenizer.pattern.txt",
    "ids-map.json",
    "extend-report.json",
    "heldout/",
)
BASE, EXTENDED = "base", "extended"


class _Learned(TypedDict):
    """What a learner (_byte_level, _sentencepiece) made, for ids-map.json and the report."""

    first_new_id: int
    special_tokens: dict[str, Any]
    spelling: dict[int, list[int]]
    base: extend_json.BaseParts
    tokenizer: extend_json.TokenizerParts
    files: extend_json.LearnedPaths


@dataclass
class ExtendResult:
    paths: extend_json.ExtendPaths  # ids_map, extend_report, heldout, tokenizer, ...
    base: extend_json.ExtendBase  # spec, kind, vocab_size, fingerprint, ...
    tokenizer: extend_json.ExtendTokenizer  # kind, vocab_size, fingerprint, first_new_id, ...
    pattern: extend_json.Pattern  # base, extended, changed
    langs: list[str]  # target languages
    langs_from: str  # "--langs" | "gate"
    scripts: list[str]  # their scripts (ISO 15924)
    rows: list[extend_json.ExtendRow]  # per (group, key): base/extended on held-out text
    unchanged: dict[str, extend_json.Unchanged]  # per other language: documents, same_ids
    gate: GateResult  # of the extended tokenizer
    split: Split
    timings: extend_json.ExtendTimings
    report: Report = field(repr=False)

    @property
    def passed(self) -> bool:
        return bool(self.gate.passed)

    def to_dict(self) -> extend_json.Extend:
        return {
            "schema": SCHEMA,
            "base": self.base,
            "tokenizer": self.tokenizer,
            "pattern": self.pattern,
            "langs": self.langs,
            "langs_from": self.langs_from,
            "scripts": self.scripts,
            "paths": self.paths,
            "split": self.split,
            "rows": self.rows,
            "unchanged": self.unchanged,
            "gate": self.gate.to_dict(),
            "timings": self.timings,
            "measurement": self.report.to_dict(),
        }


def extend(
    base_spec: str,
    corpus_paths: Sequence[str | os.PathLike] | str,
    out_dir,
    add: int,
    *,
    langs: Sequence[str] | None = None,
    policy=None,
    corpus_options: CorpusOptions | None = None,
    heldout_fraction: float = 0.1,
    heldout_max_docs: int | None = 1000,
    heldout_block: int = HELDOUT_BLOCK,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    allow_output_in_corpus: bool = False,
) -> ExtendResult:
    """Extend `base_spec` ("[LABEL=]SPEC") by `add` tokens learned on `corpus_paths`.
    `out_dir` must be new, empty or an earlier extend's (fertility.outputs), never the base
    tokenizer's folder, and outside the corpus unless `allow_output_in_corpus`.
    The stages: the base and its widened split (_load_base), the claim of `out_dir`
    (_claim), the held-out split (_hold_out), the languages to extend for (_targets),
    learning (_learn, then _ids_map), base and extended measured side by side and gated
    (_measure), and extend-report.json (_write)."""
    say = progress or (lambda msg: None)
    if isinstance(add, bool) or not isinstance(add, int) or add < 1:
        raise ExtendError(f"--add {add!r}: must be a whole number >= 1")
    t0 = time.perf_counter()
    base, bpe, regex = _load_base(base_spec)
    out = _claim(out_dir, corpus_paths, base_spec, policy, allow_output_in_corpus)
    corpus = Corpus(corpus_paths, corpus_options)
    stages = progress if isinstance(progress, Stages) else None
    held = _hold_out(
        corpus, out, heldout_fraction, heldout_max_docs, heldout_block, seed, say, stages
    )
    say("extend: measuring the base on the held-out documents")
    pol = rep.load(policy)
    first = rep.measure(held.files, [base], pol, seed)
    targets = _targets(first, langs, held.scan.names, base, pol)
    scripts = rep.scripts_of(first, BASE, targets)
    say(f"extend: learning {add:,} tokens for {', '.join(targets)} ({', '.join(scripts)})")
    t1 = time.perf_counter()
    made = _learn(held, corpus, base, bpe, regex, targets, add, scripts, out, stages)
    learn_s = time.perf_counter() - t1
    paths: extend_json.ExtendPaths = {
        "ids_map": str(out / "ids-map.json"),
        "extend_report": str(out / "extend-report.json"),
        "heldout": str(out / "heldout"),
        **made["files"],
    }
    ext = _ids_map(out, paths, made, base)
    say("extend: measuring base and extended on the held-out documents")
    t2 = time.perf_counter()
    report, gate, unchanged = _measure(held, base, ext, pol, targets, seed)
    timings: extend_json.ExtendTimings = {
        "scan_s": t1 - t0,
        "learn_s": learn_s,
        "measure_s": time.perf_counter() - t2,
        "total_s": time.perf_counter() - t0,
    }
    result = ExtendResult(
        paths=paths,
        base=_base_entry(base, made),
        tokenizer=_extended_entry(ext, made, add),
        pattern={
            "base": bpe and bpe.regex,
            "extended": regex,
            "changed": bpe is not None and regex != bpe.regex,
        },
        langs=targets,
        langs_from="--langs" if langs else "gate",
        scripts=scripts,
        rows=rep.rows(report, BASE, EXTENDED),
        unchanged=unchanged,
        gate=gate,
        split=held.split,
        timings=timings,
        report=report,
    )
    write_inside(out, "extend-report.json", report_json(result.to_dict()), ExtendError)
    return result


def _load_base(base_spec: str) -> tuple[Any, Any, str | None]:
    """The base tokenizer; for a byte-level BPE its vocabulary and merges (`bpe`) and its
    split widened where it cuts combining marks (`regex`); None for both with SentencePiece,
    which has no split regex to widen: it never cuts a word at its vowel signs."""
    base = load_tokenizer_arg(base_spec, label=BASE)
    how = extension(base)  # what the base's kind declares (fertility.tokenizers.kinds)
    bpe = None if how is not None and how.method == "sp_model" else from_tokenizer(base)
    regex = widen_letters(bpe.regex) if bpe is not None else None
    return base, bpe, regex


def _claim(out_dir, corpus_paths, base_spec: str, policy, allow_in_corpus: bool) -> Path:
    """The output folder, claimed for extend (fertility.outputs.claim_folder)."""
    named = [corpus_paths] if isinstance(corpus_paths, (str, os.PathLike)) else corpus_paths
    inputs = Inputs.of(
        corpus=named,
        tokenizers=[base_spec],
        files=[policy if isinstance(policy, (str, os.PathLike)) else None],
    )
    return claim_folder(
        out_dir,
        "extend",
        OUTPUTS,
        inputs,
        allow_in_corpus=allow_in_corpus,
        error=ExtendError,
    )


def _ids_map(out: Path, paths: extend_json.ExtendPaths, made: _Learned, base: Any) -> Any:
    """The extended tokenizer loaded from OUT, and ids-map.json written beside it."""
    ext = load_tokenizer(paths["tokenizer"], label=EXTENDED)
    ids_map = rep.ids_map(made["first_new_id"], made["special_tokens"], made["spelling"], base, ext)
    write_inside(
        out, "ids-map.json", json.dumps(ids_map, ensure_ascii=False, indent=1) + "\n", ExtendError
    )
    return ext


def _base_entry(base: Any, made: _Learned) -> extend_json.ExtendBase:
    """extend-report.json's `base`."""
    return {
        "spec": base.spec,
        "kind": base.kind,
        "vocab_size": int(base.vocab_size),
        "fingerprint": base.fingerprint,
        **made["base"],
        "special_tokens": made["special_tokens"],
    }


def _extended_entry(ext: Any, made: _Learned, add: int) -> extend_json.ExtendTokenizer:
    """extend-report.json's `tokenizer`: the extended one."""
    return {
        "kind": ext.kind,
        "vocab_size": int(ext.vocab_size),
        "fingerprint": ext.fingerprint,
        "first_new_id": made["first_new_id"],
        "requested": add,
        "added": len(made["spelling"]),
        **made["tokenizer"],
    }


@dataclass
class _HeldOut:
    """The corpus read once and split: its scan, the split's masks, the held-out files
    written into OUT/heldout, the documents and the split's description."""

    scan: Any
    parts: Any
    files: list
    docs: list
    split: Split


def _hold_out(
    corpus: Corpus,
    out: Path,
    fraction: float,
    max_docs: int | None,
    block: int,
    seed: int,
    say: Callable[[str], None],
    stages: Stages | None,
) -> _HeldOut:
    """Read the corpus once, hold documents out per language and write them to OUT/heldout."""
    say("extend: reading the corpus")
    # the CLI's Stages: this pass and learning get lines of their own below the stage lines
    pass_line = stages.corpus("extend: reading", corpus) if stages else None
    scan = sampling.scan_corpus(corpus, False, inspect=reading(pass_line) if pass_line else None)
    if pass_line:
        pass_line.done()
    temps: list[Path] = []
    writer = sampling.HeldoutWriter(out / "heldout", scan.names, temps)
    try:
        parts = sampling.split_corpus(scan, fraction, seed, max_docs, block, writer)
        if not parts.held.any():
            raise ExtendError(
                f"{', '.join(corpus.paths)}: no language has two documents, so none "
                "can be held out to measure the extended tokenizer on"
            )
        files = writer.commit()
    finally:
        writer.close()
        for tmp in temps:
            if tmp.exists():
                tmp.unlink()
    docs = scan.docs if scan.docs is not None else list(scan.documents())
    split = sampling.describe_split(scan, parts, fraction, max_docs, seed)
    return _HeldOut(scan, parts, files, docs, split)


def _targets(
    first: Any, langs: Sequence[str] | None, names: list[str], base: Any, pol: Any
) -> list[str]:
    """The languages to learn for: --langs, else those the base fails the gate on."""
    targets = list(dict.fromkeys(langs)) if langs else rep.failing_langs(first, BASE, pol)
    unknown = [x for x in targets if x not in names]
    if unknown:
        raise ExtendError(
            f"--langs: no documents labelled {', '.join(unknown)} in the corpus "
            f"(have: {', '.join(names)})"
        )
    if not targets:
        raise ExtendError(
            f"{base.spec}: passes the gate on every language of the corpus; "
            "name the languages to extend for with --langs"
        )
    return targets


def _learn(
    held: _HeldOut,
    corpus: Corpus,
    base: Any,
    bpe: Any,
    regex: str | None,
    targets: list[str],
    add: int,
    scripts: list[str],
    out: Path,
    stages: Stages | None,
) -> _Learned:
    """The new tokens, learned on the target languages' training documents, written to OUT."""
    want = {held.scan.names.index(x) for x in targets}
    train = [
        base.normalize(d.text)
        for d, t, g in zip(held.docs, held.parts.train.tolist(), held.scan.groups.tolist())
        if t and g in want
    ]
    if not train:
        raise ExtendError(
            f"{', '.join(corpus.paths)}: no training documents in {', '.join(targets)}"
        )
    # the trainers take no callback: the time so far only, and why there is no percentage
    why = "no percentage: the trainer reports no progress"
    with (stages or Stages(quiet=True)).waiting("extend: learning", why).begin():
        if bpe is None or regex is None:  # SentencePiece: no split regex to widen
            return _sentencepiece(base, train, add, scripts, out)
        return _byte_level(bpe, regex, base, train, add, scripts, out)


def _measure(
    held: _HeldOut, base: Any, ext: Any, pol: Any, targets: list[str], seed: int
) -> tuple[Any, Any, Any]:
    """(report, the gate's result on the extended tokenizer, the other languages' held-out
    documents encoded the same by both)."""
    report = rep.measure(held.files, [base, ext], pol, seed)
    gate = evaluate(report, pol, label=EXTENDED, findings=report.findings)
    others = [
        (d.text, d.lang)
        for d, h in zip(held.docs, held.parts.held.tolist())
        if h and d.lang not in targets
    ]
    return report, gate, rep.same_ids(base, ext, others)


def _byte_level(
    bpe, regex: str, base, train: list[str], add: int, scripts: list[str], out: Path
) -> _Learned:
    """Learn and write a byte-level BPE extension (fertility.extend.bpe)."""
    # deferred: the Rust tokenizers library only when used
    from tokenizers import Tokenizer

    counts = rep.target_pieces(train, regex, scripts)
    if not counts:
        raise ExtendError(f"no training text in {', '.join(scripts)} to learn from")
    patched = Tokenizer.from_str(json.dumps(hf_json(bpe, regex, {}, [])))
    pieces = list(counts)
    base_ids = {
        p: e.ids for p, e in zip(pieces, patched.encode_batch(pieces, add_special_tokens=False))
    }
    learned = learn(bpe, base_ids, counts, add)
    files: extend_json.LearnedPaths = {"tokenizer": str(out / "tokenizer.json")}
    obj = hf_json(bpe, regex, learned.new, learned.merges)
    write_inside(out, "tokenizer.json", json.dumps(obj, ensure_ascii=False) + "\n", ExtendError)
    remove(out, "tokenizer.model", ExtendError)  # an earlier run's: not this tokenizer
    how = extension(base)  # the base's own format is written too
    also = how.also_writes if how is not None else None
    if also == "tekken.json":
        files["tekken"] = str(out / "tekken.json")
        write_inside(
            out,
            "tekken.json",
            json.dumps(tekken_json(base.path, bpe, learned.new), ensure_ascii=False) + "\n",
            ExtendError,
        )
    if also == "tokenizer.tiktoken":
        files["tiktoken"] = str(out / "tokenizer.tiktoken")
        files["pattern"] = str(out / "tokenizer.pattern.txt")
        write_inside(out, "tokenizer.tiktoken", rank_file(bpe, learned.new), ExtendError)
        write_inside(out, "tokenizer.pattern.txt", regex + "\n", ExtendError)
    return {
        "first_new_id": bpe.end,
        "special_tokens": bpe.specials,
        "spelling": learned.spelling,
        "base": {"bpe_tokens": len(bpe.tokens), "merges": len(bpe.merges)},
        "tokenizer": {
            "merges_added": len(obj["model"]["merges"]) - len(bpe.merges),
            "learned_from_pieces": learned.pieces,
        },
        "files": files,
    }


def _sentencepiece(base, train: list[str], add: int, scripts: list[str], out: Path) -> _Learned:
    """Learn and write a SentencePiece extension (fertility.extend.sentencepiece)."""

    learned = sp.learn(base, train, add, scripts)
    final = write_inside(out, "tokenizer.model", learned.model, ExtendError)
    # an earlier run's: a folder spec would load it first
    remove(out, "tokenizer.json", ExtendError)
    return {
        "first_new_id": int(base.vocab_size),
        "special_tokens": dict(base.special_tokens),
        "spelling": learned.spelling,
        "base": {"model": base.config()["model"]},
        "tokenizer": {"learned_from_pieces": learned.pieces},
        "files": {"tokenizer": str(final)},
    }
