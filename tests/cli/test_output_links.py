"""A symbolic link inside a folder fertility wrote is never a way out (issue #35).

Each verb writes its folder once (module fixture `made`); a test copies that folder, replaces
one entry the verb writes by a link into the user's own folder `mine/` (as a user would:
`rm -r OUT/heldout; ln -s ../mine OUT/heldout`) and runs the same command again. Before the
fix the run followed the link: `mine/*.jsonl` deleted, `mine/t.json` overwritten,
`mine/00000/` removed, a checkpoint written into `mine/`. Now: one line naming the link,
exit 2, and `mine/` byte for byte as it was (every file's content and the listing).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from fertility.errors import OutputError
from fertility.outputs import (
    MANIFEST,
    inside,
    make_inside,
    open_inside,
    record,
    remove,
    replace_inside,
    write_inside,
)
from tests.bpe import byte_level_bpe
from tests.snapshot import snapshot

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "corpus"


def _cli(*argv) -> int:
    from fertility.cli import main

    try:
        main([str(a) for a in argv])
    except SystemExit as e:
        return e.code or 0
    return 0


def _fake_render(figs: list) -> list[bytes]:
    # the browser that draws the charts is not what is tested here: any bytes will do
    return [f"image {i}".encode() for i in range(2 * len(figs))]


@pytest.fixture(scope="module")
def one_thread():
    """Tiny matmuls: a second thread only adds contention (as tests/trainer/conftest.py)."""
    torch = pytest.importorskip("torch")  # pretrain, export and eval
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def made(tmp_path_factory, one_thread):
    """The user's project (real text: examples/corpus bn and en; a byte-level BPE) and each
    verb's output folder, made by the verb itself: name -> (folder, the command's argv with
    `{out}` where the folder goes)."""
    root = tmp_path_factory.mktemp("proj")
    corpus = root / "corpus"
    corpus.mkdir()
    for lang in ("bn", "en"):
        shutil.copyfile(EXAMPLES / f"{lang}.txt", corpus / f"{lang}.txt")
    tok = root / "tokenizer.json"
    lines = (EXAMPLES / "en.txt").read_text(encoding="utf-8").splitlines()
    byte_level_bpe(lines, 400, specials=["<|endoftext|>"], path=tok)
    outs = root / "outs"
    (outs / "reports").mkdir(parents=True)
    commands = {
        "fix": ("fix", corpus, "--vocab-size", "300", "--out", "{out}", "-q"),
        "extend": (
            "extend", tok, corpus, "--add", "20", "--langs", "bn", "--out", "{out}", "-q",
        ),
        "tokenize": ("tokenize", corpus, "-t", tok, "--out", "{out}", "-q"),
        "pretrain": (
            "pretrain", corpus, "-t", tok, "--steps", "1", "--force", "-q", "--out", "{out}",
        ),
    }  # fmt: skip
    folders = {}
    for verb, argv in commands.items():
        folders[verb] = outs / verb
        code = _cli(*(folders[verb] if a == "{out}" else a for a in argv))
        assert code in (0, 1), verb  # 1: the gate's verdict on a small corpus
    commands["pretrain"] += ("--resume",)
    commands["export"] = ("export", folders["pretrain"], "--to", "hf", "{out}", "--overwrite")
    folders["export"] = outs / "export"
    assert _cli("export", folders["pretrain"], "--to", "hf", folders["export"]) == 0
    reports = outs / "reports"
    commands["report"] = (
        "report", corpus, "-t", tok, "-q", "--format", "html", "-o", "{out}/r.html",
        "--plots", "{out}/plots",
    )  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        import fertility.report.images

        mp.setattr(fertility.report.images, "_render", _fake_render)
        argv = [str(a).replace("{out}", str(reports)) for a in commands["report"]]
        assert _cli(*argv) == 0
    folders["report"] = reports
    commands["eval"] = (
        "eval", folders["pretrain"], "--corpus", corpus, "--device", "cpu", "-q", "-o",
        "{out}/e.txt",
    )  # fmt: skip
    folders["eval"] = outs / "eval"
    folders["eval"].mkdir()
    assert _cli(*commands["eval"][:-1], folders["eval"] / "e.txt") == 0
    return {verb: (folders[verb], commands[verb]) for verb in commands}


def _again(run, made, verb: str, place: str, target: str, tmp_path: Path, monkeypatch, unfinish=()):
    """Copy `verb`'s folder to tmp_path/OUT, put `OUT/place -> target` (target relative to
    the link, into tmp_path/mine), run the command again. Returns (exit, stdout, stderr),
    the link and mine's snapshot before. `unfinish`: entries of OUT removed first (a run
    that was interrupted)."""
    folder, argv = made[verb]
    out = tmp_path / "OUT"
    shutil.copytree(folder, out, symlinks=True)
    for rel in unfinish:
        shutil.rmtree(out / rel) if (out / rel).is_dir() else (out / rel).unlink()
    mine = tmp_path / "mine"
    (mine / "00000").mkdir(parents=True)
    (mine / ".tmp-mine").mkdir()
    (mine / "mine.jsonl").write_text('{"text": "the user\'s own record"}\n')
    (mine / "en.jsonl").write_text('{"text": "the user\'s English"}\n')
    (mine / "t.json").write_text('{"the user": "s own tokenizer"}\n')
    (mine / "00000" / "notes.txt").write_text("the user's notes\n")
    (mine / ".tmp-mine" / "draft.txt").write_text("the user's draft\n")
    link = out / place
    if link.is_dir() and not link.is_symlink():
        shutil.rmtree(link)
    elif link.exists() or link.is_symlink():
        link.unlink()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    before = snapshot(mine)
    if verb == "report":
        import fertility.report.images

        monkeypatch.setattr(fertility.report.images, "_render", _fake_render)
    got = run(*(str(a).replace("{out}", str(out)) for a in argv))
    return got, link, before


def refused_naming(got, link: Path, *needles: str) -> None:
    code, out, err = got
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith(f"error: {link}: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


LINK = "is a symbolic link"

# (verb, the entry replaced by a link, where the link points) for every entry a verb writes
# into its own folder; the first five rows are the cases
CASES = [
    ("fix", "heldout", "../mine"),
    ("extend", "tokenizer.json", "../mine/t.json"),
    ("extend", "heldout", "../mine"),
    ("tokenize", "parts", "../mine"),
    ("pretrain", "checkpoints", "../mine"),
    ("fix", "tokenizer.json", "../mine/t.json"),
    ("fix", "report.html", "../mine/t.json"),
    ("fix", "fix-report.json", "../mine/t.json"),
    ("fix", ".unfinished", "../mine/t.json"),
    ("extend", "ids-map.json", "../mine/t.json"),
    ("extend", "extend-report.json", "../mine/t.json"),
    ("tokenize", "index.json", "../mine/t.json"),
    ("tokenize", "heldout.jsonl", "../mine/mine.jsonl"),
    ("tokenize", "counts", "../mine"),
    ("tokenize", "logs", "../mine"),
    ("pretrain", "data", "../mine"),
    ("pretrain", "tokenizer", "../mine"),
    ("pretrain", "metrics.jsonl", "../mine/mine.jsonl"),
    ("export", "config.json", "../mine/t.json"),
    ("export", "tokenizer.json", "../mine/t.json"),
    ("report", "plots/cpt.png", "../../mine/t.json"),
    # deeper, inside a subfolder the verb owns whole (datatrove writes logs/ itself)
    ("fix", "heldout/en.jsonl", "../../mine/en.jsonl"),
    ("tokenize", "logs/stats.json", "../../mine/t.json"),
    ("pretrain", "checkpoints/step-00000001", "../../mine"),
    ("pretrain", "tokenizer/tokenizer.json", "../../mine/t.json"),
]


@pytest.mark.parametrize("verb, place, target", CASES)
def test_a_link_where_a_verb_writes_is_refused_and_mine_is_untouched(
    run, made, tmp_path, monkeypatch, verb, place, target
):
    got, link, before = _again(run, made, verb, place, target, tmp_path, monkeypatch)
    refused_naming(got, link, LINK, f"(to {target})", "remove the link")
    assert snapshot(tmp_path / "mine") == before
    assert link.is_symlink() and os.readlink(link) == target  # the link itself is kept too


def test_a_tokenize_task_never_empties_its_part_folder_through_a_link(
    run, made, tmp_path, monkeypatch
):
    """An interrupted `tokenize` (no index.json, its one task without the counts that mark
    it complete) whose `OUT/parts/00000` is a link: the task that empties its part folder
    before writing it refuses the link, which stays (before: the link was deleted as the
    task's own folder; a link one level up, `OUT/parts -> ../mine`, had `mine/00000/`
    removed whole)."""
    got, link, before = _again(
        run, made, "tokenize", "parts/00000", "../../mine", tmp_path, monkeypatch,
        unfinish=("index.json", "counts"),
    )  # fmt: skip
    code, out, err = got
    assert code == 2, err
    assert f"error: {link}: is a symbolic link (to ../../mine)" in err
    assert snapshot(tmp_path / "mine") == before and link.is_symlink()


def test_the_plots_listed_are_the_ones_the_test_plants(made):
    # the report row plants `plots/cpt.png`: a file `--plots` does write
    assert (made["report"][0] / "plots" / "cpt.png").is_file()


@pytest.mark.parametrize("verb, place", [("report", "r.html"), ("eval", "e.txt")])
def test_a_single_file_output_made_a_link_to_the_users_file_is_refused(
    run, made, tmp_path, monkeypatch, verb, place
):
    """`-o FILE` (report's HTML page, eval's text): the user names the path, so a link there is written through
    (docs/RELIABILITY.md), but only onto a file fertility wrote; the user's file is refused."""
    got, link, before = _again(run, made, verb, place, "../mine/t.json", tmp_path, monkeypatch)
    code, out, err = got
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"error: {link}: exists and was not written by fertility" in err
    assert snapshot(tmp_path / "mine") == before


