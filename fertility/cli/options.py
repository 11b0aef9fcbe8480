"""Options and output helpers every command shares.

An options dataclass (fertility.options: ReportOptions, GateOptions, ...;
trainer.options.PretrainOptions) becomes a command's click options with `options_of(cls)`
(its own fields, its CorpusOptions field's, the --quiet and --allow-output-in-corpus it
inherits), and comes back from what click parsed with `command_options(cls, kw)`
(`from_params` for a command without a corpus): the declaration is the one list of the
options.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import types
import typing
from typing import Any, Literal, cast

import click

from fertility.errors import CorpusError, FertilityError, visible
from fertility.options import FLAG, CorpusOptions, Flag, OptionValueError, fields_in_order


def need_torch(command: str) -> None:
    """torch is an optional extra: say how to get it instead of raising ImportError."""
    try:
        # deferred: torch is the optional train extra
        import safetensors  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        raise FertilityError(
            f"`fertility {command}` needs PyTorch and safetensors: pip install 'fertility[train]'"
        ) from None


def _without_none(tp: Any) -> Any:
    """`X | None` -> X (an option's None is "not given")."""
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"an option has one type besides None, not {tp}")
        return rest[0]
    return tp


def _number(kind: type, flag: Flag) -> Any:
    if flag.min is None and flag.max is None:
        return kind
    if kind is int:
        # an int option's range is declared in ints (fertility.options.option types the
        # bounds of every number as float); click's IntRange only compares against them
        lo, hi = cast("int | None", flag.min), cast("int | None", flag.max)
        return click.IntRange(lo, hi, min_open=flag.min_open, max_open=flag.max_open)
    return click.FloatRange(flag.min, flag.max, min_open=flag.min_open, max_open=flag.max_open)


def _parse(flag: Flag) -> Any:
    def callback(ctx, param, value):
        if value is None:
            return value
        try:
            return flag.parse(value)
        except OptionValueError as e:  # as click says a bad value: the option named, exit 2
            raise click.BadParameter(str(e), ctx, param) from None

    return callback


def click_decorator(f: dataclasses.Field, flag: Flag, tp: Any):
    """One field as a click option (or argument) named after the field, its type, range,
    default and help from the declaration (fertility.options.option)."""
    kind = _without_none(tp)
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
    required = default is dataclasses.MISSING and not flag.optional
    if flag.argument:
        many = typing.get_origin(kind) is tuple
        return click.argument(f.name, nargs=-1 if many else 1, required=required)
    if flag.switches:  # one flag per value, all setting the field (unset: its default)
        switches = [
            click.option(s.decl, f.name, flag_value=s.value, help=s.help or None, hidden=s.hidden)
            for s in flag.switches
        ]
        return _composed(switches)
    attrs: dict[str, Any] = {
        "help": flag.help or None,
        "metavar": flag.metavar,
        "show_default": flag.show_default,
        "required": required,
    }
    if not required:  # a required option gets no default at all: click 8.3+ takes an explicit
        attrs["default"] = default  # default=None as a value that satisfies `required`
    if flag.parse is not None:  # text on the command line, the field's own type after
        attrs.update(type=str, callback=_parse(flag))
    elif kind is bool:
        attrs.update(is_flag=True)
    elif typing.get_origin(kind) is Literal:
        attrs.update(type=choice(kind))
    elif kind in (int, float):
        attrs.update(type=_number(kind, flag))
    elif typing.get_origin(kind) is tuple:
        attrs.update(type=typing.get_args(kind)[0], multiple=True, default=())
    else:
        attrs.update(type=kind)
    return click.option(*flag.names(f.name), f.name, **attrs)


def _composed(decorators: list):
    """The decorators applied as one, the first one's option first on the command."""

    def decorate(command):
        for d in reversed(decorators):
            command = d(command)
        return command

    return decorate


def choice(values: Any) -> click.Choice:
    """The values of a `Literal[...]` (fertility.options) as a click choice."""
    return click.Choice(typing.get_args(values))


