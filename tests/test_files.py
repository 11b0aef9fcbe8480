"""fertility.files: the one way every command writes a whole file (reports, run.json,
metrics, fix and extend outputs)."""

import os

import pytest

from fertility.errors import EvalError, FixError
from fertility.files import write_text_atomic


def test_reader_of_the_old_file_sees_it_whole(tmp_path):
    path = tmp_path / "r.txt"
    path.write_text("old text\n")
    with open(path) as reader:  # opened before the write: the rename leaves its file alone
        write_text_atomic(path, "new text\n")
        assert reader.read() == "old text\n"
    assert path.read_text() == "new text\n"


def test_chain_of_symlinks_and_a_dangling_one_are_written_through(tmp_path):
    target = tmp_path / "target.txt"
    middle, top = tmp_path / "middle", tmp_path / "top"
    middle.symlink_to(target)  # dangling until the write creates the target
    top.symlink_to(middle)
    write_text_atomic(top, "through\n")
    assert top.is_symlink() and middle.is_symlink() and not target.is_symlink()
    assert target.read_text() == "through\n"
    assert sorted(os.listdir(tmp_path)) == ["middle", "target.txt", "top"]  # no temporary


def test_failure_is_the_callers_error_naming_the_file(tmp_path):
    missing = tmp_path / "no-such-folder" / "r.txt"
    with pytest.raises(EvalError) as err:
        write_text_atomic(missing, "x", EvalError)
    assert str(err.value) == f"{missing}: cannot write (No such file or directory)"
    with pytest.raises(FixError, match="empty output file name"):
        write_text_atomic("", "x", FixError)