def test_a_manifest_that_is_a_link_is_not_the_folders_own(run, made, tmp_path, monkeypatch):
    """`OUT/.fertility-manifest.json -> ../mine/t.json`: the folder is then not known to be
    fertility's, so nothing in it is replaced, and the user's file is not rewritten as a
    manifest."""
    got, _, before = _again(run, made, "fix", MANIFEST, "../mine/t.json", tmp_path, monkeypatch)
    code, out, err = got
    assert code == 2 and "was not made by `fertility fix`" in err, err
    assert snapshot(tmp_path / "mine") == before


# ---------------------------------------------------------------- the functions every verb calls


@pytest.fixture()
def planted(tmp_path):
    """OUT, a folder of fertility's (its manifest lists heldout/ and sub/), with
    `heldout/bn.jsonl -> ../../mine/en.jsonl` and `sub -> ../mine`; and mine's snapshot."""
    out, mine = tmp_path / "OUT", tmp_path / "mine"
    (out / "heldout").mkdir(parents=True)
    mine.mkdir()
    (mine / "en.jsonl").write_text('{"text": "the user\'s English"}\n')
    (out / "heldout" / "bn.jsonl").symlink_to("../../mine/en.jsonl")
    (out / "sub").symlink_to("../mine")
    record(out, ["heldout/", "sub/"], made_by="fix")
    return out, mine, snapshot(mine)


