"""The one output policy (fertility/outputs.py), met where a user meets it: the command line.

Every case here lost or altered a user's file before the policy existed (issue #20). Each
hashes the user's files before and after: a refusal is one line, exit 2, every byte as it was.
"""

from __future__ import annotations

import json
import os

import pytest

from fertility.outputs import MANIFEST
from tests.bpe import byte_level_bpe
from tests.snapshot import snapshot

BN = "আমি বাংলায় গান গাই। আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।"
EN = "The river rose overnight and the village woke to water in the streets."


def refused(code: int, out: str, err: str, *needles: str) -> str:
    """The refusal: exit 2, nothing on stdout, one line naming what is wrong."""
    lines = err.strip().splitlines()
    assert code == 2, err
    assert out == "" and len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture()
def project(tmp_path):
    """A user's project: a corpus folder of two languages, a tokenizer file, notes."""
    root = tmp_path / "proj"
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    (corpus / "bn.txt").write_text("\n".join(f"{BN} {i}" for i in range(60)) + "\n")
    (corpus / "en.txt").write_text("\n".join(f"{EN} {i}" for i in range(60)) + "\n")
    tok = root / "tok" / "tokenizer.json"
    tok.parent.mkdir()
    byte_level_bpe([BN, EN] * 20, 400, specials=["<|endoftext|>"], path=tok)
    (root / "notes.txt").write_text("the user's notes\n")
    return root


# ---------------------------------------------------------------- an output is never an input


@pytest.mark.parametrize("target", ["corpus/bn.txt", "tok/tokenizer.json"])
def test_report_output_onto_an_input_is_refused(run, project, target):
    before = snapshot(project)
    got = run(
        "report",
        project / "corpus" / "bn.txt",
        "-t",
        project / "tok/tokenizer.json",
        "-o",
        project / target,
        "-q",
    )
    refused(*got, "an input of this run")
    assert snapshot(project) == before


@pytest.mark.parametrize("option", ["--junit", "--html", "-o"])
@pytest.mark.parametrize("target", ["corpus/en.txt", "tok/tokenizer.json"])
def test_gate_outputs_onto_an_input_are_refused(run, project, option, target):
    before = snapshot(project)
    got = run(
        "gate",
        project / "corpus" / "en.txt",
        "-t",
        project / "tok/tokenizer.json",
        option,
        project / target,
        "-q",
    )
    refused(*got, str(project / target))
    assert snapshot(project) == before


def test_output_through_a_symlink_or_hard_link_to_an_input_is_refused(run, project, tmp_path):
    corpus_file = project / "corpus" / "bn.txt"
    (tmp_path / "soft.txt").symlink_to(corpus_file)
    os.link(corpus_file, tmp_path / "hard.txt")
    before = snapshot(project)
    for name in ("soft.txt", "hard.txt"):
        got = run("report", corpus_file, "-o", tmp_path / name, "-q")
        refused(*got, str(tmp_path / name))
    assert snapshot(project) == before


def test_eval_output_onto_the_runs_manifest_is_refused(run, tmp_path):
    pytest.importorskip("torch")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text('{"schema": "fertility.run/1"}\n')
    before = snapshot(run_dir)
    got = run("eval", run_dir, "-o", run_dir / "run.json", "-q")
    refused(*got, "an input of this run")
    assert snapshot(run_dir) == before


def test_the_same_file_for_two_outputs_is_refused(run, project, tmp_path):
    out = tmp_path / "x.txt"
    got = run(
        "gate", project / "corpus", "-t", project / "tok/tokenizer.json", "-o", out, "--junit", out
    )
    refused(*got, "named as both -o/--output and --junit")
    assert not out.exists()


def test_output_into_a_missing_folder_is_refused_before_measuring(run, project, monkeypatch):
    import fertility.measure

    def measured(*a, **k):  # the refusal must come first: measuring a corpus takes hours
        raise AssertionError("measured before checking the output")

    monkeypatch.setattr(fertility.measure, "analyze", measured)
    got = run("report", project / "corpus", "-o", project / "missing/r.txt", "-q")
    refused(*got, f"the folder {project / 'missing'} does not exist")


