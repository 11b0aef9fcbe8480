"""The gate: a policy applied to a Report's measurements, a verdict and an exit code.

Statistics rule. Every numeric check compares an interval with its threshold:
    the interval lies wholly on the right side   -> "pass"
    the interval lies wholly on the wrong side   -> "fail"
    the interval straddles the threshold         -> "uncertain" (need more text)
Intervals: chars per token from the table (`chars_per_token_lo/hi`, delta method over
documents); byte-fallback and UNK rates a 95% Wilson interval on token counts, the table's
`<rate>_lo/_hi` (tokens are treated as independent, which narrows it when errors cluster in a
few documents); the premium and the baseline comparison a bootstrap over aligned lines /
shared documents.
An uncertain check fails the gate unless the policy says `uncertain = "pass"`. A script with
too little text (in fewer than `min_documents` documents, or fewer than `min_chars`
characters) is uncertain; one whose running text is under `min_share` of every language's
characters (and of the corpus's) is skipped: fragments, reported, not judged.
Findings whose severity is in `fail_on` fail the gate too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from fertility import unicode as U
from fertility.errors import TokenizerError
from fertility.findings import Finding, diagnose_under, not_judged, premiums
from fertility.findings.evidence import rate_interval
from fertility.measure import Report, analyze, card, parity
from fertility.numbers import finite, fmt
from fertility.options import DETAIL_DOCS, CorpusOptions, Severity, Uncertain
from fertility.policy import Policy, load_policy
from fertility.progress import Progress
from fertility.tokenizers.pretokenizer import PRETOKENIZER

if TYPE_CHECKING:  # the JSON records (fertility/schemas/), for mypy only
    from fertility.corpus import Corpus
    from fertility.schemas import gate as gate_json
    from fertility.schemas import verdicts as verdicts_json

NEED_MORE = "uncertain: need more text"


@dataclass
class Check:
    name: str  # chars_per_token | byte_fallback_rate | unk_rate | roundtrip |
    #                        premium | vs_baseline | corpus
    tokenizer: str
    group: str
    key: str
    value: float | None
    lo: float | None
    hi: float | None
    threshold: float | None
    direction: str  # ">=": value must reach the threshold; "<=": must stay under it
    verdict: str  # "pass" | "fail" | "uncertain"
    note: str = ""

    def to_dict(self) -> verdicts_json.Check:
        return cast("verdicts_json.Check", asdict(self))  # its fields (tests/test_schemas.py)

    def describe(self) -> str:
        val = fmt(self.value, "{:.3g}", "n/a")
        iv = "" if self.lo is None else f" [{self.lo:.3g}, {self.hi:.3g}]"
        thr = "" if self.threshold is None else f" {self.direction} {self.threshold:g}"
        return f"{self.name} {self.group}={self.key}: {val}{iv}{thr}"


@dataclass(frozen=True)
class PolicySummary:
    """The policy a GateResult applied: the keys its verdict and renderers read, typed, and
    the gate JSON's `policy` object (`to_dict`, Policy.to_dict() as it was applied)."""

    source: str = "?"
    uncertain: Uncertain = "fail"
    fail_on: tuple[Severity, ...] = ()
    table: dict = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, policy: PolicySummary | Policy) -> PolicySummary:
        """`policy` itself, or the summary of a Policy (its to_dict() as the table)."""
        if isinstance(policy, PolicySummary):
            return policy
        if not isinstance(policy, Policy):
            raise TypeError(f"a Policy or a PolicySummary, not {type(policy).__name__}")
        return cls(policy.source, policy.uncertain, policy.fail_on, policy.to_dict())

    def to_dict(self) -> gate_json.PolicyTable:
        return cast("gate_json.PolicyTable", self.table)  # Policy.to_dict()


