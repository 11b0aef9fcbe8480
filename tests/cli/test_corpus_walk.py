"""`fertility report` over corpus folders as users lay them out (issue #20): this project's own
outputs inside them, link loops, two names for one file, `--lang-field` against folder names,
control-character garbage, and names or labels that would break a line or turn it around.
Each case fails as the user met it before the fix: the wrong documents counted, a run aborted,
a silent `und`, a split or reversed line."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

LINES = [f"line number {i} of the good part" for i in range(40)]
GOOD = "".join(line + "\n" for line in LINES).encode()
MANIFEST = ".fertility-manifest.json"
CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def report(run, *args):
    code, out, err = run("report", *map(str, args), "-q", "--workers", "1", "--format", "json")
    return code, (json.loads(out) if code == 0 else None), err


def manifest(folder, made_by, entries):
    """A manifest as fertility.outputs writes it (written by hand: this is the format)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {"schema": "fertility.manifest/1", "made_by": made_by, "entries": entries}
    (folder / MANIFEST).write_text(json.dumps(data))


def users_documents(root):
    """The user's own corpus: two languages, two formats."""
    (root / "bn").mkdir(parents=True)
    (root / "en.txt").write_bytes(GOOD)
    (root / "bn" / "part-1.txt").write_text("নমস্কার বিশ্ব\nআবার দেখা হবে\n")
    (root / "data.jsonl").write_text('{"text": "hola", "lang": "es"}\n')


def fertility_outputs(root):
    """What fix, report -o and pretrain leave inside the corpus folder, each with its
    manifest: all of it is text fertility would otherwise read (.txt, .jsonl)."""
    fix = root / "fix-out"
    manifest(fix, "fix", ["heldout/", "report.html", "fix-report.json"])
    (fix / "heldout").mkdir()
    (fix / "heldout" / "en.jsonl").write_text('{"text": "held out", "lang": "en"}\n' * 30)
    (fix / "heldout" / "_lang0.jsonl").write_text('{"text": "x", "lang": "zz"}\n')
    (fix / "report.html").write_text("<html></html>")
    (fix / "fix-report.json").write_text("{}")
    # a single-file output next to the user's files: `report CORPUS -o CORPUS/report.txt`
    manifest(root, "report", ["report.txt"])
    (root / "report.txt").write_text("corpus: 41 documents\nall  41  100.0%  5.50\n")
    # a pretrain run folder listing a nested entry (a folder two levels down)
    run_dir = root / "runs" / "tiny"
    manifest(run_dir, "pretrain", ["samples/step-10/", "log.txt"])
    (run_dir / "samples" / "step-10").mkdir(parents=True)
    (run_dir / "samples" / "step-10" / "en.txt").write_text("generated text\n" * 5)
    (run_dir / "log.txt").write_text("step 10 loss 3.2\n")


def test_outputs_of_fertility_inside_a_corpus_folder_are_not_read(run, tmp_path):
    clean, mixed = tmp_path / "clean", tmp_path / "mixed"
    users_documents(clean)
    users_documents(mixed)
    fertility_outputs(mixed)
    code, want, _ = report(run, clean, "--lang-field", "lang")
    assert code == 0
    code, got, err = report(run, mixed, "--lang-field", "lang")
    assert code == 0, err
    # exactly the user's documents: the same count, characters and languages
    for key in ("documents", "chars", "bytes"):
        assert got["corpus"][key] == want["corpus"][key], key
    assert [(os.path.relpath(f["path"], mixed), f["langs"]) for f in got["corpus"]["files"]] == [
        (os.path.relpath(f["path"], clean), f["langs"]) for f in want["corpus"]["files"]
    ]
    skipped = {
        os.path.relpath(s["path"], mixed): s["reason"] for s in got["corpus"]["skipped_files"]
    }
    ours = {path for path, reason in skipped.items() if reason.startswith("written by fertility")}
    assert ours == {
        MANIFEST,
        "report.txt",
        "fix-out/" + MANIFEST,
        "fix-out/heldout",
        "fix-out/report.html",
        "fix-out/fix-report.json",
        "runs/tiny/" + MANIFEST,
        "runs/tiny/log.txt",
        "runs/tiny/samples/step-10",
    }
    assert skipped["fix-out/report.html"] == f"written by fertility (listed in {MANIFEST})"
    walk_warnings = [line for line in err.splitlines() if "skipped" in line]
    assert walk_warnings == [
        f"warning: {mixed}: skipped 9 file(s) (9 written by fertility); see summary skipped_files"
    ]


