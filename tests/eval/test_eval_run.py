"""`evaluate` on a real run folder: a tiny model trained briefly by `fertility.trainer.run.pretrain` on
the examples corpus is clearly below its random twin, which sits at ln(V); the JSON carries
the documented fields; flags fire where they must; every bad input is a one-line EvalError
naming the file."""

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from fertility.errors import EvalError
from fertility.eval import nll
from fertility.eval.choice import VERDICTS
from fertility.eval.render import render_json, render_text
from fertility.eval.run import SCHEMA, evaluate
from fertility.tokenizers import load_tokenizer
from fertility.trainer.checkpoint import latest_checkpoint, save_checkpoint
from fertility.trainer.model import ModelConfig, Transformer
from tests.bpe import byte_level_bpe
from tests.trainer.tokfixture import PassingGate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TASKS = [EXAMPLES / "tasks" / "cloze_en.jsonl", EXAMPLES / "tasks" / "cloze_bn.jsonl"]
SEP = "<|endoftext|>"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    from fertility.trainer.options import PretrainOptions
    from fertility.trainer.run import pretrain

    root = tmp_path_factory.mktemp("evalrun")
    lines = [
        x
        for f in sorted((EXAMPLES / "corpus").glob("*.txt"))
        for x in f.read_text("utf-8").splitlines()
        if x.strip()
    ]
    byte_level_bpe(lines, 512, specials=[SEP], path=root / "tokenizer.json")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: one thread is fastest, and steady on a busy CPU
    try:
        options = PretrainOptions(
            [str(EXAMPLES / "corpus")],
            str(root / "tokenizer.json"),
            root / "run",
            preset="tiny",
            steps=50,
            device="cpu",
            quiet=True,
            settings={
                "seq_len": 64,
                "micro_batch": 8,
                "lr": 3e-3,
                "min_lr": 3e-4,
                "warmup_steps": 10,
                "heldout_fraction": 0.1,
                "checkpoint_every": 25,
                "tokenize_workers": 1,
            },
        )
        pretrain(options, gate=lambda p, t: PassingGate())
    finally:
        torch.set_num_threads(threads)
    return root / "run"


@pytest.fixture(scope="module")
def result(run_dir):
    return evaluate(run_dir, tasks=TASKS, bootstrap=300)


def heldout(run_dir):
    return [
        json.loads(x)
        for x in (run_dir / "data" / "heldout.jsonl").read_text("utf-8").splitlines()
        if x.strip()
    ]


def copy_run(run_dir, tmp_path):
    dest = tmp_path / "run"
    shutil.copytree(run_dir, dest)
    return dest


def test_trained_model_is_clearly_below_its_twin_which_sits_at_ln_v(run_dir, result):
    ln_v = math.log(512)
    rows = {(r["group"], r["key"]): r for r in result["lm"]}
    all_ = rows[("all", "all")]
    assert result["reference"]["ln_vocab"] == ln_v  # exact: the same math.log(512)
    assert abs(all_["twin_nll_per_token"] - ln_v) < 0.1
    assert all_["nll_per_token"] < ln_v - 1.5
    assert all_["twin_minus_model_ci95"][0] > 1.0  # paired interval, clearly above zero
    assert not [f for f in result["flags"] if f["key"] == "all"]
    # every language of the held-out split has its row, and is below its twin too
    docs = heldout(run_dir)
    assert {k for g, k in rows if g == "language"} == {d["lang"] for d in docs}
    for (g, _), r in rows.items():
        assert r["nll_per_token"] < r["twin_nll_per_token"]


def test_counts_match_the_heldout_text_recounted(run_dir, result):
    docs = heldout(run_dir)
    held, rows = result["heldout"], {(r["group"], r["key"]): r for r in result["lm"]}
    assert held["documents"] == len(docs)
    assert held["source"].endswith("heldout.jsonl")
    # separator prepended: every token of every document is scored, every byte counts
    tok = load_tokenizer(str(run_dir / "tokenizer" / "tokenizer.json"))
    assert result["scoring"]["separator"] == tok.special_tokens[SEP]
    lengths = [len(e.ids) for e in tok.encode_batch([d["text"] for d in docs])]
    assert rows[("all", "all")]["tokens"] == sum(lengths)
    assert held["windowed_documents"] == sum(n > 64 for n in lengths) > 0
    assert result["scoring"]["context"] == 64
    nbytes = sum(len(d["text"].encode("utf-8")) for d in docs)
    assert rows[("all", "all")]["bytes"] == nbytes
    bpb = rows[("all", "all")]["nll_per_token"] * sum(lengths) / math.log(2) / nbytes
    # the row's total NLL / bytes / ln 2 against its mean per token x tokens / bytes / ln 2:
    # float64, a few roundings (~1e-15); rel=1e-9 is rounding only, and per character
    # instead of per byte would be about 2x off (the examples average 2.1 bytes a character)
    assert rows[("all", "all")]["bits_per_byte"] == pytest.approx(bpb, rel=1e-9)
    # the gap to the twin per byte, from the gap per token the same way, in every row
    for r in rows.values():
        gap = r["twin_minus_model"] * r["tokens"] / r["bytes"] / math.log(2)
        assert r["twin_minus_model_bits_per_byte"] == pytest.approx(gap, rel=1e-9)