@dataclass
class GateResult:
    checks: list[Check]
    findings: list[Finding]  # all findings of the gated tokenizers
    policy: PolicySummary  # a Policy is taken too
    skipped: list[gate_json.Skipped] = field(default_factory=list)  # rows too small to matter
    # why some or all languages have no premium, one line ("" when none is missing)
    premium_note: str = ""
    # what was read when not the whole corpus (--sample, --max-docs, --precision): the
    # corpus summary's subset (statement, method, documents read and seen); None: all of it
    subset: gate_json.GateSubset | None = None

    def __post_init__(self) -> None:
        self.policy = PolicySummary.of(self.policy)

    @property
    def passed(self) -> bool:
        """The rule, declared here only: no failing check and no blocking finding."""
        return not self.failing and not self.blocking

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def blocking(self) -> list[Finding]:
        return [f for f in self.findings if f.severity in self.policy.fail_on]

    @property
    def uncertain(self) -> list[Check]:
        return [c for c in self.checks if c.verdict == "uncertain"]

    @property
    def failing(self) -> list[Check]:
        """The checks that fail it: each "fail", and each "uncertain" under uncertain = "fail"."""
        unsure = self.policy.uncertain == "fail"
        return [
            c for c in self.checks if c.verdict == "fail" or (unsure and c.verdict == "uncertain")
        ]

    def only(self, label: str) -> GateResult:
        """The result of one gated tokenizer: its checks, findings and skipped rows; what
        `evaluate(report, policy, label=label)` gives, without measuring the premiums and the
        rules again for each tokenizer."""
        return replace(
            self,
            checks=[c for c in self.checks if c.tokenizer == label],
            findings=[f for f in self.findings if f.tokenizer == label],
            skipped=[s for s in self.skipped if s["tokenizer"] == label],
        )

    def to_dict(self) -> gate_json.Gate:
        return {
            "schema": "fertility.gate/1",
            "passed": self.passed,
            "exit_code": self.exit_code,
            "checks": [c.to_dict() for c in self.checks],
            "blocking_findings": [f.to_dict() for f in self.blocking],
            "findings": [f.to_dict() for f in self.findings],
            "skipped": self.skipped,
            "premium_note": self.premium_note or None,
            "subset": self.subset,
            "policy": self.policy.to_dict(),
        }


# ---------------------------------------------------------------- evaluation


def verdict(lo: float, hi: float, threshold: float, direction: str) -> str:
    if direction == ">=":
        return "pass" if lo >= threshold else "fail" if hi < threshold else "uncertain"
    return "pass" if hi <= threshold else "fail" if lo > threshold else "uncertain"


def _check(name, row, value, lo, hi, threshold, direction, note="") -> Check:
    value, lo, hi = finite(value), finite(lo), finite(hi)
    lo = value if lo is None else lo
    hi = value if hi is None else hi
    return Check(
        name=name,
        tokenizer=str(row["tokenizer"]),
        group=str(row["group"]),
        key=str(row["key"]),
        value=value,
        lo=lo,
        hi=hi,
        threshold=float(threshold),
        direction=direction,
        verdict="uncertain" if value is None else verdict(lo, hi, threshold, direction),
        note=note,
    )


def _labels(report: Any) -> list[str]:
    return [d.label for d in report.tokenizers if d.kind != PRETOKENIZER]


def _has_unk(report: Any, label: str) -> bool:
    """False only when the tokenizer is known to have no unknown token."""
    for d in report.tokenizers:
        if d.label == label and d.tokenizer is not None:
            return getattr(d.tokenizer, "unk_id", None) is not None
    return True


def evaluate(
    report: Any,
    policy: Policy,
    *,
    label: str | None = None,
    baseline_label: str | None = None,
    findings: list | None = None,
) -> GateResult:
    """Apply `policy` to the measurements in `report`. Reads its table only; no I/O.

    findings: `diagnose(report, ...)` for every tokenizer when the caller already has them
    (fertility fix reports them all), so the rules run once."""
    known = _labels(report)
    for name in (label, baseline_label):
        if name is not None and name not in known:
            raise TokenizerError(
                f"no tokenizer labelled {name!r} in the report (have: {', '.join(known) or 'none'})"
            )
    gated = [label] if label else [x for x in known if x != baseline_label]
    if not gated:
        raise TokenizerError(
            "nothing to gate: the report holds no tokenizer besides the "
            "baseline and pre-tokenizer families"
        )
    table = report.table
    # One premium table (a bootstrap per language) for the parity rule and the premium check.
    prem = premiums(report, policy.thresholds, reference=policy.reference, parallel=policy.parallel)
    if findings is None:
        findings = diagnose_under(report, policy, prem)
    findings = [f for f in findings if f.tokenizer in gated]
    checks: list[Check] = []
    skipped: list[gate_json.Skipped] = []
    small = not_judged(report, policy.min_share, policy.min_chars, policy.min_documents)
    for lab in gated:
        rows = [r for r in table if r["tokenizer"] == lab and r["group"] in ("script", "language")]
        running = {r["key"]: r for r in table if r["tokenizer"] == lab and r["group"] == "running"}
        before = len(checks)
        for r in rows:
            if r["group"] == "script":  # judged on its running text, or not at all
                r = _running_row(r, running, small, policy, baseline_label, skipped)
                if r is None:
                    continue
            checks.extend(_row_checks(report, r, policy, baseline_label))
        if policy.premium is not None:
            for p in prem.of(lab):
                row = {"tokenizer": lab, "group": "language", "key": p["lang"]}
                checks.append(
                    _check(
                        "premium",
                        row,
                        p["premium"],
                        p["lo"],
                        p["hi"],
                        policy.premium,
                        "<=",
                        f"vs {p['reference']}, {p['lines']} aligned lines",
                    )
                )
        for r in rows:
            if r["group"] == "language" and int(r["roundtrip_checked"]) > 0:
                checks.append(_roundtrip_check(r, policy))
        if len(checks) == before:
            checks.append(
                Check(
                    name="corpus",
                    tokenizer=lab,
                    group="all",
                    key="*",
                    value=None,
                    lo=None,
                    hi=None,
                    threshold=None,
                    direction=">=",
                    verdict="uncertain",
                    note="no script had enough text to check",
                )
            )
    return GateResult(
        checks,
        findings,
        PolicySummary.of(policy),
        skipped,
        premium_note=prem.note,
        subset=read_subset(getattr(report, "corpus", None) or {}),
    )


