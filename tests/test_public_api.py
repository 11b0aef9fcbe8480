"""The public names of `fertility` work whatever was imported before them, and the library's
report is the command's report."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import fertility
from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"


def import_everything() -> list[str]:
    """Import every module of the package (trainer and eval installed inside it), as a program
    using all of them would."""
    names = []
    for package in ("fertility", "fertility.trainer", "fertility.eval"):
        pkg = importlib.import_module(package)
        for info in pkgutil.walk_packages(pkg.__path__, package + "."):
            importlib.import_module(info.name)
            names.append(info.name)
    return names


@pytest.fixture(scope="module")
def naive(tmp_path_factory):
    """A byte-level BPE with GPT-2's split: it cuts Bengali words at their vowel signs."""
    path = tmp_path_factory.mktemp("tok") / "naive.json"
    lines = [
        line
        for f in sorted(CORPUS.glob("*.txt"))
        for line in f.read_text(encoding="utf-8").splitlines()
    ]
    byte_level_bpe(lines, 600, path=path)
    return path


def test_every_public_name_works_after_every_module_is_imported(naive, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no fertility.toml or pyproject.toml policy around
    imported = import_everything()
    assert {
        "fertility.findings",
        "fertility.gate",
        "fertility.trainer.run",
        "fertility.eval.run",
    } <= set(imported)
    calls = {
        "load_tokenizer": lambda: fertility.load_tokenizer(str(naive)),
        "analyze": lambda: fertility.analyze([str(CORPUS)], [f"naive={naive}"]),
    }
    assert set(fertility.__all__) == {*calls, "diagnose", "gate", "Report", "FertilityError"}

    tok = calls["load_tokenizer"]()
    assert tok.kind == "hf" and tok.encode_batch(["বাংলা"])[0].ids.size > 0
    report = calls["analyze"]()
    assert isinstance(report, fertility.Report)
    found = fertility.diagnose(report)  # the function, though the module was imported first
    assert {"mark-split"} <= {f.rule for f in found}
    assert fertility.diagnose is importlib.import_module("fertility.findings").diagnose
    from fertility.policy import default_policy

    result = fertility.gate.evaluate(report, default_policy(), label="naive")
    assert result.exit_code in (0, 1) and result.findings
    with pytest.raises(fertility.FertilityError) as err:
        fertility.load_tokenizer(str(tmp_path / "missing.json"))
    assert err.value.exit_code == 2


def test_analyze_gives_the_report_of_fertility_report_json(naive, tmp_path, monkeypatch, run):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run("report", CORPUS, "-t", f"naive={naive}", "--format", "json")
    assert code == 0
    command = json.loads(out)
    library = json.loads(fertility.analyze([str(CORPUS)], [f"naive={naive}"]).to_json())
    assert command["findings"] and library == command  # findings included, nothing differs


def test_analyze_takes_the_command_policy(naive, tmp_path, monkeypatch, run):
    """A Latin floor above any ceiling: both find the ceiling error the default does not."""
    monkeypatch.chdir(tmp_path)
    policy = tmp_path / "policy.toml"
    policy.write_text("[floors.script]\nLatn = 50\n", encoding="utf-8")
    code, out, _ = run(
        "report", CORPUS, "-t", f"naive={naive}", "--format", "json", "--policy", policy
    )
    library = fertility.analyze([str(CORPUS)], [f"naive={naive}"], policy=policy)
    assert code == 0 and json.loads(library.to_json()) == json.loads(out)
    default = fertility.analyze([str(CORPUS)], [f"naive={naive}"])
    new = {(f.rule, f.key) for f in library.findings} - {(f.rule, f.key) for f in default.findings}
    assert new == {("pretokenizer-ceiling", "Latn")}
    bare = fertility.analyze([str(CORPUS)], [f"naive={naive}"], findings=False)
    assert bare.findings is None and "findings" not in bare.to_dict()  # not diagnosed


def test_submodules_are_reachable_after_import_fertility_alone():
    """`import fertility` then `fertility.policy.default_policy()`, in a fresh interpreter
    (in this one other tests have imported everything already)."""
    code = (
        "import fertility, sys\n"
        "assert 'fertility.policy' not in sys.modules\n"
        "print(type(fertility.policy.default_policy()).__name__, fertility.options.Severity)\n"
        "try:\n    fertility.no_such_module\nexcept AttributeError:\n    print('refused')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0].startswith("Policy typing.Literal['error', 'warning', 'info']")
    assert out[1] == "refused"
