"""One family of errors. The CLI turns any FertilityError into a one-line message and
exit code 2; exit 1 is reserved for "the gate said no"."""


def one_line(e: BaseException, limit: int = 200) -> str:
    """An exception's message on one line (whitespace runs folded), cut at `limit`: what a
    library said, quoted inside our own one-line error that names the file."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class FertilityError(Exception):
    """Bad input or an unusable resource; the message names the file and what is wrong."""

    exit_code = 2


class CorpusError(FertilityError):
    """A corpus path is missing, unreadable, corrupt, or holds no documents."""


class TokenizerError(FertilityError):
    """A tokenizer spec cannot be loaded (missing, corrupt, unsupported, offline)."""


class PolicyError(FertilityError):
    """A gate policy file is malformed."""


class TrainingError(FertilityError):
    """A pretraining run cannot start or continue (refused tokenizer, bad shards, arbiter)."""


class EvalError(FertilityError):
    """An evaluation input (run folder, checkpoint, task file) is unusable."""


class FixError(FertilityError):
    """`fertility fix` cannot run: empty corpus, vocabulary too small, unreadable --from."""
