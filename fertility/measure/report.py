"""The Report: what one measurement of a corpus holds (the tidy frame, the per-document
table, the cards' inputs, the samples) and its JSON, `fertility report --format json`
(fertility.report/1). build_report makes it from measured accumulators: the end of analyze
(fertility/measure/run.py) and of fertility.engine's merge of its tasks' counts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, cast

from fertility import unicode as U
from fertility.files import json_safe
from fertility.measure import card
from fertility.measure.counters import Weighted
from fertility.measure.frame import (
    build_table,
    doc_columns,
    docs_frame,
    running_by_language,
    to_frame,
)
from fertility.measure.passes import PassState
from fertility.tokenizers.pretokenizer import PRETOKENIZER

if TYPE_CHECKING:  # Report.frame and .docs are built with pandas when asked for
    import pandas as pd

    from fertility.policy import Policy
    from fertility.schemas import report as report_json  # the JSON's records, for mypy only
    from fertility.schemas.corpus import MeasuredCorpus
    from fertility.schemas.verdicts import Finding, Verdict

SCHEMA: Final = "fertility.report/1"


def _no_settings() -> report_json.MeasureSettings:
    """A Report built by hand (tests) has no measuring settings: `{}`, which no measurement
    writes (analyze and fertility.engine give every key), hence the cast."""
    return cast("report_json.MeasureSettings", {})


@dataclass
class TokenizerInfo:
    """One measured tokenizer (or pre-tokenizer family) of a Report: what the JSON says of it
    (`to_dict`), its split/normaliser configuration and the loaded tokenizer itself."""

    label: str
    spec: str
    kind: str
    vocab_size: int | None = None
    fingerprint: str = ""
    config: dict | None = None
    tokenizer: Any = None

    def to_dict(self) -> report_json.TokenizerHead:
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
    # the measurement: a row per (tokenizer, group, key) as a dict of plain values
    # (frame.build_table; `frame` is the same as a DataFrame, made when first asked for)
    table: list[dict]
    # the per-document table's columns (frame.doc_columns; None: no document kept), `docs`
    # as a DataFrame when first asked for (parity's premiums, a baseline's check)
    doc_columns: dict | None
    corpus: MeasuredCorpus
    tokenizers: list[TokenizerInfo]
    samples: dict = field(default_factory=dict)
    byte_fallback_chars: dict = field(default_factory=dict)
    unk_chars: dict = field(default_factory=dict)
    normalization: dict = field(default_factory=dict)
    roundtrip: dict = field(
        default_factory=dict
    )  # {(label, lang): fertility.measure.roundtrip changes}
    settings: report_json.MeasureSettings = field(default_factory=_no_settings)
    # the rules' findings (fertility.findings.diagnose_under) once run, [] when none fired;
    # None: not diagnosed (--no-diagnose), so whoever judges the report runs the rules
    findings: list | None = None
    # label -> {language: its token-id histogram}: what `overlap` is worked out from
    language_histograms: dict = field(default_factory=dict, repr=False, compare=False)
    # (label, script) -> {language: characters of its running text in that language}: what a
    # script is judged by (fertility.measure.frame.language_shares)
    running_langs: dict = field(default_factory=dict)
    # the policy whose reference, declared parallel files and parity thresholds the JSON's
    # Gini reads its premiums under (None: the built-in ones); the report command sets it
    policy: Policy | None = None
    # label -> the JSON's per-tokenizer verdict: a judgement, so the judging side sets it
    # (fertility.gate.verdicts; the report command and fertility.analyze); none when empty
    verdicts: dict = field(default_factory=dict)
    # (reference, families, parity settings) -> its parity.premium_table: the card, the gate
    # and the rules read one table, its bootstraps run once
    premium_cache: dict = field(default_factory=dict, repr=False, compare=False)

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The measurement table as one tidy DataFrame (frame.to_frame)."""
        return to_frame(self.table)

    @cached_property
    def overlap(self) -> dict:
        """label -> the pairwise overlap of its languages' token distributions (card.overlap),
        worked out when first read: the JSON's card and the HTML page read it, a table or a
        gate does not."""
        return {label: card.overlap(h) for label, h in self.language_histograms.items()}

    @cached_property
    def docs(self) -> pd.DataFrame:
        """One row per (tokenizer, kept document): frame.DOC_COLUMNS."""
        return docs_frame(self.doc_columns)

    def rows(self, label: str) -> list[dict]:
        """The JSON's rows of one tokenizer: its table rows without tokenizer and kind."""
        return [
            json_safe({k: v for k, v in r.items() if k not in ("tokenizer", "kind")})
            for r in self.table
            if r["tokenizer"] == label
        ]

    def to_dict(self) -> report_json.Report:
        # json_safe walks the cards' numpy numbers into plain ones and so returns Any: the
        # cards are card.cards' literals (vocabulary_scripts, gini, overlap), a Card each
        cards = cast("dict[str, report_json.Card]", json_safe(card.cards(self, self.policy)))
        verdicts: dict[str, Verdict] = json_safe(self.verdicts)

        def tokenizer(t: TokenizerInfo) -> report_json.TokenizerReport:
            # its card (card.carded: every measured tokenizer is loaded, so has one), then
            # the gate's verdict when one was set
            judged: report_json.Judged = (
                {"verdict": verdicts[t.label]} if t.label in verdicts else {}
            )
            return {**t.to_dict(), **cards[t.label], **judged, "rows": self.rows(t.label)}

        def pretokenizer(t: TokenizerInfo) -> report_json.PretokenizerReport:
            return {**t.to_dict(), "rows": self.rows(t.label)}

        out: report_json.Report = {
            "schema": SCHEMA,
            "corpus": self.corpus,
            "settings": self.settings,
            "tokenizers": [tokenizer(t) for t in self.tokenizers if t.kind != PRETOKENIZER],
            "pretokenizers": [pretokenizer(t) for t in self.tokenizers if t.kind == PRETOKENIZER],
        }
        if self.findings:
            findings: list[Finding] = [f.to_dict() for f in self.findings]
            out["findings"] = findings
        return out

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent, allow_nan=False)


def build_report(
    accs, state: PassState, summary: dict, toks, settings: dict, weighted: Weighted | None = None
) -> Report:
    """The Report of measured accumulators (one per tokenizer of `toks`, same order) and the
    pass's bookkeeping: analyze's end, and fertility.engine's merge of its tasks' counts.
    weighted: what a stratified --precision pass weighted (build_table)."""
    summary["docs_table_full"] = state.docs_table_full
    # The corpus object and the settings arrive untyped: Corpus.summary()'s counters of a
    # pass, or the JSON of fertility.engine's task files read back. They are the records
    # the report's JSON says they are (tests/test_schemas.py validates real outputs).
    corpus, measured = (
        cast("MeasuredCorpus", summary),
        cast("report_json.MeasureSettings", settings),
    )
    lang_names = {i: name for name, i in state.langs.items()}
    return Report(
        table=build_table(accs, state.langs, weighted),
        doc_columns=doc_columns(state),
        corpus=corpus,
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
        language_histograms={
            a.tok.label: {
                lang: a.vocab_lang[i] for lang, i in state.langs.items() if i in a.vocab_lang
            }
            for a in accs
            if a.track_vocab
        },
        running_langs=running_by_language(accs, lang_names),
        settings=measured,
    )


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
