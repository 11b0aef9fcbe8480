"""Convert lm-evaluation-harness style multiple-choice records into the task format.

    convert_file("hellaswag_val.jsonl", "hellaswag.jsonl", lang="en")
    python -m fertility.eval.convert hellaswag_val.jsonl hellaswag.jsonl --lang en

Recognised record shapes (the first that fits wins; or name the fields explicitly):

    query / choices / gold            lm-eval's processed docs (hellaswag, ...)
    ctx / endings / label             HellaSwag as published ("label" may be "2")
    question / choices{text,label} / answerKey    ARC, OpenBookQA-like (answerKey "B" or "2")
    goal / sol1 / sol2 / label        PIQA
    context / choices / label         already this project's format (copied, checked)

ARC- and PIQA-like records become "Question: ...\\nAnswer:" contexts, as lm-eval prompts them.
Like lm-eval's `target_delimiter`, `delimiter` (default one space) is put in front of each
choice, because a choice is appended to the context exactly as written (docs/EVAL.md). Every
converted item is checked with the same rules as a task file; a record that fits no shape or
fails the check raises EvalError naming the input file and line.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fertility.errors import EvalError
from fertility.eval.choice import JSON_SPACE, jsonl_lines, parse_item
from fertility.files import write_text_atomic


def _records(path: Path) -> Iterator[tuple[int, Any]]:
    """(line, record) from JSON Lines, or from one JSON array (record numbers then)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise EvalError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise EvalError(f"{path}: unreadable ({e})") from None
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise EvalError(f"{path}: not valid JSON ({e})") from None
        except RecursionError:  # the decoder recurses per nesting level: [[[[...]]]]
            raise EvalError(f"{path}: JSON nested too deeply to read") from None
        yield from enumerate(data, 1)
        return
    for n, line in enumerate(jsonl_lines(text), 1):  # \n only: not str.splitlines()
        if line.strip(JSON_SPACE):
            try:
                yield n, json.loads(line)
            except ValueError as e:  # e.msg: a decode error; str(e): a 4300-digit integer
                raise EvalError(
                    f"{path}:{n}: not valid JSON ({getattr(e, 'msg', None) or e})"
                ) from None
            except RecursionError:
                raise EvalError(f"{path}:{n}: JSON nested too deeply to read") from None


def _index(label: Any, names: list[str] | None = None) -> int:
    """A 0-based index from 2, "2", "B" (A=0) or a name listed in `names`."""
    if isinstance(label, bool):
        raise ValueError(f"label {label!r}")
    if isinstance(label, int):
        return label
    if isinstance(label, str):
        s = label.strip()
        if isinstance(names, list) and s in names:  # ARC's choices.label
            return names.index(s)
        if s.isdigit():
            return int(s)
        if len(s) == 1 and s.isalpha():
            return ord(s.upper()) - ord("A")
    raise ValueError(f"label {label!r} is not an index, a digit or a letter")


def convert_record(
    rec: Any,
    *,
    delimiter: str = " ",
    context_field: str | None = None,
    choices_field: str | None = None,
    label_field: str | None = None,
) -> dict[str, Any]:
    """{"context", "choices", "label"} of one record; ValueError/KeyError when it does not fit."""
    if not isinstance(rec, dict):
        raise ValueError("expected a JSON object")
    if context_field or choices_field or label_field:
        if not (context_field and choices_field and label_field):
            raise ValueError("name all three of the context, choices and label fields")
        ctx, choices, label = rec[context_field], rec[choices_field], rec[label_field]
        names = None
        if isinstance(choices, dict):  # ARC-like {"text": [...], "label": [...]}
            choices, names = choices["text"], choices.get("label")
        return _item(ctx, choices, _index(label, names), delimiter)
    if {"context", "choices", "label"} <= rec.keys():
        return {"context": rec["context"], "choices": rec["choices"], "label": rec["label"]}
    if {"query", "choices", "gold"} <= rec.keys():
        return _item(rec["query"], rec["choices"], _index(rec["gold"]), delimiter)
    if {"ctx", "endings", "label"} <= rec.keys():
        return _item(rec["ctx"], rec["endings"], _index(rec["label"]), delimiter)
    if {"question", "choices", "answerKey"} <= rec.keys() and isinstance(rec["choices"], dict):
        c = rec["choices"]
        return _item(
            f"Question: {rec['question']}\nAnswer:",
            c["text"],
            _index(rec["answerKey"], c.get("label")),
            delimiter,
        )
    if {"goal", "sol1", "sol2", "label"} <= rec.keys():
        return _item(
            f"Question: {rec['goal']}\nAnswer:",
            [rec["sol1"], rec["sol2"]],
            _index(rec["label"]),
            delimiter,
        )
    raise ValueError(
        "fits no known record shape (query/choices/gold, ctx/endings/label, "
        "question/choices/answerKey, goal/sol1/sol2/label); name the fields"
    )


def _item(ctx: Any, choices: Any, label: int, delimiter: str) -> dict[str, Any]:
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ValueError("choices must be a list of strings")
    return {"context": ctx, "choices": [delimiter + c for c in choices], "label": label}


def convert_file(
    src: str | Path,
    dst: str | Path,
    *,
    lang: str | None = None,
    delimiter: str = " ",
    context_field: str | None = None,
    choices_field: str | None = None,
    label_field: str | None = None,
) -> int:
    """Convert `src` into the task file `dst` (written whole or not at all); returns items."""

    src, dst = Path(src), Path(dst)
    out: list[str] = []
    for n, rec in _records(src):
        where = f"{src}:{n}"
        try:
            item = convert_record(
                rec,
                delimiter=delimiter,
                context_field=context_field,
                choices_field=choices_field,
                label_field=label_field,
            )
        except KeyError as e:
            raise EvalError(f"{where}: field {e} is missing") from None
        except (ValueError, TypeError) as e:
            raise EvalError(f"{where}: {e}") from None
        rid = rec.get("id")
        item["id"] = str(rid) if rid is not None else f"{src.stem}-{n}"
        if lang or rec.get("lang"):
            item["lang"] = lang or rec["lang"]
        line = json.dumps(item, ensure_ascii=False)
        parse_item(line, where, n)  # the task-file rules, with the input's file and line
        out.append(line)
    if not out:
        raise EvalError(f"{src}: no records")
    write_text_atomic(dst, "\n".join(out) + "\n", EvalError)
    return len(out)


def main(argv: list[str] | None = None) -> int:

    p = argparse.ArgumentParser(
        prog="python -m fertility.eval.convert",
        description="lm-evaluation-harness records -> task JSONL",
    )
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--lang")
    p.add_argument("--delimiter", default=" ")
    p.add_argument("--context-field")
    p.add_argument("--choices-field")
    p.add_argument("--label-field")
    a = p.parse_args(argv)
    try:
        n = convert_file(
            a.src,
            a.dst,
            lang=a.lang,
            delimiter=a.delimiter,
            context_field=a.context_field,
            choices_field=a.choices_field,
            label_field=a.label_field,
        )
    except EvalError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(f"{n} items written to {a.dst}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