def test_each_write_replace_and_delete_refuses_a_link_on_the_way(planted, tmp_path):
    out, mine, before = planted
    staged = tmp_path / "staged.jsonl"
    staged.write_text("new\n")
    attempts = {
        "heldout/bn.jsonl": [
            lambda rel: inside(out, rel),
            lambda rel: remove(out, rel),
            lambda rel: write_inside(out, rel, "new\n"),
            lambda rel: open_inside(out, rel),
            lambda rel: open_inside(out, rel, append=True),  # the trainer's metrics.jsonl
            lambda rel: replace_inside(staged, out, rel),
        ],
        "sub": [lambda rel: remove(out, rel), lambda rel: make_inside(out, rel)],
        "sub/en.jsonl": [
            lambda rel: remove(out, rel),
            lambda rel: write_inside(out, rel, "new\n"),
            lambda rel: open_inside(out, rel, binary=True),
        ],
        "sub/deeper/x": [lambda rel: make_inside(out, rel)],
    }
    for rel, calls in attempts.items():
        link = out / rel.split("/")[0] if rel.startswith("sub") else out / rel
        for call in calls:
            with pytest.raises(OutputError) as e:
                call(rel)
            assert str(e.value).startswith(f"{link}: is a symbolic link (to ")
    assert snapshot(mine) == before
    assert staged.read_text() == "new\n"  # not renamed onto the link
    assert (out / "heldout" / "bn.jsonl").is_symlink() and (out / "sub").is_symlink()


