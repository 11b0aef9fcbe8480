"""A token-shard folder's index.json (fertility.shards/1: pretrain's data/, tokenize's --out)
and `fertility tokenize --format json` (fertility.tokenize/1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from msgspec import Meta
from typing_extensions import NotRequired

from fertility.schemas.corpus import CorpusSummary
from fertility.schemas.gate import Gate


class Shard(TypedDict):
    file: str
    tokens: int
    docs: int


class ShardLanguage(TypedDict):
    lang: str
    docs: int
    chars: int
    bytes: int
    tokens: int


class ShardParts(TypedDict):
    """What the finished parts of a data folder share, merged (fertility/shards/parts.py
    merge_parts; unpacked into `fertility tokenize`'s Shards, so mypy checks they fit)."""

    vocab_size: int
    fingerprint: str
    separator: int | None
    dtype: str
    train: list[Shard]
    heldout: list[Shard]
    languages: list[ShardLanguage]


class Counts(TypedDict):
    folder: str
    tasks: int
    settings: dict[str, Any]


class Shards(TypedDict):
    """The shards of a tokenized corpus, train and held-out, and what they hold."""

    schema: Annotated[
        Literal["fertility.shards/1"], Meta(description="This document's format and version.")
    ]
    fingerprint: str
    vocab_size: int
    dtype: str
    separator: int | None
    seed: int | None
    heldout_fraction: float | None
    train: list[Shard]
    heldout: list[Shard]
    languages: list[ShardLanguage]
    corpus: CorpusSummary
    counts: NotRequired[
        Annotated[
            Counts | None,
            Meta(
                description="fertility tokenize: where the counts of the same pass lie (the "
                "gate's evidence); null with --no-counts. Absent in pretrain's own data folder."
            ),
        ]
    ]


class Tokenize(TypedDict):
    """What `fertility tokenize` wrote, and the gate's verdict on it."""

    schema: Annotated[
        Literal["fertility.tokenize/1"],
        Meta(description="This document's format and version."),
    ]
    index: Annotated[
        Shards, Meta(description="The shards' index.json (fertility.shards/1, shards.schema.json).")
    ]
    gate: Annotated[
        Gate | None,
        Meta(
            description="The gate's verdict on the counts of the same pass (fertility.gate/1, "
            "gate.schema.json); null with --no-counts."
        ),
    ]


# Records that hold no key besides those they name: the generator writes
# `"additionalProperties": false` for them (PEP 728's closed=True, which neither mypy nor
# msgspec reads yet).
CLOSED: frozenset[type] = frozenset({Tokenize})