def test_an_output_named_itself_is_read(run, tmp_path):
    # the documented way to measure a held-out split: name it; the manifest above it is not
    # consulted. Naming the output folder itself reads its manifest: nothing left to read.
    fertility_outputs(tmp_path)
    code, rep, err = report(run, tmp_path / "fix-out" / "heldout", "--lang-field", "lang")
    assert code == 0, err
    assert rep["corpus"]["documents"] == 31
    assert rep["corpus"]["files"][0]["langs"] == {"zz": 1}
    code, rep, _ = report(run, tmp_path / "report.txt")
    assert code == 0 and rep["corpus"]["documents"] == 2
    code, _, err = report(run, tmp_path / "fix-out")
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        f"error: {tmp_path / 'fix-out'}: no corpus files (4 written by fertility); "
        "an output of fertility is read only when named itself"
    )


def test_a_report_written_into_the_corpus_is_not_read_by_the_next_run(tmp_path):
    # end to end in a child process, as a user runs it twice: the manifest fertility.outputs
    # writes for `-o corpus/report.txt` (by hand here, in its format) keeps it out of run 2
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "en.txt").write_bytes(GOOD)
    (corpus / "report.txt").write_text("corpus: 40 documents, 1,230 chars\n" * 20)
    manifest(corpus, "report", ["report.txt"])
    proc = subprocess.run(
        [sys.executable, "-m", "fertility.cli", "report", str(corpus), "-q", "--workers", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"corpus: {len(LINES)} documents, ")
    assert "2 written by fertility" in proc.stderr


# -- links ---------------------------------------------------------------------------------


def test_a_symbolic_link_loop_inside_a_corpus_is_skipped_not_fatal(run, tmp_path):
    (tmp_path / "en.txt").write_bytes(GOOD)
    os.symlink("b", tmp_path / "a")  # a -> b -> a
    os.symlink("a", tmp_path / "b")
    os.symlink("self.txt", tmp_path / "self.txt")  # a link to itself
    os.symlink("..", tmp_path / "up")  # to the folder above: a loop if it were followed
    os.symlink(".", tmp_path / "here")  # to its own folder
    code, rep, err = report(run, tmp_path)
    assert code == 0, err
    assert rep["corpus"]["documents"] == len(LINES)
    reasons = {os.path.basename(s["path"]): s["reason"] for s in rep["corpus"]["skipped_files"]}
    assert reasons == {
        "a": "symbolic link loop",
        "b": "symbolic link loop",
        "self.txt": "symbolic link loop",
        "up": "symbolic link to a folder (not followed)",
        "here": "symbolic link to a folder (not followed)",
    }


def test_a_named_link_loop_is_one_line_naming_it(run, tmp_path):
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    code, _, err = report(run, tmp_path / "a")
    assert code == 2
    assert err.strip() == f"error: {tmp_path / 'a'}: symbolic link loop (it leads back to itself)"


def test_two_names_for_one_file_are_read_once(run, tmp_path):
    (tmp_path / "en.txt").write_bytes(GOOD)
    os.link(tmp_path / "en.txt", tmp_path / "hard.txt")  # a hard link: two names, one inode
    os.symlink("en.txt", tmp_path / "soft.txt")
    code, rep, err = report(run, tmp_path)
    assert code == 0, err
    assert rep["corpus"]["documents"] == len(LINES)
    assert [f["path"] for f in rep["corpus"]["files"]] == [str(tmp_path / "en.txt")]
    assert rep["corpus"]["skipped_files"] == [
        {"path": str(tmp_path / name), "reason": f"same file as {tmp_path / 'en.txt'}"}
        for name in ("hard.txt", "soft.txt")
    ]


# -- labels --------------------------------------------------------------------------------


def test_lang_field_the_records_lack_is_a_warning_with_the_count(run, tmp_path):
    (tmp_path / "data.jsonl").write_text(
        '{"text": "one", "language": "en"}\n' * 3 + '{"text": "two", "lang": ""}\n'
    )
    (tmp_path / "named.jsonl").write_text('{"text": "ok", "lang": "fr"}\n')
    code, rep, err = report(run, tmp_path, "--lang-field", "lang")
    assert code == 0
    assert rep["corpus"]["files"][0]["langs"] == {"und": 4}
    warnings = [line for line in err.splitlines() if "labelled und" in line]
    assert warnings == [
        f'warning: {tmp_path / "data.jsonl"}: 4 of 4 records have no "lang" field '
        "(or an empty or non-string one); labelled und"
    ]


def test_lang_field_wins_over_a_folder_name_and_only_codes_name_folders(run, tmp_path):
    records = '{"text": "Guten Tag", "lang": "de"}\n{"text": "Bonjour", "lang": "fr"}\n'
    for folder in ("pq", "xss", "bn"):  # pq: no code; xss: ISO 639-3 Assan; bn: Bengali
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "part-1.jsonl").write_text(records)
    (tmp_path / "ben_Beng").mkdir()  # FineWeb-2 style folders and FLORES-style files stay
    (tmp_path / "ben_Beng" / "train.txt").write_text("নমস্কার\n")
    (tmp_path / "ben_Beng" / "hin_Deva.txt").write_text("नमस्ते\n")
    code, rep, err = report(run, tmp_path, "--lang-field", "lang")
    assert code == 0, err
    langs = {os.path.relpath(f["path"], tmp_path): f["langs"] for f in rep["corpus"]["files"]}
    assert langs == {
        "ben_Beng/hin_Deva.txt": {"hin_Deva": 1},
        "ben_Beng/train.txt": {"ben_Beng": 1},
        "bn/part-1.jsonl": {"de": 1, "fr": 1},
        "pq/part-1.jsonl": {"de": 1, "fr": 1},
        "xss/part-1.jsonl": {"de": 1, "fr": 1},
    }
    # without --lang-field a folder names its files only when it is a language code
    code, rep, _ = report(run, tmp_path)
    langs = {os.path.relpath(f["path"], tmp_path): f["langs"] for f in rep["corpus"]["files"]}
    assert langs["pq/part-1.jsonl"] == {"und": 2}
    assert langs["bn/part-1.jsonl"] == {"bn": 2}
    assert langs["xss/part-1.jsonl"] == {"xss": 2}


