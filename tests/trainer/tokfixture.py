"""A small byte-level BPE (with <|endoftext|>) trained on the examples corpus, for the tests
that run the real pretraining path."""

from pathlib import Path

from fertility.gate import GateResult, PolicySummary
from tests.bpe import byte_level_bpe

REPO = Path(__file__).resolve().parents[2]
CORPUS = sorted(str(p) for p in (REPO / "examples/corpus").glob("*.txt"))


def train_tokenizer(path: Path, vocab_size: int = 384, text: list[str] | None = None) -> str:
    if text is None:
        text = [line for f in CORPUS for line in Path(f).read_text("utf-8").splitlines()]
    byte_level_bpe(text, vocab_size, specials=["<|endoftext|>"], path=path)
    return str(path)


class PassingGate(GateResult):
    """A gate verdict that lets any tokenizer train (tests of the trainer, not of the gate):
    a real GateResult with no checks, so the trainer renders it as it renders any verdict."""

    def __init__(self):
        super().__init__(checks=[], findings=[], policy=PolicySummary())

    def to_dict(self):
        return {"passed": True}