# ---------------------------------------------------------------- a user's file is never replaced


def test_an_existing_file_of_the_users_is_not_replaced_but_our_own_is(run, project, tmp_path):
    mine = tmp_path / "report.txt"
    mine.write_text("the user's own report\n")
    got = run("report", project / "corpus", "-o", mine, "-q")
    refused(*got, "was not written by fertility")
    assert mine.read_text() == "the user's own report\n"
    ours = tmp_path / "r.json"
    assert run("report", project / "corpus", "--format", "json", "-o", ours, "-q")[0] == 0
    first = ours.read_text()
    assert run("report", project / "corpus", "--format", "json", "-o", ours, "-q")[0] == 0
    assert ours.read_text() == first  # a re-run replaces what fertility wrote
    listed = json.loads((tmp_path / MANIFEST).read_text())["entries"]
    assert listed == ["r.json"]


def test_a_users_partial_file_is_never_swept(run, project, tmp_path):
    """`.*.partial-*` is a common name (downloads, browsers): only our own temporary name,
    `.NAME.fertility-partial-PID` of a dead process, is removed."""
    out = tmp_path / "r.csv"
    theirs = tmp_path / ".r.csv.partial-999999999"
    theirs.write_text("a download in progress")
    assert run("report", project / "corpus", "--format", "csv", "-o", out, "-q")[0] == 0
    assert theirs.read_text() == "a download in progress"


# ---------------------------------------------------------------- output folders


def test_fix_into_a_users_folder_is_refused_and_nothing_is_touched(run, project, tmp_path):
    out = tmp_path / "mine"
    (out / "heldout").mkdir(parents=True)
    (out / "tokenizer.json").write_text('{"the user": "s own tokenizer"}')
    (out / "report.html").write_text("<p>the user's page</p>")
    (out / "heldout" / "bn.jsonl").write_text('{"text": "kept"}\n')
    (out / "heldout" / ".x.partial-999999999").write_text("a user's partial")
    (out / "sub").mkdir()
    (out / "sub" / ".y.partial-1").write_text("another")
    before = snapshot(out)
    got = run("fix", project / "corpus", "--vocab-size", "300", "--out", out, "-q")
    refused(*got, "was not made by `fertility fix`", "nothing there is replaced or deleted")
    assert snapshot(out) == before


def test_fix_and_extend_refuse_the_base_tokenizers_own_folder(run, project):
    tok_dir = project / "tok"
    before = snapshot(project)
    got = run(
        "extend", tok_dir / "tokenizer.json", project / "corpus", "--add", "10", "--out", tok_dir
    )
    refused(*got, "contains an input of this run")
    got = run(
        "fix",
        project / "corpus",
        "--from",
        tok_dir / "tokenizer.json",
        "--vocab-size",
        "300",
        "--out",
        tok_dir,
    )
    refused(*got, "contains an input of this run")
    assert snapshot(project) == before


def test_fix_output_inside_the_corpus_is_refused_unless_forced(run, project):
    corpus = project / "corpus"
    before = snapshot(project)
    got = run("fix", corpus, "--vocab-size", "300", "--out", corpus / "fixed", "-q")
    refused(*got, "lies inside the corpus folder", "--allow-output-in-corpus")
    got = run("fix", corpus, "--vocab-size", "300", "--out", corpus, "-q")
    refused(*got, str(corpus))
    assert snapshot(project) == before


def test_fix_reruns_into_its_own_folder_and_keeps_the_users_extra_file(run, project, tmp_path):
    out = tmp_path / "fixed"
    args = ("fix", project / "corpus", "--vocab-size", "300", "--out", out, "-q")
    code, _, err = run(*args)
    assert code in (0, 1), err  # 1: the gate's verdict on a tiny corpus; the folder is written
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["made_by"] == "fix" and "heldout/" in manifest["entries"]
    (out / "README.md").write_text("the user's note about this tokenizer\n")
    code, _, err = run(*args)
    assert code in (0, 1), err
    assert (out / "README.md").read_text() == "the user's note about this tokenizer\n"


