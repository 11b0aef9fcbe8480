"""The `corpus` object: what was read and how (fertility.corpus.Corpus.summary(), with the
measuring's `docs_table_full`), in the report, fix, extend, run.json and a shard index."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired


class CorpusFile(TypedDict):
    """A file opened in the last pass."""

    path: str
    format: str
    compression: Any
    lang: str
    documents: int | None
    langs: dict[str, int | None]


class SubsetLanguage(TypedDict):
    """One language's documents met (`seen`), kept by --sample (`sampled`), given out
    (`kept`) and, when stratified, its exact share of max_docs (`target`)."""

    seen: int | None
    sampled: int | None
    kept: int | None
    target: float | None


class CorpusSubset(TypedDict):
    """How the documents given out were chosen."""

    method: str
    statement: str
    languages: dict[str, SubsetLanguage]
    key_passes: NotRequired[int | None]


class CorpusSummary(TypedDict):
    """What was read: files, documents, characters, and the options that chose them."""

    paths: list[str]
    files: list[CorpusFile]
    documents: int | None
    documents_seen: int | None
    chars: int | None
    bytes: int | None
    skipped_files: list[Any]
    binary_files: list[Any]
    invalid_utf8: dict[str, Any]
    empty_records: int | None
    sample: float | None
    max_docs: int | None
    seed: int | None
    stopped_early: bool
    stopped_at: Any
    subset: CorpusSubset
    text_field: str
    lang_field: str | None
    whole_files: bool
    strict: bool
    max_doc_chars: int | None
    max_invalid_utf8: float | None
    complete: bool


class MeasuredCorpus(CorpusSummary):
    """The corpus a report measured (fertility.measure adds docs_table_full)."""

    docs_table_full: Annotated[
        bool, Meta(description="the per-document table holds every document read")
    ]