def verdicts(report: Report, policy: Policy) -> dict[str, dict]:
    """label -> the report JSON's `verdict` of each tokenizer with a card
    (fertility.measure.card.carded), evaluated alone: passed, exit code, the checks that
    fail it and the blocking findings. A judgement, so the judging side computes it and
    sets `report.verdicts`; the Report only carries it into its JSON."""
    out: dict[str, dict] = {}
    carded = card.carded(report)
    if not carded:
        return out
    # one evaluation of every tokenizer (a premium bootstrap and the rules once), then each
    # tokenizer's share of it: with 12 tokenizers, evaluating each alone cost 12 of each
    everyone = evaluate(report, policy, findings=report.findings)
    for info in carded:
        result = everyone.only(info.label)
        out[info.label] = {
            "passed": result.passed,
            "exit_code": result.exit_code,
            "failed_checks": [c.to_dict() for c in result.failing],
            "blocking_findings": [f.to_dict() for f in result.blocking],
        }
    return out


def read_subset(corpus: dict) -> gate_json.GateSubset | None:
    """What a gate read of its corpus when not all of it (--sample, --max-docs,
    --precision), from the corpus summary; None when it read every document. `more`: the
    option that reads more (what an uncertain check needs rather than new documents)."""
    # the summary's `precision` is --precision's statement object (fertility.measure.precision)
    given = corpus.get("precision")
    prec: dict = given if isinstance(given, dict) else {}
    options = {k: corpus.get(k) for k in ("sample", "max_docs")}
    options["precision"] = prec.get("target") if prec else corpus.get("precision")
    if all(v is None for v in options.values()):
        return None
    subset = corpus.get("subset") or {}
    read, seen = corpus.get("documents"), corpus.get("documents_seen")
    if options["precision"] is not None:
        more = (
            None
            if prec.get("exhausted")
            else f"a smaller --precision than {options['precision']:g} reads more blocks"
        )
    else:
        drop = " and ".join(f"--{k.replace('_', '-')}" for k, v in options.items() if v)
        more = f"drop {drop} to read every document" if read != seen or options["sample"] else None
    return cast(  # mypy types no TypedDict with the options spread in
        "gate_json.GateSubset",
        {
            "method": subset.get("method"),
            "statement": subset.get("statement") or f"read {read:,} of {seen:,} documents seen",
            "documents": read,
            "documents_seen": seen,
            **{k: v for k, v in options.items() if v is not None},
            "more": more,
        },
    )


def _running_row(
    r: dict,
    running: dict[str, dict],
    small: dict[tuple[str, str], gate_json.NotJudged],
    policy: Policy,
    baseline: str | None,
    skipped: list[gate_json.Skipped],
) -> dict | None:
    """The script row `r` as the gate judges it: the counts and metrics of its running text
    (the table's "running" row of the script, `running`: key -> row, labelled as the
    script); None, with the reason in `skipped`, when that running text is under the
    policy's min_share of every language's characters and of the corpus's (`small`:
    fertility.findings.not_judged; fragments: reported, not judged) or the script has no
    check."""
    label, key = str(r["tokenizer"]), str(r["key"])
    if not _wanted(r, policy, baseline):
        return None
    why = small.get((label, key))
    if why is not None or key not in running:
        why = why or {
            "running_share": 0.0,
            "share": 0.0,
            "language": None,
            "language_share": 0.0,
            "reason": "no running text: fragments, reported, not judged",
        }
        skipped.append({"tokenizer": label, "group": "script", "key": key, **why})
        return None
    return {**running[key], "tokenizer": label, "group": "script", "key": key}


