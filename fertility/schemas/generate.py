"""Writes each versioned JSON output's JSON Schema (draft 2020-12) from its record:
`make schemas`, or `python -m fertility.schemas.generate [FOLDER]` (default: this folder).

msgspec turns a record into JSON Schema; what it does not write the way a reader of these
files expects is changed here, each for the reason beside it. Needs msgspec (the test extra)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
from typing_extensions import get_type_hints, is_typeddict

from fertility.schemas import (
    corpus,
    extend,
    fix,
    gate,
    manifest,
    report,
    run,
    shards,
    verdicts,
)
from fertility.schemas import eval as eval_records  # (not the builtin eval)

HERE = Path(__file__).resolve().parent
MODULES: tuple[ModuleType, ...] = (
    verdicts,
    corpus,
    report,
    gate,
    fix,
    extend,
    shards,
    run,
    eval_records,
    manifest,
)

# schema name ("fertility.NAME/1" -> NAME.schema.json): the record and the title
OUTPUTS: dict[str, tuple[type, str]] = {
    "report": (report.Report, "fertility report --format json"),
    "gate": (gate.Gate, "fertility gate --format json"),
    "fix": (fix.Fix, "fix-report.json (fertility fix)"),
    "extend": (extend.Extend, "extend-report.json (fertility extend)"),
    "extend-ids": (extend.ExtendIds, "ids-map.json (fertility extend)"),
    "shards": (
        shards.Shards,
        "index.json of a token-shard folder (fertility pretrain's data/, fertility "
        "tokenize's --out)",
    ),
    "tokenize": (shards.Tokenize, "fertility tokenize --format json"),
    "run": (run.Run, "run.json (fertility pretrain)"),
    "eval": (eval_records.Eval, "fertility eval --format json"),
    "export": (eval_records.Export, "fertility_export.json (fertility export)"),
    "manifest": (
        manifest.Manifest,
        ".fertility-manifest.json (the outputs of fertility in a folder)",
    ),
}


def records() -> dict[str, type]:
    """Every record by name: a $defs entry is named by its record's class name."""
    out: dict[str, type] = {}
    for module in MODULES:
        for name, value in vars(module).items():
            if is_typeddict(value) and value.__module__ == module.__name__:
                assert name not in out, f"two records named {name}"
                out[name] = value
    return out


def closed() -> set[type]:
    """The records that hold no other key (each module's CLOSED)."""
    return {r for module in MODULES for r in getattr(module, "CLOSED", ())}


def consts(node: Any) -> Any:
    """One allowed value written as `const` (msgspec writes a one-value Literal as an
    `enum` of one): JSON Schema's own spelling, and what readers look up the `schema` id by."""
    if isinstance(node, dict):
        one = node.get("enum")
        if isinstance(one, list) and len(one) == 1:
            node = {k: v for k, v in node.items() if k != "enum"} | {"const": one[0]}
        return {k: consts(v) for k, v in node.items()}
    if isinstance(node, list):
        return [consts(v) for v in node]
    return node


def nullable(node: Any) -> Any:
    """`{"type": ["number", "null"]}` for msgspec's `anyOf` of plain types (the same
    schema, in the spelling people write and read)."""
    if isinstance(node, dict):
        ways = node.get("anyOf")
        if ways and all(isinstance(w, dict) and list(w) == ["type"] for w in ways):
            node = {k: v for k, v in node.items() if k != "anyOf"}
            node["type"] = [w["type"] for w in ways]
        return {k: nullable(v) for k, v in node.items()}
    if isinstance(node, list):
        return [nullable(v) for v in node]
    return node


def in_order(node: dict[str, Any], record: type) -> dict[str, Any]:
    """The object's properties and required keys in the record's order (msgspec sorts them),
    which is the order the code writes them in."""
    order = list(get_type_hints(record))
    node = dict(node)
    node["properties"] = {k: node["properties"][k] for k in order}
    if "required" in node:
        node["required"] = [k for k in order if k in node["required"]]
    return node


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the output `name`: its record at the root, the records it holds
    under $defs (each written once: the gate inside fix's report is a $ref to Gate)."""
    record, title = OUTPUTS[name]
    named, shut = records(), closed()
    _, defs = msgspec.json.schema_components([record], ref_template="#/$defs/{name}")
    for key, node in defs.items():
        node = in_order(node, named[key])
        if named[key] in shut:
            node["additionalProperties"] = False  # PEP 728's closed=True, unread by msgspec
        if "description" in node:  # a docstring's line breaks are the source's layout
            node["description"] = " ".join(node["description"].split())
        defs[key] = nullable(consts(node))
    root = defs.pop(record.__name__)
    module = record.__module__.replace(".", "/") + ".py"
    head = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://fertility.invalid/schemas/{name}.schema.json",
        "$comment": f"generated by `make schemas` from {module}; do not edit",
        "title": title,
    }
    body = {k: v for k, v in root.items() if k != "title"}
    return {**head, **body, **({"$defs": dict(sorted(defs.items()))} if defs else {})}


def dumps(node: Any, indent: str = "", lead: str = "") -> str:
    """JSON indented by two spaces, with a value that fits in 100 columns (after its line's
    indent and `lead`, its key) on one line."""
    flat = json.dumps(node, ensure_ascii=False)
    if len(indent + lead + flat) <= 100 or not isinstance(node, (dict, list)) or not node:
        return flat
    inner = indent + "  "
    if isinstance(node, list):
        items = [inner + dumps(v, inner) for v in node]
    else:
        keys = [json.dumps(k, ensure_ascii=False) + ": " for k in node]
        items = [inner + k + dumps(v, inner, k) for k, v in zip(keys, node.values())]
    opening, closing = ("[", "]") if isinstance(node, list) else ("{", "}")
    return opening + "\n" + ",\n".join(items) + "\n" + indent + closing


def text(name: str) -> str:
    return dumps(schema(name)) + "\n"


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else HERE
    for name in OUTPUTS:
        (folder / f"{name}.schema.json").write_text(text(name), encoding="utf-8")
    print(f"wrote {len(OUTPUTS)} schemas in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
