"""Every number of the training config is checked when the config is made: `fertility
pretrain` refuses a value that is not finite, out of its range, not an integer where a count is
meant, or out of line with another field, with one line naming the file (or the option) and
the key, exit 2, before the gate, the tokenizing or a step runs.

Before this, `grad_clip = nan` switched clipping off (nan > 0 is false) and wrote NaN into
run.json, `weight_decay = inf` and `eps = 0` trained, `tokens_per_step = 1` was silently
rounded up to a whole micro-batch, and `seed = -1` ended as "unexpected ValueError".
"""

from __future__ import annotations

import math

import pytest

from fertility.errors import TrainingError
from fertility.trainer.config import TrainConfig, load_config
from tests.trainer.tokfixture import CORPUS, train_tokenizer

# A config that trains: each case replaces or adds one line.
BASE = {
    "preset": '"tiny"',
    "seq_len": "64",
    "micro_batch": "4",
    "tokens_per_step": "512",
    "warmup_steps": "1",
    "device": '"cpu"',
    "heldout_fraction": "0.05",
    "steps": "2",
}


def toml(**lines: str) -> str:
    top = {**BASE, **{k: v for k, v in lines.items() if k != "model"}}
    text = "".join(f"{k} = {v}\n" for k, v in top.items())
    if "model" in lines:
        text += "[model]\n" + lines["model"] + "\n"
    return text


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    return train_tokenizer(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def refused(run, tok, tmp_path, *args):
    """Run pretrain expecting a refusal: the one error line; nothing tokenized or trained."""
    out = tmp_path / "run"
    code, stdout, err = run("pretrain", *CORPUS, "-t", tok, "--out", out, "--quiet", *args)
    assert code == 2, err
    assert stdout == "" and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert not (out / "run.json").exists() and not (out / "data").exists()
    return lines[0]


@pytest.mark.parametrize(
    "key, value",
    [
        # not finite: nan compares false with every bound, inf passes an open one
        ("grad_clip", "nan"),
        ("grad_clip", "inf"),
        ("weight_decay", "inf"),
        ("weight_decay", "nan"),
        ("lr", "nan"),
        ("lr", "inf"),
        ("min_lr", "nan"),
        ("eps", "nan"),
        ("eps", "inf"),
        ("heldout_fraction", "nan"),
        ("mix_temperature", "nan"),
        ("mix_temperature", "inf"),
        ("betas", "[0.9, nan]"),
        ("betas", "[inf, 0.95]"),
        ("mix", "{ bn = nan, en = 0.5 }"),
        # out of range
        ("eps", "0"),
        ("eps", "-1e-8"),
        ("lr", "0"),
        ("grad_clip", "-1.0"),
        ("weight_decay", "-0.1"),
        ("seed", "-1"),
        ("seed", "18446744073709551616"),
        ("warmup_steps", "-1"),
        ("max_rollbacks", "-1"),
        ("tokenize_workers", "-1"),
        ("separator", "-3"),
        ("heldout_fraction", "1.0"),
        ("betas", "[0.9, 1.0]"),
        ("steps", "0"),
        ("checkpoint_every", "0"),
        ("eval_every", "-1"),
        ("preset", '"huge"'),
        ("device", '"cuda:x"'),
        # an integer where a count is meant
        ("seed", "1.5"),
        ("micro_batch", "4.0"),
        ("log_every", "1e3"),
        ("steps", "true"),
        # relations between fields
        ("tokens_per_step", "1"),  # was rounded up to one micro-batch (256)
        ("tokens_per_step", "300"),  # was rounded up to 512
        ("tokens", "100"),  # below one step's 512 tokens: was one whole step
        ("min_lr", "0.1"),  # above lr
        ("weight_decay", "1e5"),  # lr * weight_decay >= 1: AdamW zeroes the weights
        ("mix", "{ bn = 0.5, en = 0.4 }"),  # shares sum to 0.9
    ],
)
def test_a_bad_number_in_the_config_file_is_one_line_naming_file_and_key(
    run, tok, tmp_path, key, value
):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml(**{key: value}))
    line = refused(run, tok, tmp_path, "--config", cfg, "--force")
    assert f"{cfg}: {key}" in line, line
    assert "must be" in line and "unexpected" not in line, line


@pytest.mark.parametrize(
    "model, key",
    [
        ("rope_theta = nan", "model.rope_theta"),
        ("norm_eps = 0.0", "model.norm_eps"),
        ("init_std = inf", "model.init_std"),
        ("d_model = 0", "model.d_model"),
        ("n_layers = 2.5", "model.n_layers"),
        ("tie_embeddings = 1", "model.tie_embeddings"),
        ("d_model = 66", "d_model 66 is not divisible by n_heads 4"),
        ("dmodel = 64", "unknown key 'dmodel'"),
    ],
)
def test_a_bad_model_table_is_one_line_naming_file_and_key(run, tok, tmp_path, model, key):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml(model=model))
    line = refused(run, tok, tmp_path, "--config", cfg, "--force")
    assert line.startswith(f"error: {cfg}: ") and key in line, line