def test_json_carries_the_documented_fields(result):
    data = json.loads(render_json(result))
    assert data["schema"] == SCHEMA == "fertility.eval/1"
    for row in data["lm"]:
        for key in (
            "group",
            "key",
            "documents",
            "tokens",
            "bytes",
            "chars",
            "nll_per_token",
            "nll_per_token_ci95",
            "twin_nll_per_token",
            "twin_nll_per_token_ci95",
            "perplexity",
            "bits_per_byte",
            "bits_per_byte_ci95",
            "bits_per_char",
            "bits_per_char_ci95",
            "twin_minus_model",
            "twin_minus_model_ci95",
            "twin_minus_model_bits_per_byte",
            "twin_minus_model_bits_per_byte_ci95",
        ):
            assert key in row, key
    assert [t["task"] for t in data["tasks"]] == ["cloze_en", "cloze_bn"]
    for t in data["tasks"]:
        assert t["n"] == 40 and t["chance"] == 0.25 and t["verdict"].startswith(VERDICTS)
        for key in ("acc", "acc_norm_chars", "acc_norm_bytes"):
            assert 0 <= t[key] <= 1
        assert t["ci95"][0] <= t["acc"] <= t["ci95"][1]
    assert data["run"]["step"] == 50
    text = render_text(result)
    assert "ln V = 6.238" in text and "rolling windows" in text
    # the gap to the twin, the "all" row of its table: nats/token [95%], bits/byte [95%]
    all_ = next(r for r in data["lm"] if r["group"] == "all")
    gaps = text.split("\ngap to the twin", 1)[1].splitlines()
    cells = next(x for x in gaps if x.split()[:2] == ["all", "all"]).split()[2:]
    want = [all_[k] for k in ("twin_minus_model", "twin_minus_model_bits_per_byte")]
    lo, hi = all_["twin_minus_model_bits_per_byte_ci95"]
    assert [cells[0], cells[3], cells[4], cells[5]] == [
        f"{want[0]:.3f}",
        f"{want[1]:.3f}",
        f"[{lo:.3f},",
        f"{hi:.3f}]",
    ]
    assert "acc_norm_chars: log-likelihood per character" in text


def test_another_corpus_can_be_scored(run_dir):
    r = evaluate(run_dir, corpus=EXAMPLES / "corpus" / "bn.txt", max_docs=6, bootstrap=50)
    assert r["heldout"]["documents"] == 6
    assert {x["key"] for x in r["lm"] if x["group"] == "language"} == {"bn"}
    assert not r["tasks"]


def _replace_weights(run_dir, model, step=99):
    for p in (run_dir / "checkpoints").iterdir():
        shutil.rmtree(p)
    save_checkpoint(
        run_dir,
        step,
        model.state_dict(),
        {"x": torch.zeros(1)},
        {
            "model": model.cfg.to_dict(),
            "tokens_seen": 0,
            "tokenizer_fingerprint": load_tokenizer(
                str(run_dir / "tokenizer" / "tokenizer.json")
            ).fingerprint,
        },
    )


