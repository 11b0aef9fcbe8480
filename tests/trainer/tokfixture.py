"""A small byte-level BPE (with <|endoftext|>) trained on the examples corpus, for the tests
that run the real pretraining path."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted(str(p) for p in (REPO / "examples/corpus").glob("*.txt"))


def train_tokenizer(path: Path, vocab_size: int = 384, text: list[str] | None = None) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    if text is None:
        tok.train(CORPUS, trainer)
    else:
        tok.train_from_iterator(text, trainer)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return str(path)


class PassingGate:
    """A gate verdict that lets any tokenizer train (tests of the trainer, not of the gate)."""

    passed = True

    def format_text(self):
        return "verdict: PASS"

    def to_dict(self):
        return {"passed": True}
