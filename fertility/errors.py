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


class ExtendError(FertilityError):
    """Bad input to `fertility extend`: a base it cannot widen, no text to learn from."""


class OutputError(FertilityError):
    """An output would replace, delete or become what this project did not write (an input,
    a user's file, a folder it did not make): refused before anything is written."""


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like Ctrl-C, so every `finally` runs (worker
    processes terminated, temporary files removed, no partial output); the command line
    exits 143. The trainer raises it after checkpointing the step a SIGTERM interrupted.
    Not a KeyboardInterrupt: click would turn that into Abort (and print a blank line),
    losing which signal it was; not an Exception, so no `except Exception` swallows it."""


# Characters that would break an error line or a table cell apart, or reorder what follows:
# C0 and C1 controls, the line and paragraph separators, the bidirectional controls.
_UNSAFE = (
    [chr(c) for c in range(0x20)]
    + [chr(c) for c in range(0x7F, 0xA0)]
    + ["\u2028", "\u2029", "\u061c", "\u200e", "\u200f"]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
    + [chr(c) for c in range(0xD800, 0xE000)]  # lone surrogates: unprintable, unencodable
)
_ESCAPES = str.maketrans(
    {c: ("\\x%02x" % ord(c) if ord(c) < 0x80 else "\\u%04x" % ord(c)) for c in _UNSAFE}
    | {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
)


def visible(text: str) -> str:
    """`text` with every character that could split a line or reorder it (a newline in a file
    name, U+202E in a label) shown as an escape (`\\n`, `\\u202e`): one line stays one line."""
    return text.translate(_ESCAPES)
