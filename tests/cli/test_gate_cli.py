"""`fertility gate` through the command: exit 1 on the published failure, 0 on pass, 2 on bad
input, and JUnit XML a CI system can read."""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"


@pytest.fixture(scope="module")
def naive(tmp_path_factory):
    """A byte-level BPE with the GPT-2 pre-tokenizer on Bangla-weighted example text."""
    lines = (CORPUS / "bn.txt").read_text().splitlines() * 3
    lines += (CORPUS / "en.txt").read_text().splitlines()
    path = tmp_path_factory.mktemp("naive") / "tokenizer.json"
    byte_level_bpe(lines, 1500, path=path)
    return path


@pytest.fixture()
def bn_en(tmp_path):
    (tmp_path / "corpus").mkdir()  # outputs (--junit) go beside it: never inside a corpus
    for lang in ("bn", "en"):
        (tmp_path / "corpus" / f"{lang}.txt").write_text((CORPUS / f"{lang}.txt").read_text())
    return tmp_path / "corpus"


def test_naive_gpt2_bpe_fails_with_mark_split_and_junit(run, bn_en, naive, tmp_path):
    junit = tmp_path / "gate.xml"
    code, out, _ = run("gate", str(bn_en), "-t", f"naive={naive}", "--junit", str(junit), "-q")
    assert code == 1
    assert "mark-split" in out and "FAIL" in out
    root = ET.parse(junit).getroot()
    cases = root.iter("testcase")
    assert any(c.find("failure") is not None for c in cases)


def test_json_verdict(run, bn_en, naive):
    code, out, _ = run("gate", str(bn_en), "-t", str(naive), "--format", "json", "-q")
    data = json.loads(out)
    assert code == 1 and data["passed"] is False
    beng = [c for c in data["checks"] if c["key"] == "Beng" and c["name"] == "chars_per_token"]
    assert beng and beng[0]["verdict"] == "fail" and beng[0]["hi"] < beng[0]["threshold"]


def test_lenient_policy_passes_exit_0(run, bn_en, naive, tmp_path_factory):
    policy = tmp_path_factory.mktemp("policy") / "lenient.toml"
    policy.write_text(
        'fail_on = []\nuncertain = "pass"\n\n[floors]\ndefault = 1.0\n'
        "\n[floors.script]\nBeng = 1.0\nLatn = 1.0\n\n[ceilings]\npremium = false\n"
    )
    code, out, err = run("gate", str(bn_en), "-t", str(naive), "--policy", str(policy), "-q")
    assert code == 0, out + err


def test_bad_policy_is_exit_2(run, bn_en, naive, tmp_path_factory):
    policy = tmp_path_factory.mktemp("policy") / "bad.toml"
    policy.write_text("no_such_key = 3\n")
    code, _, err = run("gate", str(bn_en), "-t", str(naive), "--policy", str(policy))
    assert code == 2 and "bad.toml" in err and "no_such_key" in err


def test_text_is_verdict_first_fits_the_terminal_and_groups_findings(
    run, bn_en, naive, monkeypatch
):
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run("gate", str(bn_en), "-t", f"naive={naive}", "-q")
    lines = out.splitlines()
    assert code == 1 and max(len(x) for x in lines) <= 100
    assert lines[0].startswith("fertility gate: FAIL (naive;")
    # (a header wraps onto lines above its last: the row under the dashes is the verdict)
    dash = next(i for i, x in enumerate(lines) if x.startswith("-------"))
    assert lines[dash - 1].split()[:2] == ["verdict", "tokenizer"]
    assert lines[dash + 1].split()[:2] == ["FAIL", "naive"]
    # the GPT-2 split cuts Bengali vowel signs: the rule's heading, a line naming the script
    head = next(i for i, x in enumerate(lines) if x.startswith("error mark-split "))
    assert lines[head + 1].split()[0] == "naive" and "Beng" in lines[head + 1]
    assert [x for x in lines if x.startswith("verdict: FAIL")]
    code, full, _ = run("gate", str(bn_en), "-t", f"naive={naive}", "-q", "-v")
    # (wrapped to the width: continued lines are indented)
    text = re.sub(r"\n  ", " ", full)
    (line,) = [x for x in text.splitlines() if x.startswith("ERROR naive mark-split script=Beng")]
    assert "Fix: " in line and "\\p{M}" in line
