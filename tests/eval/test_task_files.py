"""Every JSON Lines reader of `fertility eval` (task files, the run's held-out split) and
`python -m fertility.eval.convert` reads any valid JSONL: lines end at \\n (or \\r\\n) only.

JSON allows U+2028, U+2029 and U+0085 unescaped inside a string, and str.splitlines() breaks
lines at them (and at \\x1c-\\x1e, \\v, \\f): a valid task file was refused, or its line numbers
were off. The expected values here are json.loads of each \\n-separated line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fertility.eval import choice
from tests.eval.test_export import make_run, train_bpe

# Inside JSON strings: raw (JSON allows them) and, for the control characters, escaped
# (JSON requires it; json.dumps writes \\u001c).
SEPARATORS = "\u2028\u2029\u0085\x1c\x1d\x1e\x0b\x0c"


def records() -> list[dict]:
    out = []
    for i, c in enumerate(SEPARATORS):
        out.append(
            {
                "context": f"The line{c}goes on{c}",
                "choices": [f" yes{c}", f" no{c}no", " maybe"][: 2 + i % 2],
                "label": i % 2,
                "id": f"item{c}{i}",
                "lang": f"x{c}",
            }
        )
    return out


def jsonl(recs: list[dict], crlf_every: int = 3) -> str:
    """One record a line, ensure_ascii=False (U+2028, U+2029, U+0085 stay raw); every
    `crlf_every`-th line ends in \\r\\n."""
    lines = [json.dumps(r, ensure_ascii=False) for r in recs]
    return "".join(x + ("\r\n" if i % crlf_every == 0 else "\n") for i, x in enumerate(lines))


def expected(text: str) -> list[dict]:
    return [json.loads(x) for x in text.split("\n") if x.strip()]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("taskfiles")
    return make_run(root, train_bpe(root / "tokenizer.json"))


def test_the_task_text_really_holds_what_splitlines_breaks_at():
    text = jsonl(records())
    for c in "\u2028\u2029\u0085":
        assert c in text  # raw
    assert "\\u001c" in text and "\\u000b" in text  # escaped, as JSON requires
    assert len(text.splitlines()) > len(expected(text))  # what the old reader saw


def test_a_task_file_with_line_separators_inside_strings_loads_as_json_reads_it(tmp_path):
    path = tmp_path / "seps.jsonl"
    path.write_text(jsonl(records()), encoding="utf-8", newline="")
    want = expected(path.read_bytes().decode("utf-8"))
    items = choice.load_items(path)
    assert [(it.context, list(it.choices), it.label, it.id, it.lang) for it in items] == [
        (r["context"], r["choices"], r["label"], r["id"], r["lang"]) for r in want
    ]
    assert [it.line for it in items] == list(range(1, len(want) + 1))


def test_the_eval_command_scores_every_item_of_such_a_task_file(run, run_dir, tmp_path):
    path = tmp_path / "seps.jsonl"
    path.write_text(jsonl(records()), encoding="utf-8", newline="")
    want = expected(path.read_bytes().decode("utf-8"))
    code, out, err = run(
        "eval", run_dir, "--no-lm", "--tasks", path, "--format", "json", "--device", "cpu", "-q"
    )
    assert code == 0, err
    (task,) = json.loads(out)["tasks"]
    assert task["n"] == len(want) == len(SEPARATORS)
    # float64 means of 1/k, numpy's pairwise order against Python's left to right: a few ulps;
    # approx's default rel=1e-6 is only that (an item counted twice or left out moves it more)
    assert task["chance"] == pytest.approx(sum(1 / len(r["choices"]) for r in want) / len(want))
    assert task["langs"] == sorted({r["lang"] for r in want})


def test_a_raw_control_character_is_refused_on_its_own_physical_line(run, run_dir, tmp_path):
    """\\x0c unescaped in a string is not JSON: refused, naming the line counted by \\n (the
    two lines before it hold U+2028 and U+2029, which no longer count as line breaks)."""
    path = tmp_path / "raw.jsonl"
    good = jsonl(records()[:2])
    bad = '{"context": "a\x0cb", "choices": ["x", "y"], "label": 0}\n'
    path.write_text(good + bad, encoding="utf-8", newline="")
    code, out, err = run("eval", run_dir, "--no-lm", "--tasks", path, "--device", "cpu", "-q")
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("\n") == 1, err
    assert err.startswith(f"error: {path}:3: not valid JSON (Invalid control character"), err


def test_convert_reads_and_writes_such_records(tmp_path):
    from fertility.eval.convert import main

    src = tmp_path / "hellaswag.jsonl"
    recs = [
        {"ctx": r["context"], "endings": r["choices"], "label": str(r["label"]), "id": r["id"]}
        for r in records()
    ]
    src.write_text(jsonl(recs), encoding="utf-8", newline="")
    dst = tmp_path / "task.jsonl"
    assert main([str(src), str(dst), "--lang", "x\u2028"]) == 0
    want = expected(src.read_bytes().decode("utf-8"))
    got = expected(dst.read_bytes().decode("utf-8"))  # the output is JSONL with raw U+2028
    assert [(g["context"], g["choices"], g["label"], g["id"]) for g in got] == [
        (w["ctx"], [" " + e for e in w["endings"]], int(w["label"]), w["id"]) for w in want
    ]
    assert len(choice.load_items(dst)) == len(want)


def test_the_heldout_split_with_such_text_is_scored_whole(run, run_dir, tmp_path):
    """heldout.jsonl: U+2028 and friends in the text, \\r\\n line ends, and a \\r between two
    JSON values (JSON whitespace: a universal-newlines reader split that record in two)."""
    import shutil

    run_copy = tmp_path / "run"
    shutil.copytree(run_dir, run_copy)
    texts = [f"Line one{c}line two{c}end." for c in SEPARATORS]
    lines = [json.dumps({"text": t, "lang": "en"}, ensure_ascii=False) for t in texts]
    lines[1] = lines[1].replace(', "lang"', ',\r"lang"')
    held = run_copy / "data" / "heldout.jsonl"
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text("\r\n".join(lines) + "\r\n", encoding="utf-8", newline="")
    want = expected(held.read_bytes().decode("utf-8"))
    code, out, err = run(
        "eval", run_copy, "--format", "json", "--device", "cpu", "--bootstrap", "20", "-q"
    )
    assert code == 0, err
    result = json.loads(out)
    assert result["heldout"]["documents"] == len(want) == len(texts)
    (everything,) = [r for r in result["lm"] if r["group"] == "all"]
    assert everything["chars"] == sum(len(w["text"]) for w in want)  # every character scored


def test_a_heldout_line_nested_too_deeply_is_one_line(run, run_dir, tmp_path):
    import shutil

    run_copy = tmp_path / "run"
    shutil.copytree(run_dir, run_copy)
    held = run_copy / "data" / "heldout.jsonl"
    held.parent.mkdir(parents=True, exist_ok=True)
    held.write_text('{"text": "ok", "lang": "en"}\n' + "[" * 100_000 + "\n")
    code, out, err = run("eval", run_copy, "--device", "cpu", "-q")
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {held}:2: JSON nested too deeply"), err


def test_the_example_task_files_still_load():
    for path in sorted(
        (Path(__file__).resolve().parents[2] / "examples" / "tasks").glob("*.jsonl")
    ):
        text = path.read_text("utf-8")
        assert len(choice.load_items(path)) == len(expected(text))