# -- garbage -------------------------------------------------------------------------------


def test_a_file_of_control_characters_is_skipped_as_binary(run, tmp_path):
    (tmp_path / "en.txt").write_bytes(GOOD)
    garbage = bytes(b for b in range(1, 32) if b not in b"\t\n\r") * 40 + b"\n"
    (tmp_path / "zz.txt").write_bytes(garbage)  # no NUL, valid UTF-8: text by the old checks
    code, rep, err = report(run, tmp_path)
    assert code == 0 and rep["corpus"]["documents"] == len(LINES)
    assert [b["path"] for b in rep["corpus"]["binary_files"]] == [str(tmp_path / "zz.txt")]
    assert (
        f"warning: {tmp_path / 'zz.txt'}: skipped (binary: 100% of its first 1121 bytes "
        "are control characters)"
    ) in err
    # text with a little of them (a terminal's colours, form feeds) is text
    colours = b"".join(b"\x1b[31mred\x1b[0m and plain text on line %d\x0c\n" % i for i in range(40))
    (tmp_path / "zz.txt").write_bytes(colours)
    code, rep, _ = report(run, tmp_path)
    assert code == 0 and rep["corpus"]["documents"] == 2 * len(LINES)


# -- display -------------------------------------------------------------------------------


@pytest.mark.parametrize("char, escaped", [("\n", "\\n"), ("\u202e", "\\u202e")])
def test_a_file_name_that_would_break_the_error_line_is_escaped(run, tmp_path, char, escaped):
    (tmp_path / f"bad{char}name.jsonl").write_text("not json\n")
    code, _, err = report(run, tmp_path)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0] == f"error: {tmp_path}/bad{escaped}name.jsonl: line 1: not valid JSON " + (
        "(Expecting value)"
    )