def _wanted(r: dict, policy: Policy, baseline: str | None = None) -> bool:
    """Whether a row has any check under `policy`."""
    group, key = r["group"], r["key"]
    return policy.floor_for(group, key) is not None or (
        group == "script"
        and key not in policy.thresholds.exempt_scripts
        and (
            policy.byte_fallback_rate is not None
            or policy.unk_rate is not None
            or baseline is not None
        )
    )


def _row_checks(
    report: Any,
    r: dict,
    policy: Policy,
    baseline: str | None,
) -> Iterable[Check]:
    group, key = r["group"], r["key"]
    floor = policy.floor_for(group, key)
    exempt = policy.thresholds.exempt_scripts
    if not _wanted(r, policy, baseline):
        return []
    docs = int(r["documents"])  # documents holding the script's running text (or language's)
    note = ""
    if docs < policy.min_documents or r["chars"] < policy.min_chars:
        note = (
            f"{NEED_MORE}: {docs} documents / {int(r['chars'])} characters, policy wants "
            f"{policy.min_documents} / {policy.min_chars}"
        )
    out = []
    unk = None
    if policy.unk_rate is not None and _has_unk(report, r["tokenizer"]):
        lo, hi = rate_interval(r, "unk_rate", float(r["unk_tokens"]), float(r["tokens"]))
        unk = _check("unk_rate", r, r["unk_rate"], lo, hi, policy.unk_rate, "<=")
    if floor is not None:
        cpt = _check(
            "chars_per_token",
            r,
            r["chars_per_token"],
            r["chars_per_token_lo"],
            r["chars_per_token_hi"],
            floor,
            ">=",
        )
        # Text that became UNK is not compressed, it is gone: a row over the UNK ceiling
        # cannot pass on characters per token, however long its tokens look.
        if unk is not None and unk.verdict != "pass" and cpt.verdict == "pass":
            cpt.verdict = "fail" if unk.verdict == "fail" else "uncertain"
            cpt.note = (
                f"UNK rate {unk.value:.3g} [{unk.lo:.3g}, {unk.hi:.3g}] is over the "
                f"ceiling {policy.unk_rate:g}: characters lost to UNK are not "
                "compressed"
            )
        out.append(cpt)
    if group == "script" and key not in exempt:
        if policy.byte_fallback_rate is not None:
            lo, hi = rate_interval(
                r, "byte_fallback_rate", float(r["byte_fallback_tokens"]), float(r["tokens"])
            )
            out.append(
                _check(
                    "byte_fallback_rate",
                    r,
                    r["byte_fallback_rate"],
                    lo,
                    hi,
                    policy.byte_fallback_rate,
                    "<=",
                )
            )
        if unk is not None:  # None too for a tokenizer with no unknown token (byte-level
            out.append(unk)  # BPE): its rate is 0 by construction
        if baseline:
            out.extend(_baseline_check(report, r, baseline, policy))
    if note:
        for c in out:  # too little text: no verdict but "uncertain", whatever the numbers say
            c.verdict, c.note = "uncertain", note
    return out


def _roundtrip_check(r: dict, policy: Policy) -> Check:
    """decode(encode(text)) == text on every checked document of the language. One changed
    document is a fact, not an estimate, so no interval decides it: it fails unless the
    policy accepts a lossy tokenizer on purpose (`allow_lossy = true`)."""
    k, n = int(r["roundtrip_failures"]), int(r["roundtrip_checked"])
    lo, hi = rate_interval(r, "roundtrip_failure_rate", k, n)
    verdict = "pass" if k == 0 or policy.allow_lossy else "fail"
    note = f"{k} of {n} documents checked change"
    if k and policy.allow_lossy:
        note += "; allowed by the policy (allow_lossy = true)"
    elif k:
        note += "; see the roundtrip finding for which code points and why"
    return Check(
        name="roundtrip",
        tokenizer=str(r["tokenizer"]),
        group="language",
        key=str(r["key"]),
        value=k / n,
        lo=lo,
        hi=hi,
        threshold=0.0,
        direction="<=",
        verdict=verdict,
        note=note,
    )


