"""Non-finite numbers in a gate policy: `fertility gate --policy FILE` refuses nan and inf in
every table with one line naming the file and the key, exit 2, before measuring anything.

nan compares false with everything, so a `nan` bound made its rule never fire (the gate
passed what it should block); inf passes an open upper bound (`premium = inf` checks nothing).
"""

from pathlib import Path

import pytest

from tests.bpe import byte_level_bpe

CORPUS = Path(__file__).resolve().parent.parent / "examples" / "corpus"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    (root / "bn.txt").write_text((CORPUS / "bn.txt").read_text())
    byte_level_bpe((CORPUS / "bn.txt").read_text().splitlines(), 400, path=root / "tokenizer.json")
    return root / "bn.txt", root / "tokenizer.json"


@pytest.mark.parametrize(
    "text, key",
    [
        ("[rules]\nmark_initial_rate = nan\n", "rules.mark_initial_rate"),
        ("[rules]\ngrapheme_split_rate = inf\n", "rules.grapheme_split_rate"),
        ("[rules]\npremium = -inf\n", "rules.premium"),
        ("[rules]\nflip_margin = -nan\n", "rules.flip_margin"),
        ("[ceilings]\npremium = inf\n", "ceilings.premium"),
        ("[ceilings]\nunk_rate = nan\n", "ceilings.unk_rate"),
        ("[ceilings]\nbyte_fallback_rate = inf\n", "ceilings.byte_fallback_rate"),
        ("[floors]\ndefault = inf\n", "floors.default"),
        ("[floors.script]\nBeng = nan\n", "floors.script.Beng"),
        ("[floors.language]\nbn = inf\n", "floors.language.bn"),
        ("baseline_margin = nan\n", "baseline_margin"),
        ("min_share = nan\n", "min_share"),
    ],
)
def test_non_finite_policy_number_is_exit_2_naming_file_and_key(run, setup, tmp_path, text, key):
    corpus, tokenizer = setup
    policy = tmp_path / "policy.toml"
    policy.write_text(text)
    code, out, err = run("gate", corpus, "-t", tokenizer, "--policy", policy, "-q")
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: ") and str(policy) in lines[0] and key in lines[0]
    assert out == ""


def test_the_same_keys_with_finite_numbers_are_accepted(run, setup, tmp_path):
    """The refusal is about the value, not the key: finite numbers in the same places run the
    gate to a verdict (0 or 1)."""
    corpus, tokenizer = setup
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "baseline_margin = 0.05\n[rules]\nmark_initial_rate = 0.02\n"
        "[ceilings]\npremium = 3.0\nunk_rate = 0.5\n[floors]\ndefault = 1.0\n"
    )
    code, _, err = run("gate", corpus, "-t", tokenizer, "--policy", policy, "-q")
    assert code in (0, 1), err