def test_a_label_with_control_or_bidi_characters_is_escaped_in_the_table(run, tmp_path):
    records = [("hello there", "en\u202e"), ("bye now", "x\ny"), ("plain", "\x1b[2Jfr")]
    (tmp_path / "data.jsonl").write_text(
        "".join(json.dumps({"text": t, "lang": lang}) + "\n" for t, lang in records)
    )
    code, out, err = run("report", tmp_path, "--lang-field", "lang", "-q", "--workers", "1")
    assert code == 0, err
    for raw in ("\u202e", "\x1b"):
        assert raw not in out
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("language:")]
    assert rows[:3] == ["language:\\x1b[2Jfr", "language:en\\u202e", "language:x\\ny"]
    assert len(out.splitlines()) == len(out.split("\n")) - 1  # no line broken in two


def test_a_lone_surrogate_in_a_lang_field_is_replaced_and_counted(run, tmp_path):
    # `"lang": "\udcff"` is valid JSON that no UTF-8 output can hold (before: `unexpected
    # UnicodeEncodeError` in report's JSON and HTML, gate and fix, which left its folder
    # without fix-report.json). Replaced by U+FFFD and counted, as in the text field.
    from tests.bpe import byte_level_bpe

    english = (CORPUS / "en.txt").read_text().splitlines()
    labels = ["\udcff" if i % 6 == 0 else "en" for i in range(len(english))]
    data = tmp_path / "corpus" / "data.jsonl"
    data.parent.mkdir()
    data.write_text(
        "".join(json.dumps({"text": t, "lang": lang}) + "\n" for t, lang in zip(english, labels))
    )
    assert "\\udcff" in data.read_text()  # the escape json.dumps writes for a lone surrogate
    bad = labels.count("\udcff")
    expected = {"en": len(english) - bad, "\ufffd": bad}
    warning = f"warning: {data}: {bad} invalid UTF-8 sequence(s) replaced with U+FFFD"
    code, rep, err = report(run, data, "--lang-field", "lang")
    assert code == 0 and rep["corpus"]["files"][0]["langs"] == expected, err
    assert rep["corpus"]["invalid_utf8"] == {str(data): bad} and warning in err
    page = tmp_path / "r.html"
    code, _, err = run("report", data, "--lang-field", "lang", "-q", "--format", "html", "-o", page)
    assert code == 0 and page.stat().st_size > 0, err
    tok = tmp_path / "tok.json"
    byte_level_bpe(english, 400, path=tok)
    code, _, err = run("gate", data, "--lang-field", "lang", "-q", "-t", tok)
    assert code in (0, 1) and warning in err, err
    out = tmp_path / "fixed"
    code, _, err = run("fix", data, "--lang-field", "lang", "-q", "--vocab-size", 300, "--out", out)
    assert code in (0, 1), err
    fixed = json.loads((out / "fix-report.json").read_text())
    assert fixed["corpus"]["files"][0]["langs"] == expected
    code, _, err = run("report", data, "--lang-field", "lang", "-q", "--strict")
    assert code == 2 and err == f"error: {data}: line 1: lone surrogate escape in 'lang'\n"
