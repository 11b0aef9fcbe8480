"""The world the continued-pretraining tests share (test_init_from.py, test_continued.py): a
tiny Llama trained here on English and exported, its tokenizer extended with 200 Bengali
tokens, and a 20-step continued run, built once per session (~6 s)."""

from pathlib import Path

import torch
from tokenizers import Tokenizer

from fertility.eval.export import export_hf
from fertility.extend import extend
from fertility.trainer.options import PretrainOptions
from fertility.trainer.run import pretrain
from tests.bpe import byte_level_bpe

ROOT = Path(__file__).resolve().parents[2] / "examples"
EOT = "<|endoftext|>"
ENGLISH = (
    "The river is wide and the boat is slow, so we reach the market after noon. "
    "Prices of rice and fish went up this week."
)
TINY = {"preset": "tiny", "steps": 20, "device": "cpu", "force": True, "quiet": True}
OVER = {
    "seq_len": 64,
    "micro_batch": 4,
    "warmup_steps": 5,
    "lr": 3e-3,
    "checkpoint_every": 1000,
    "heldout_fraction": 0.1,
}
_BUILT: dict = {}  # one world per session: both test files' fixtures ask for it


def lines(*files: Path) -> list[str]:
    return [x for f in files for x in f.read_text(encoding="utf-8").splitlines() if x]


def world(tmp_path_factory):
    """(folder, what the first step saw, the continued run's summary)."""
    if "world" in _BUILT:
        return _BUILT["world"]
    tmp = tmp_path_factory.mktemp("init_from")
    en = lines(ROOT / "corpus" / "en.txt", ROOT / "bangla_trap" / "extra" / "en.txt")
    bn = lines(ROOT / "corpus" / "bn.txt", ROOT / "bangla_trap" / "extra" / "bn.txt")
    (tmp / "en").mkdir()
    (tmp / "en" / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp / "mix").mkdir()
    (tmp / "mix" / "en.txt").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp / "mix" / "bn.txt").write_text("\n".join(bn) + "\n", encoding="utf-8")
    byte_level_bpe(en, 512, specials=[EOT], path=tmp / "base-tok" / "tokenizer.json")
    pretrain(
        PretrainOptions(
            [tmp / "en"],
            str(tmp / "base-tok" / "tokenizer.json"),
            tmp / "run-base",
            settings=OVER,
            **TINY,
        )
    )
    export_hf(tmp / "run-base", tmp / "base-model")
    extend(str(tmp / "base-model"), [str(tmp / "mix")], tmp / "ext", 200, langs=["bn"])
    seen = {}

    class Capture:
        def on_step_start(self, step, model):
            if not seen:  # before the first update
                ids = (
                    Tokenizer.from_file(str(tmp / "ext" / "tokenizer.json"))
                    .encode(ENGLISH, add_special_tokens=False)
                    .ids
                )
                with torch.no_grad():
                    seen["logits"] = model(torch.tensor([ids])).double()
                seen["ids"] = ids

    summary = pretrain(
        PretrainOptions(
            [tmp / "mix"],
            str(tmp / "ext" / "tokenizer.json"),
            tmp / "run-ext",
            settings={**OVER, "init_from": str(tmp / "base-model")},
            **TINY,
        ),
        callbacks=Capture(),
    )
    export_hf(tmp / "run-ext", tmp / "ext-model")
    _BUILT["world"] = (tmp, seen, summary)
    return _BUILT["world"]