def _baseline_check(report: Any, r: dict, baseline: str, policy: Policy) -> list[Check]:
    """Candidate chars per token / baseline's, on the documents written mainly in the script."""
    base = [
        b
        for b in report.table
        if b["tokenizer"] == baseline and b["group"] == "running" and b["key"] == r["key"]
    ]
    if not base:
        return []
    b = base[0]
    threshold = 1.0 - policy.baseline_margin
    note = f"vs {baseline}: {b['chars_per_token']:.3f} chars per token"
    # the per-document table holds every tokenizer's tokens for the same documents
    docs = report.doc_columns
    tokens = docs["tokens"] if docs is not None else {}
    if r["tokenizer"] in tokens and baseline in tokens:
        mine = np.asarray(docs["script"]) == U.SCRIPT_INDEX[str(r["key"])]
        num, den = tokens[baseline][mine], tokens[r["tokenizer"]][mine]
        if len(num):
            rng = np.random.default_rng(policy.thresholds.seed)
            lo, hi = parity.bootstrap_ratio(num, den, policy.thresholds.bootstrap, rng)
            return [_check("vs_baseline", r, num.sum() / den.sum(), lo, hi, threshold, ">=", note)]
    # No document of the script in the per-document table (it keeps the first `keep_docs`):
    # a conservative interval from the two rows' intervals.
    value = r["chars_per_token"] / b["chars_per_token"]
    lo = r["chars_per_token_lo"] / b["chars_per_token_hi"]
    hi = r["chars_per_token_hi"] / b["chars_per_token_lo"]
    return [_check("vs_baseline", r, value, lo, hi, threshold, ">=", note)]


def gate_run(
    paths,
    tokenizer,
    *,
    policy: Policy | str | Path | None = None,
    baseline=None,
    corpus_options: CorpusOptions | None = None,
    detail_docs: int | None = DETAIL_DOCS,
    seed: int = 0,
    workers: int | None = None,
    quiet: bool = True,
    on_corpus: Callable[[Corpus], None] | None = None,
) -> tuple[Report, GateResult]:
    """Measure `tokenizer` (and `baseline`) on the corpus at `paths` and evaluate the policy:
    the measured Report and its GateResult (`fertility gate` prints both).

    `tokenizer` / `baseline`: a Tokenizer object or a spec string ("[LABEL=]SPEC").
    `policy`: a Policy, a policy file path, or None (working directory's config, else default).
    `on_corpus`: called with the one Corpus measured (analyze's), so a caller that reads the
    corpus again (pretrain's tokenizing) reads that one instead of resolving the paths again.
    """
    pol = policy if isinstance(policy, Policy) else load_policy(policy)
    toks = [
        str(t) if isinstance(t, Path) else t
        for t in [tokenizer] + ([baseline] if baseline is not None else [])
    ]
    if isinstance(paths, (str, Path)):
        paths = [paths]
    # the size of the Corpus analyze makes is the total (on_corpus): a percentage and an ETA
    # (on a terminal, not quiet)
    progress = Progress("measuring", quiet=quiet)
    report = analyze(
        list(paths),
        toks,
        corpus_options=corpus_options,
        detail_docs=detail_docs,
        seed=seed,
        progress=progress,
        workers=workers,
        on_corpus=progress.sized_by if on_corpus is None else _both(progress.sized_by, on_corpus),
    )
    progress.done()
    labels = [d.label for d in report.tokenizers]  # analyze refuses a shared label
    return report, evaluate(
        report, pol, label=labels[0], baseline_label=labels[1] if baseline is not None else None
    )


def gate_corpus(
    paths,
    tokenizer,
    *,
    policy: Policy | str | Path | None = None,
    baseline=None,
    corpus_options: CorpusOptions | None = None,
    quiet: bool = True,
    on_corpus: Callable[[Corpus], None] | None = None,
) -> GateResult:
    """gate_run's verdict alone (the trainer's gate before pretraining)."""
    return gate_run(
        paths,
        tokenizer,
        policy=policy,
        baseline=baseline,
        corpus_options=corpus_options,
        quiet=quiet,
        on_corpus=on_corpus,
    )[1]


def _both(first: Callable[[Corpus], None], then: Callable[[Corpus], None]) -> Callable:
    """analyze's one on_corpus: the progress line's total, then the caller's."""

    def call(corpus: Corpus) -> None:
        first(corpus)
        then(corpus)

    return call