def options_of(cls: type):
    """A decorator adding the command-line fields of the options dataclass `cls` to a click
    command, in command-line order (fertility.options.fields_in_order); a field that is an
    options object itself (a command's CorpusOptions) adds its own fields in its place."""
    return _composed(_decorators(cls))


def _decorators(cls: type) -> list:
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields_in_order(cls):
        flag = f.metadata.get(FLAG)
        if flag is not None:
            out.append(click_decorator(f, flag, hints[f.name]))
        elif dataclasses.is_dataclass(hints[f.name]):
            out.extend(_decorators(hints[f.name]))
    return out


def from_params(cls: type, kw: dict, **extra: Any) -> Any:
    """`cls` made from a command's keyword arguments: each of its fields that click parsed is
    taken out of `kw`; `extra` gives the others (a callback, a nested options object)."""
    names = {f.name for f in dataclasses.fields(cls)} - set(extra)
    return cls(**{n: kw.pop(n) for n in list(kw) if n in names}, **extra)


def command_options(cls: type, kw: dict) -> Any:
    """A corpus command's options object (`cls`: fertility.options, trainer.options) from
    what click parsed: its own and inherited fields, and its CorpusOptions field (`corpus`;
    eval's `corpus_options`, as --corpus is its paths) made by corpus_settings."""
    hints = typing.get_type_hints(cls)
    (name,) = [f.name for f in dataclasses.fields(cls) if hints[f.name] is CorpusOptions]
    return from_params(cls, kw, **{name: corpus_settings(kw)})


def corpus_settings(kw: dict) -> CorpusOptions:
    """The corpus options out of a command's keyword arguments, as one CorpusOptions (its
    `seed` also seeds the bootstrap). Warnings about the data go to stderr even with
    --quiet, which silences progress only."""
    opts = from_params(CorpusOptions, kw, on_warning=_warn)
    # deferred: the library loads when a command runs (fast --help)
    from fertility.corpus.memory import check_document_limit

    check_document_limit(opts.max_doc_chars)  # before anything is read
    ctx = click.get_current_context(silent=True)
    name = ctx.info_name if ctx is not None else None
    if opts.precision is not None and name not in PRECISION_COMMANDS:
        raise CorpusError(
            f"--precision: only fertility report and gate measure a sample at a stated "
            f"precision; {name} reads every document it is given (--sample, --max-docs)"
        )
    return opts


# The commands whose verdict may come from a sample read to a stated precision; fix, extend,
# eval and pretrain split, score or train on every document they read.
PRECISION_COMMANDS = ("report", "gate")


def slurm_pending(work_dir: str) -> None:
    """What `--executor slurm` prints when it has submitted the tasks and returns."""
    click.echo(
        f"tasks handed to Slurm; when they finish, run the same command again to merge "
        f"their results ({work_dir}/logs/completions lists the finished ones)",
        err=True,
    )


def _warn(message: str) -> None:
    click.echo(f"warning: {visible(message)}", err=True)


def write_output(text: str, output: str | None) -> None:
    """`text` to stdout (no -o, or `-o -`) or to the file (fertility.files: a regular file is
    replaced in one rename, a symlink written through, a device written in place)."""
    if output is None or output == "-":
        try:
            sys.stdout.write(text)
            sys.stdout.flush()  # a full disk shows here, not at exit after the verdict
        except BrokenPipeError:
            raise
        except OSError as e:
            silence_stdout()
            raise FertilityError(f"stdout: cannot write ({e.strerror or e})") from None
        return
    if not output.strip():
        raise FertilityError("-o/--output: empty file name")
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import write_file

    write_file(output, text)  # recorded as ours, then replaced in one rename


def check_outputs(outputs: dict, allow_in_corpus: bool, **inputs) -> None:
    """The output policy (fertility.outputs), before anything is measured: `outputs` maps
    each option to its path; `allow_in_corpus` is --allow-output-in-corpus; `inputs` are
    Inputs.of's keywords (corpus, tokenizers, files, folders)."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.outputs import Inputs, check_file_outputs

    check_file_outputs(outputs, Inputs.of(**inputs), allow_in_corpus=allow_in_corpus)


def silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's own flush at exit (of what could not be
    written) raises nothing more after our one line."""

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
