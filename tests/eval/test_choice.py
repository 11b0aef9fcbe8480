"""Multiple choice: task files are validated line by line; acc, acc_norm by characters and by
bytes (without the leading delimiter, as lm-eval), chance, the Wilson interval and the
verdict are right on hand-made items; the model scorer sums exactly the choice's tokens; a
random model cannot be told from chance on the example tasks."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fertility.errors import EvalError
from fertility.eval import choice
from fertility.tokenizers import load_tokenizer
from fertility.tokenizers.base import Encoded
from fertility.trainer.model import Transformer, config_from_preset
from tests.bpe import byte_level_bpe

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASKS = [EXAMPLES / "tasks" / "cloze_en.jsonl", EXAMPLES / "tasks" / "cloze_bn.jsonl"]


class Stub:
    """A scorer that returns the log-likelihoods the test sets, per (context, choice)."""

    def __init__(self, table):
        self.table = table
        self.seen = []

    def loglikelihoods(self, pairs):
        self.seen += list(pairs)
        return [self.table[p] for p in pairs]


def item(context, choices, label, **kw):
    return choice.Item(context, tuple(choices), label, **kw)


# -- task files ------------------------------------------------------------------------------


def test_example_task_files_load():
    for path in TASKS:
        items = choice.load_items(path)
        assert len(items) == 40
        assert {len(it.choices) for it in items} == {4}
        assert sorted(np.bincount([it.label for it in items]).tolist()) == [10, 10, 10, 10]
        assert items[0].line == 1 and items[0].id.endswith("-001")


GOOD = {"context": "The sky is", "choices": [" blue.", " green."], "label": 0}


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        (json.dumps({**GOOD, "label": 2}), "label 2 is out of range for 2 choices"),
        (json.dumps({**GOOD, "label": -1}), "label -1 is out of range"),
        (json.dumps({**GOOD, "label": "0"}), '"label" must be an integer'),
        (json.dumps({**GOOD, "label": True}), '"label" must be an integer'),
        (json.dumps({k: v for k, v in GOOD.items() if k != "label"}), '"label" must be an integer'),
        (json.dumps({**GOOD, "choices": [" blue."]}), "1 choice\\(s\\); at least 2"),
        (json.dumps({**GOOD, "choices": " blue."}), '"choices" must be a list of strings'),
        (json.dumps({**GOOD, "choices": [" blue.", ""]}), "choice 1 is empty"),
        (json.dumps({**GOOD, "context": None}), '"context" must be a string'),
        (json.dumps({**GOOD, "lang": 3}), '"lang" must be a string'),
    ],
)
def test_a_bad_line_is_an_eval_error_naming_file_and_line(tmp_path, bad, message):
    path = tmp_path / "task.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad + "\n" + json.dumps(GOOD) + "\n")
    with pytest.raises(EvalError, match=f"task.jsonl:3: {message}"):
        choice.load_items(path)


def test_missing_empty_and_duplicate_id_task_files(tmp_path):
    with pytest.raises(EvalError, match="nope.jsonl: task file not found"):
        choice.load_items(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(EvalError, match="empty.jsonl: no items"):
        choice.load_items(tmp_path / "empty.jsonl")
    dup = tmp_path / "dup.jsonl"
    dup.write_text("\n".join(json.dumps({**GOOD, "id": "a"}) for _ in range(2)))
    with pytest.raises(EvalError, match="dup.jsonl:2: id 'a' repeats line 1"):
        choice.load_items(dup)


# -- metrics ----------------------------------------------------------------------------------


def test_acc_norm_by_characters_and_by_bytes_disagree_where_they_must():
    # Two choices of 5 characters each: Latin (5 bytes) and Bengali (1 + 4*3 = 13 bytes).
    latin, bengali = " abcd", " কখগঘ"
    assert len(latin) == len(bengali) == 5
    it = item("ctx", [latin, bengali], label=1)
    stub = Stub({("ctx", latin): -10.0, ("ctx", bengali): -20.0})
    row = choice.score_task([it], stub)
    # summed: -10 > -20 picks Latin; per character: -2 > -4 picks Latin;
    # per byte: -10/5 = -2 < -20/13 = -1.54 picks Bengali, the label
    assert (row["acc"], row["acc_norm_chars"], row["acc_norm_bytes"]) == (0.0, 0.0, 1.0)
    assert stub.seen == [("ctx", latin), ("ctx", bengali)]


def test_acc_norm_divides_by_the_choice_without_its_leading_delimiter():
    # lm-eval divides by len(choice) of the choice without its target delimiter " ":
    # " ab" counts 2 characters, " abcd" 4. With the space counted, -2/3 > -3.5/5 would
    # pick " ab"; without it, -2/2 < -3.5/4 picks " abcd", the label. Bytes likewise.
    it = item("ctx", [" ab", " abcd"], label=1)
    row = choice.score_task([it], Stub({("ctx", " ab"): -2.0, ("ctx", " abcd"): -3.5}))
    assert (row["acc"], row["acc_norm_chars"], row["acc_norm_bytes"]) == (0.0, 1.0, 1.0)


def test_accuracy_chance_and_interval_on_hand_made_items():
    items = [
        item("a", ["x", "y"], 0),
        item("b", ["x", "y", "z"], 2),
        item("c", ["x", "yy", "z", "w"], 1),
    ]
    table = {
        ("a", "x"): -1.0,
        ("a", "y"): -2.0,  # right
        ("b", "x"): -1.0,
        ("b", "y"): -3.0,
        ("b", "z"): -2.0,  # wrong
        ("c", "x"): -1.5,
        ("c", "yy"): -2.0,
        ("c", "z"): -4.0,
        ("c", "w"): -9.0,
    }
    row = choice.score_task(items, Stub(table), name="hand")
    assert row["task"] == "hand" and row["n"] == 3
    # acc is the mean of booleans: an exact integer sum and one correctly rounded division,
    # as 1 / 3 is here: exact. chance sums three float64 fractions (a few ulps; approx's
    # default rel=1e-6 is only that, and an item left out moves it by 0.03 or more).
    assert row["acc"] == 1 / 3
    # per character, "yy" scores -1.0 and beats "x" at -1.5: item c turns right
    assert row["acc_norm_chars"] == 2 / 3
    assert row["chance"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
    lo, hi = row["ci95"]
    p, z, n = 1 / 3, 1.959963984540054, 3
    for bound in (lo, hi):  # the Wilson bounds solve (p - b)^2 = z^2 b (1 - b) / n
        # float64 with no cancellation to speak of (|p - b| >= 0.27): both sides agree to a
        # few ulps; approx's rel=1e-6 is rounding only (a Wald bound misses it by over 10%)
        assert (p - bound) ** 2 == pytest.approx(z * z * bound * (1 - bound) / n)
    assert row["verdict"] == "not distinguishable from chance (3 items)"


def test_wilson_matches_published_values():
    # Published to 4 places (<= 5e-5 from the exact bound): abs=1e-4 is 2x that. z = 2 for
    # 1.96 moves these bounds by 1e-3 to 8e-3, a Wald interval (0.345 for 20 of 40) by 7e-3.
    assert choice.wilson(20, 40) == pytest.approx((0.3520, 0.6480), abs=1e-4)
    assert choice.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert choice.wilson(8, 10) == pytest.approx((0.4902, 0.9433), abs=1e-4)


@pytest.mark.parametrize(
    "right, n, expected",
    [
        (30, 40, "above chance"),
        (10, 40, "not distinguishable from chance (40 items)"),
        (12, 40, "not distinguishable from chance (40 items)"),
        (0, 40, "below chance"),
        (2, 6, "not distinguishable from chance (6 items)"),
        (400, 1000, "above chance"),
        (220, 1000, "below chance"),
    ],
)
def test_verdict(right, n, expected):
    items = [item("c", ["r", "w", "v", "u"], 0) for _ in range(n)]
    stub = Stub({})
    stub.loglikelihoods = lambda pairs: [
        (0.0 if c == "r" else -1.0) if i // 4 < right else (-1.0 if c == "r" else 0.0)
        for i, (_, c) in enumerate(pairs)
    ]
    row = choice.score_task(items, stub)
    assert row["acc"] == right / n  # exact: a mean of booleans is integer sum / n
    assert row["verdict"] == expected


# -- the model scorer -------------------------------------------------------------------------


class PairTokenizer:
    """Two characters per token, so a token can straddle the context/choice boundary."""

    def encode_batch(self, texts):
        out = []
        for t in texts:
            starts = np.arange(0, len(t), 2)
            ends = np.minimum(starts + 2, len(t))
            ids = np.array([(ord(t[s]) * 7 + ord(t[e - 1])) % 50 + 1 for s, e in zip(starts, ends)])
            out.append(Encoded(ids, starts, ends))
        return out


def tiny_model(vocab, max_seq_len=32, seed=0):
    torch.manual_seed(seed)
    return Transformer(config_from_preset("tiny", vocab, {"max_seq_len": max_seq_len})).eval()


def test_model_scorer_sums_the_tokens_that_reach_into_the_choice():
    model = tiny_model(64)
    tok = PairTokenizer()
    scorer = choice.ModelScorer(model, tok, context=32, prefix_id=0)
    ctx, cont = "abcde", "fghi"  # tokens ab cd ef gh i: "ef" straddles, 3 choice tokens
    (got, empty) = scorer.loglikelihoods([(ctx, cont), ("", "abcd")])
    # a non-empty context is given as it stands (no separator in front), as lm-eval does
    ids = tok.encode_batch([ctx + cont])[0].ids.tolist()
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids[:-1]])), -1)[0]
    want = sum(logp[t - 1, ids[t]].item() for t in (2, 3, 4))
    # For the four checks below: float32 log-softmax over 64 logits per token, batched and
    # padded by the scorer against one plain forward here. Another order: worst 64 x 6e-8
    # = 4e-6 per token plus the logits' share, ~1.5e-5 for 3 tokens, over the old 1e-5
    # (measured: bitwise equal, 1e-7 from float64). abs=1e-4 (was 1e-5) leaves 7x on the
    # worst case; a token left out or scored twice is ~4 nats, a shifted context ~0.1.
    assert got == pytest.approx(want, abs=1e-4)
    # an empty context is the separator alone: every token of the choice is scored
    ids = [0] + tok.encode_batch(["abcd"])[0].ids.tolist()
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids[:-1]])), -1)[0]
    assert empty == pytest.approx(logp[0, ids[1]].item() + logp[1, ids[2]].item(), abs=1e-4)
    # no separator: position 0 is never predicted, so a choice starting there loses it
    bare = choice.ModelScorer(model, tok, context=32, prefix_id=None)
    (got0,) = bare.loglikelihoods([("", "abcd")])
    ids = tok.encode_batch(["abcd"])[0].ids.tolist()
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids[:-1]])), -1)[0]
    assert got0 == pytest.approx(logp[0, ids[1]].item(), abs=1e-4)


def test_model_scorer_keeps_the_last_context_tokens_of_a_long_item():
    model = tiny_model(64, max_seq_len=8)
    tok = PairTokenizer()
    scorer = choice.ModelScorer(model, tok, context=8, prefix_id=0)
    ctx, cont = "x" * 40, "yz"
    (got,) = scorer.loglikelihoods([(ctx, cont)])
    ids = tok.encode_batch([ctx + cont])[0].ids.tolist()[-9:]
    with torch.no_grad():
        logp = F.log_softmax(model(torch.tensor([ids[:-1]])), -1)[0]
    # one float32 log-softmax, as in the test above: abs=1e-4 (was 1e-5) for the same reason
    assert got == pytest.approx(logp[-1, ids[-1]].item(), abs=1e-4)
    assert scorer.truncated == 1


def test_a_random_model_is_not_distinguishable_from_chance_on_the_example_tasks(tmp_path):
    lines = [
        x
        for g in ("en", "bn")
        for x in (EXAMPLES / "corpus" / f"{g}.txt").read_text("utf-8").splitlines()
        if x.strip()
    ]
    byte_level_bpe(lines, 400, specials=["<|endoftext|>"], path=tmp_path / "tok.json")
    tok = load_tokenizer(str(tmp_path / "tok.json"))
    model = tiny_model(tok.vocab_size, max_seq_len=128, seed=5)
    scorer = choice.ModelScorer(model, tok, context=128, prefix_id=0)
    for path in TASKS:
        row = choice.score_task(choice.load_items(path), scorer, name=path.stem)
        assert row["chance"] == 0.25 and row["n"] == 40
        for key in ("ci95", "ci95_norm_chars", "ci95_norm_bytes"):
            lo, hi = row[key]
            assert lo <= 0.25 <= hi, (path.name, key, row)
        assert row["verdict"] == "not distinguishable from chance (40 items)"


# -- converting lm-evaluation-harness records -----------------------------------------------------


def test_lm_eval_style_records_convert_and_load(tmp_path):
    from fertility.eval.convert import convert_file

    src = tmp_path / "mixed.jsonl"
    records = [
        {"query": "Q1", "choices": ["a", "b"], "gold": 1, "id": 7},
        {"ctx": "A man", "endings": ["sits.", "runs.", "eats."], "label": "2"},
        {
            "question": "Which?",
            "choices": {"text": ["x", "y", "z"], "label": ["A", "B", "C"]},
            "answerKey": "C",
        },
        {
            "question": "Which?",
            "choices": {"text": ["x", "y"], "label": ["1", "2"]},
            "answerKey": "2",
        },
        {"goal": "Open a jar", "sol1": "twist", "sol2": "burn", "label": 0},
    ]
    src.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    dst = tmp_path / "task.jsonl"
    assert convert_file(src, dst, lang="en") == 5
    items = choice.load_items(dst)
    assert [(it.context, it.choices, it.label) for it in items] == [
        ("Q1", (" a", " b"), 1),
        ("A man", (" sits.", " runs.", " eats."), 2),
        ("Question: Which?\nAnswer:", (" x", " y", " z"), 2),
        ("Question: Which?\nAnswer:", (" x", " y"), 1),
        ("Question: Open a jar\nAnswer:", (" twist", " burn"), 0),
    ]
    assert items[0].id == "7" and items[1].id == "mixed-2" and items[0].lang == "en"


def test_named_fields_and_bad_records(tmp_path):
    from fertility.eval.convert import convert_file

    src = tmp_path / "named.jsonl"
    src.write_text(json.dumps({"stem": "2+2=", "opts": ["4", "5"], "ans": "A"}) + "\n")
    assert (
        convert_file(
            src,
            tmp_path / "out.jsonl",
            context_field="stem",
            choices_field="opts",
            label_field="ans",
            delimiter="",
        )
        == 1
    )
    assert choice.load_items(tmp_path / "out.jsonl")[0].choices == ("4", "5")
    for bad, message in [
        ({"query": "q", "choices": ["a", "b"], "gold": 3}, "label 3 is out"),
        ({"query": "q", "choices": ["a"], "gold": 0}, "at least 2"),
        ({"text": "q"}, "fits no known record shape"),
        ({"ctx": "q", "endings": ["a", "b"], "label": "?"}, "not an index"),
    ]:
        src.write_text(json.dumps(GOOD) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(EvalError, match=f"named.jsonl:2: .*{message}"):
            convert_file(src, tmp_path / "never.jsonl")
        assert not (tmp_path / "never.jsonl").exists()


@pytest.mark.parametrize(
    "text, where",
    [
        (
            '{"query": "q", "choices": ["a", "b"], "gold": 0}\n' + "[" * 100_000 + "\n",
            "deep.jsonl:2: JSON nested too deeply",
        ),
        ("[" * 100_000, "deep.jsonl: JSON nested too deeply"),
        (
            '{"query": "q", "choices": ["a", "b"], "gold": ' + "9" * 5000 + "}\n",
            "deep.jsonl:1: not valid JSON (Exceeds the limit",
        ),
    ],
)
def test_convert_of_json_the_decoder_cannot_read_is_one_line(tmp_path, capsys, text, where):
    from fertility.eval.convert import main

    src = tmp_path / "deep.jsonl"
    src.write_text(text)
    assert main([str(src), str(tmp_path / "never.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and where in err, err
    assert not (tmp_path / "never.jsonl").exists()