def test_the_named_folder_itself_may_be_a_link_and_plain_entries_are_written(planted, tmp_path):
    """The folder the user names (`--out LINK`) is resolved as named; only what lies below
    it is never followed."""
    out, mine, before = planted
    named = tmp_path / "named"
    named.symlink_to(out)
    assert inside(named, "heldout/en.jsonl") == named / "heldout/en.jsonl"
    write_inside(named, "heldout/en.jsonl", "ours\n")
    assert (out / "heldout" / "en.jsonl").read_text() == "ours\n"
    assert make_inside(out, "checkpoints/step-1").is_dir()
    with open_inside(out, "checkpoints/step-1/state.json") as f:
        f.write("{}\n")
    remove(out, "heldout/en.jsonl")
    assert not (out / "heldout" / "en.jsonl").exists()
    assert snapshot(mine) == before


def test_a_link_planted_at_a_temporary_name_is_not_written_through(tmp_path):
    """files.write_text_atomic's temporary `.NAME.fertility-partial-PID` is created with
    O_NOFOLLOW: a link there fails the write (naming the file), the target keeps its bytes."""
    from fertility.errors import FertilityError
    from fertility.files import partial_path, write_text_atomic

    theirs = tmp_path / "theirs.txt"
    theirs.write_text("the user's text\n")
    final = tmp_path / "report.txt"
    partial_path(final).symlink_to(theirs)
    with pytest.raises(FertilityError, match=f"^{final}: cannot write"):
        write_text_atomic(final, "report\n")
    assert theirs.read_text() == "the user's text\n" and not final.exists()


def test_the_heldout_writer_never_deletes_through_a_link(planted):
    """fix's and extend's held-out commit removes an earlier run's `*.jsonl`: a link among
    them is refused, not unlinked, and what it points to is kept."""
    from fertility.corpus.sampling import HeldoutWriter

    out, mine, before = planted
    temps: list[Path] = []
    writer = HeldoutWriter(out / "heldout", ["en"], temps)
    writer.write(SimpleNamespace(text="a new held-out line", lang="en", source="x", line=1))
    with pytest.raises(OutputError, match="bn.jsonl: is a symbolic link"):
        writer.commit()
    assert snapshot(mine) == before


def test_checkpoints_are_never_written_or_swept_through_a_link(tmp_path):
    """`RUN/checkpoints -> ../mine` met by the trainer itself (the claim refuses it first):
    no checkpoint written into mine/, its `.tmp-*` folder not swept."""
    torch = pytest.importorskip("torch")
    from fertility.errors import TrainingError
    from fertility.trainer.checkpoint import remove_partial, save_checkpoint

    run_dir, mine = tmp_path / "run", tmp_path / "mine"
    (mine / ".tmp-mine").mkdir(parents=True)
    (mine / ".tmp-mine" / "draft.txt").write_text("the user's draft\n")
    run_dir.mkdir()
    (run_dir / "checkpoints").symlink_to("../mine")
    before = snapshot(mine)
    with pytest.raises(TrainingError, match="checkpoints: is a symbolic link"):
        remove_partial(run_dir)
    with pytest.raises(TrainingError, match="checkpoints: is a symbolic link"):
        save_checkpoint(run_dir, 1, {"w": torch.zeros(2)}, {}, {"tokens_seen": 0})
    assert snapshot(mine) == before