def test_a_model_no_better_than_its_twin_is_flagged(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    _, manifest = latest_checkpoint(run)
    cfg = ModelConfig.from_dict(manifest["model"])
    _replace_weights(run, nll.fresh_twin(Transformer(cfg), seed=0))  # the twin itself
    r = evaluate(run, bootstrap=50, twin_seed=0, max_docs=12)
    codes = {(f["code"], f["key"]) for f in r["flags"]}
    assert ("not_below_twin", "all") in codes
    assert "not below its random twin" in render_text(r)


def test_a_twin_far_above_ln_v_is_flagged(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    _, manifest = latest_checkpoint(run)
    cfg = ModelConfig.from_dict({**manifest["model"], "init_std": 1.0})
    torch.manual_seed(0)
    _replace_weights(run, Transformer(cfg))
    r = evaluate(run, bootstrap=50, max_docs=12)
    assert r["lm"][0]["twin_nll_per_token"] > math.log(512) + 1
    assert "twin_far_above_ln_vocab" in {f["code"] for f in r["flags"]}


# -- bad input ---------------------------------------------------------------------------------


def test_missing_run_folder_and_manifest(tmp_path):
    with pytest.raises(EvalError, match="nope: no such run folder"):
        evaluate(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(EvalError, match="run.json: missing"):
        evaluate(tmp_path / "empty")
    (tmp_path / "empty" / "run.json").write_text("{oops")
    with pytest.raises(EvalError, match="run.json: unreadable"):
        evaluate(tmp_path / "empty")


def test_corrupt_checkpoints(run_dir, tmp_path, capsys):
    run = copy_run(run_dir, tmp_path)
    steps = sorted((run / "checkpoints").glob("step-*"))
    assert [p.name for p in steps] == ["step-00000025", "step-00000050"]
    weights = steps[-1] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])  # truncated newest: the older one is used
    r = evaluate(run, bootstrap=20, max_docs=3)
    assert r["run"]["step"] == 25
    assert "skipping checkpoint" in capsys.readouterr().err
    (steps[0] / "state.json").unlink()
    with pytest.raises(EvalError, match="no valid checkpoint"):
        evaluate(run)


def test_changed_or_missing_tokenizer(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    path = run / "tokenizer" / "tokenizer.json"
    obj = json.loads(path.read_text())
    obj["model"]["vocab"]["zz-extra"] = 9999
    path.write_text(json.dumps(obj))
    with pytest.raises(EvalError, match="tokenizer.json: tokenizer fingerprint .* differs"):
        evaluate(run)
    path.unlink()
    with pytest.raises(EvalError, match="tokenizer.json: the run's tokenizer is missing"):
        evaluate(run)


def test_missing_heldout_split_asks_for_a_corpus(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    (run / "data" / "heldout.jsonl").unlink()
    with pytest.raises(EvalError, match="heldout.jsonl: missing .*pass --corpus"):
        evaluate(run)
    (run / "data" / "heldout.jsonl").write_text('{"text": "ok", "lang": "en"}\n{"lang": "en"}\n')
    with pytest.raises(EvalError, match="heldout.jsonl:2: not a held-out record"):
        evaluate(run)


def test_a_bad_task_file_fails_before_any_scoring(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"context": "a", "choices": ["b", "c"], "label": 0}\n'
        '{"context": "a", "choices": ["b", "c"], "label": 5}\n'
    )
    # the task file is checked first, so its error wins even over a missing run
    with pytest.raises(EvalError, match="bad.jsonl:2: label 5 is out of range"):
        evaluate(tmp_path / "no-run", tasks=[bad])


def test_invalid_utf8_in_the_heldout_split_is_an_eval_error(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    (run / "data" / "heldout.jsonl").write_bytes(b'{"text": "ok", "lang": "en"}\n\xff\xfe\n')
    with pytest.raises(EvalError, match="heldout.jsonl: unreadable"):
        evaluate(run)


def test_a_device_that_cannot_be_used_is_an_eval_error(run_dir, monkeypatch):
    with pytest.raises(EvalError, match="unknown device 'gpu'"):
        evaluate(run_dir, device="gpu", lm=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EvalError, match="no CUDA device"):
        evaluate(run_dir, device="cuda", lm=False)


# -- the command -------------------------------------------------------------------------------


def test_the_eval_command_writes_json_and_fails_with_one_line_and_exit_2(run_dir, tmp_path, run):
    out = tmp_path / "eval.json"
    rc, _, _ = run(
        "eval",
        run_dir,
        "--no-lm",
        "--tasks",
        TASKS[1],
        "--format",
        "json",
        "-o",
        out,
        "--device",
        "cpu",
        "--quiet",
    )
    assert rc == 0
    data = json.loads(out.read_text("utf-8"))
    assert data["schema"] == "fertility.eval/1" and data["lm"] == [] and data["heldout"] is None
    assert [(t["task"], t["n"]) for t in data["tasks"]] == [("cloze_bn", 40)]

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"context": "a", "choices": ["b", "c"], "label": 0}\n'
        '{"context": "a", "choices": ["b", "c"]}\n'
    )
    for argv, where in [
        ((run_dir, "--tasks", bad), 'bad.jsonl:2: "label" must be'),
        ((tmp_path / "nope",), "nope: no such run folder"),
    ]:
        rc, stdout, err = run("eval", *argv, "--quiet")
        assert rc == 2 and stdout == ""
        assert err.startswith("error: ") and err.count("\n") == 1 and where in err, err


@pytest.mark.parametrize(
    "line, what",
    [
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        (
            '{"context": "a", "choices": ["b", "c"], "label": 0, "x": ' + "[" * 100_000,
            "JSON nested too deeply",
        ),
        (
            '{"context": "a", "choices": ["b", "c"], "label": ' + "9" * 5000 + "}",
            "JSON number with too many digits",
        ),
    ],
)
def test_a_task_line_the_json_decoder_cannot_read_is_one_line_naming_file_and_line(
    run_dir, tmp_path, run, line, what
):
    tasks = tmp_path / "deep.jsonl"
    tasks.write_text('{"context": "a", "choices": ["b", "c"], "label": 0}\n' + line + "\n")
    rc, stdout, err = run(
        "eval", run_dir, "--no-lm", "--tasks", tasks, "--device", "cpu", "--quiet"
    )
    assert rc == 2 and stdout == "" and "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith(f"error: {tasks}:2: {what}"), err