@pytest.mark.parametrize(
    "args, option",
    [
        (("--mix-temperature", "nan"), "--mix-temperature"),
        (("--mix-temperature", "inf"), "--mix-temperature"),
        (("--mix-temperature", "-1"), "--mix-temperature"),
        (("--tokens", "5"), "--tokens"),  # below one step of the default 8 x 128 tokens
        (("--preset", "huge"), "--preset"),
    ],
)
def test_a_bad_command_line_value_is_one_line_naming_the_option(run, tok, tmp_path, args, option):
    line = refused(run, tok, tmp_path, *args, "--device", "cpu", "--force")
    assert line.startswith(f"error: {option} must be"), line


def test_a_command_line_value_out_of_line_with_the_file_names_the_option(run, tok, tmp_path):
    cfg = tmp_path / "cfg.toml"
    cfg.write_text(toml())  # 512 tokens per step
    line = refused(run, tok, tmp_path, "--config", cfg, "--tokens", "511", "--force")
    assert line.startswith("error: --tokens must be at least one step's 512 tokens"), line


# -- the rules themselves, without the command ---------------------------------------------


def test_the_edges_of_every_range_are_accepted(tmp_path):
    cfg = tmp_path / "edges.toml"
    cfg.write_text(
        toml(
            grad_clip="0",  # no clipping, as documented
            weight_decay="0",
            eps="1e-30",
            seed="18446744073709551615",
            warmup_steps="0",
            max_rollbacks="0",
            eval_every="0",
            tokenize_workers="0",
            separator="0",
            heldout_fraction="0",
            betas="[0, 0.999]",
            min_lr="0",
            tokens="512",
            mix_temperature="0",
            lr="1",  # with weight_decay 0: nothing to scale
        )
    )
    c = load_config(cfg)
    assert c.grad_clip == 0.0 and c.eps == 1e-30 and c.seed == 2**64 - 1 and c.tokens == 512
    assert isinstance(c.lr, float) and c.betas == (0.0, 0.999)


def test_tokens_per_step_is_a_multiple_of_a_micro_batch_on_every_device(tmp_path, monkeypatch):
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml())  # 512 = 2 micro-batches of 4 x 64
    assert load_config(cfg).accum_steps(1) == 2
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert load_config(cfg).accum_steps(2) == 1  # 2 devices x 256
    monkeypatch.setenv("WORLD_SIZE", "4")  # 4 x 256 = 1024 per micro-batch: was 1024 a step
    with pytest.raises(TrainingError, match=r"tokens_per_step must be a multiple of 1024 .*4 dev"):
        load_config(cfg)


def test_a_resumed_config_names_run_json_and_the_options_over_it():
    from fertility.trainer.config import resumed_config

    stored = TrainConfig(seq_len=64, micro_batch=4, tokens_per_step=512).to_dict()
    assert resumed_config(stored, {"steps": 9}, "r/run.json").steps == 9
    with pytest.raises(TrainingError, match=r"^--mix-temperature must be a finite number"):
        resumed_config(stored, {"mix_temperature": math.inf}, "r/run.json")
    with pytest.raises(TrainingError, match=r"^r/run.json: grad_clip must be .* got nan$"):
        resumed_config({**stored, "grad_clip": math.nan}, {}, "r/run.json")
    with pytest.raises(TrainingError, match=r"^r/run.json: train must be a table"):
        resumed_config(["not", "a", "table"], {}, "r/run.json")


def test_validate_refuses_what_the_dataclass_was_given_directly():
    with pytest.raises(TrainingError, match=r"^<config>: grad_clip must be .* got nan$"):
        TrainConfig(grad_clip=math.nan).validate()
    with pytest.raises(TrainingError, match=r"^x: eps must be a finite number > 0, got 0$"):
        TrainConfig(eps=0).validate("x")


def test_each_preset_brings_its_own_optimizer_and_batch_defaults(monkeypatch):
    from fertility.trainer.config import PRESET_TRAINING
    from fertility.trainer.model import PRESETS

    tiny = load_config()
    assert (tiny.lr, tiny.min_lr, tiny.warmup_steps) == (3e-3, 3e-4, 10)
    assert tiny.tokens_per_step is None and tiny.step_tokens() == 16 * 128  # no accumulation
    big = load_config(overrides={"preset": "0.4b"})
    # 0.5M tokens per step (GPT-3 Medium; nanoGPT, llm.c): 32 micro-batches of 8 x 2048
    assert big.tokens_per_step == 524_288 and big.accum_steps() == 32 and big.lr == 3e-4
    assert load_config(overrides={"preset": "0.4b", "lr": 1e-4}).lr == 1e-4  # given wins
    # A preset's target under any torchrun world size: the nearest multiple of one
    # micro-batch on every device. 3 devices: 49,152 tokens a micro-batch, 524,288 / 49,152
    # = 10.67 -> 11 x 49,152 = 540,672 (hand-worked); 64 devices: one micro-batch, 1,048,576.
    monkeypatch.setenv("RANK", "0")
    for world, expected in ((3, 540_672), (64, 1_048_576), (8, 524_288)):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        assert load_config(overrides={"preset": "0.4b"}).tokens_per_step == expected
        assert load_config().tokens_per_step is None  # tiny: one micro-batch per device
    assert set(PRESET_TRAINING) == set(PRESETS)
