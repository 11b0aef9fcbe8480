"""A folder's .fertility-manifest.json (fertility.manifest/1, fertility.outputs): the files
fertility wrote there, which it may replace and which a corpus walk skips."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from msgspec import Meta


class Manifest(TypedDict):
    """The outputs of fertility in a folder."""

    schema: Annotated[
        Literal["fertility.manifest/1"],
        Meta(description="This document's format and version."),
    ]
    made_by: str | None
    entries: list[str]