def test_report_inside_the_corpus_is_refused_unless_forced_and_then_not_read_back(run, project):
    corpus = project / "corpus"
    inside = corpus / "report.txt"
    got = run("report", corpus, "-o", inside, "-q")
    refused(*got, "--allow-output-in-corpus")
    assert not inside.exists()
    code, _, err = run("report", corpus, "-o", inside, "-q", "--allow-output-in-corpus")
    assert code == 0, err
    assert inside.exists()
    code, out, err = run("report", corpus, "--format", "json", "-q")
    assert code == 0, err
    assert json.loads(out)["corpus"]["documents"] == 120  # the 120 lines, not the report's


@pytest.fixture()
def pretrain_args(project):
    pytest.importorskip("torch")
    return ("-t", project / "tok/tokenizer.json", "--steps", "1", "--force", "-q")


def test_pretrain_out_over_a_folder_whose_data_is_the_corpus_deletes_nothing(
    run, project, pretrain_args, monkeypatch
):
    data = project / "data"
    (project / "corpus").rename(data)
    before = snapshot(project)
    got = run("pretrain", data, "--out", project, *pretrain_args)
    refused(*got, "contains the corpus folder")
    monkeypatch.chdir(project)
    got = run("pretrain", "data", "--out", ".", *pretrain_args)
    refused(*got, "contains the corpus folder")
    assert snapshot(project) == before


def test_pretrain_into_a_users_folder_or_the_corpus_is_refused(run, project, pretrain_args):
    mine = project / "runs"
    (mine / "data").mkdir(parents=True)
    (mine / "data" / "shard.txt").write_text("the user's data\n")
    before = snapshot(project)
    got = run("pretrain", project / "corpus", "--out", mine, *pretrain_args)
    refused(*got, "was not made by `fertility pretrain`")
    got = run("pretrain", project / "corpus", "--out", project / "corpus/run", *pretrain_args)
    refused(*got, "lies inside the corpus folder")
    assert snapshot(project) == before


def test_error_line_escapes_controls(run, tmp_path):
    """A newline in a file name would split the one error line; U+202E would print what
    follows it reversed. Both are shown as escapes."""
    name = tmp_path / "a\nb\u202etxt.txt"
    code, out, err = run("report", name, "-q")
    line = refused(code, out, err)
    assert "a\\nb\\u202etxt.txt" in line and "\u202e" not in line


def test_a_claim_is_undone_when_nothing_was_written(tmp_path):
    """release_unused_claims (what the CLI calls when a command stops on an error): a folder
    the claim created, parents included, goes when it holds only the manifest; a user's empty
    folder stays, empty again; a folder holding anything else keeps it all."""
    from fertility.outputs import Inputs, claim_folder, forget_claims, release_unused_claims

    made = claim_folder(tmp_path / "new/deeper/out", "fix", ["a.txt"], Inputs.of())
    users = tmp_path / "users"
    users.mkdir()
    claim_folder(users, "fix", ["a.txt"], Inputs.of())
    written = claim_folder(tmp_path / "written", "fix", ["a.txt"], Inputs.of())
    (written / "a.txt").write_text("kept")
    assert (made / MANIFEST).is_file() and (users / MANIFEST).is_file()
    release_unused_claims()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["users", "written"]
    assert list(users.iterdir()) == []
    assert sorted(p.name for p in written.iterdir()) == [MANIFEST, "a.txt"]
    release_unused_claims()  # nothing left to undo: a second call changes nothing
    assert sorted(p.name for p in written.iterdir()) == [MANIFEST, "a.txt"]
    # an earlier run's folder holding only its manifest: claimed again and the command
    # fails, the manifest stays (it is not this command's to take back)
    earlier = claim_folder(tmp_path / "earlier", "fix", ["a.txt"], Inputs.of())
    forget_claims()  # that run ended
    before = (earlier / MANIFEST).read_bytes()
    claim_folder(earlier, "fix", ["a.txt"], Inputs.of())
    release_unused_claims()
    assert [p.name for p in earlier.iterdir()] == [MANIFEST]
    assert (earlier / MANIFEST).read_bytes() == before
