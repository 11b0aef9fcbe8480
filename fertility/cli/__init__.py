"""The `fertility` command: a thin shell over the library.

Exit codes: 0 success; 1 the gate said no; 2 bad input (any FertilityError, a usage error, or
any unexpected error: one line, the traceback with `fertility --debug`); 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM). docs/RELIABILITY.md lists the promises and their tests.
"""

from __future__ import annotations

import importlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator, MutableMapping

import click

from fertility.cli.options import silence_stdout
from fertility.errors import FertilityError, Terminated, visible

# Each command: its module and the click command in it.
COMMANDS = {
    "report": ("fertility.cli.report", "report"),
    "gate": ("fertility.cli.gate", "gate"),
    "fix": ("fertility.cli.fix", "fix"),
    "extend": ("fertility.cli.extend", "extend"),
    "tokenize": ("fertility.cli.tokenize", "tokenize"),
    "pretrain": ("fertility.cli.pretrain", "pretrain"),
    "eval": ("fertility.cli.eval", "eval_cmd"),
    "export": ("fertility.cli.export", "export"),
}


class _Commands(MutableMapping[str, click.Command]):
    """The group's commands by name, each module imported when its command is first read
    (run, or listed by --help): a command pays for its own module, not the seven others'
    (10 ms of every start; a one-line report takes half a second)."""

    def __init__(self, where: dict[str, tuple[str, str]]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attr = self._where[name]  # KeyError: no such command (.get gives None)
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where.setdefault(name, ("", ""))
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


_DEBUG = {"on": False}


def _set_debug(ctx, param, value) -> None:
    _DEBUG["on"] = _DEBUG["on"] or bool(value)


@click.group(commands=_Commands(COMMANDS), context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="fertility")
@click.option(
    "--debug",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_set_debug,
    help="Show the traceback of an unexpected error (it still exits 2).",
)
def cli() -> None:
    """Measure, diagnose and fix tokenizer fertility per Unicode script and language."""


def _on_sigterm(signum, frame) -> None:
    raise Terminated()


def main(argv: list[str] | None = None) -> None:
    """Entry point: turn every error into one line and a documented exit code (2 for any
    error, expected or not: 1 is only the gate's "no"; 130 Ctrl-C, 143 SIGTERM)."""

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(argv)
    finally:  # called in-process (tests, notebooks): leave the caller's handler as it was
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(argv: list[str] | None) -> None:
    _DEBUG["on"] = False
    _release(forget=True)
    try:
        cli.main(args=argv, prog_name="fertility", standalone_mode=False)
        sys.stdout.flush()
    except FertilityError as exc:  # a file name may hold a newline: still one line
        _release()
        click.echo(f"error: {visible(str(exc))}", err=True)
        sys.exit(exc.exit_code)
    except (Terminated, KeyboardInterrupt, click.exceptions.Abort) as exc:
        _release()
        terminated = isinstance(exc, Terminated)
        click.echo("terminated" if terminated else "interrupted", err=True)
        sys.exit(143 if terminated else 130)
    except click.ClickException as exc:  # click's own is four lines (usage, hint, blank, error)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
        click.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except BrokenPipeError:
        silence_stdout()
        sys.exit(0)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001  a bug, a Rust panic, MemoryError, ...
        _release()
        _unexpected(exc)


def _release(forget: bool = False) -> None:
    """A command that stops on an error leaves no output folder it made and wrote nothing
    into (fertility.outputs.release_unused_claims); `forget`: at a command's start, drop the
    claims of an earlier command run in this process (tests, notebooks), which succeeded or
    were dealt with. Without fertility.outputs loaded no folder was claimed, and it is not
    imported here: it loads numpy, which --help and a usage error do without."""
    outputs = sys.modules.get("fertility.outputs")
    if outputs is not None and forget:
        outputs.forget_claims()
    elif outputs is not None:
        outputs.release_unused_claims()


def _unexpected(exc: BaseException) -> None:
    """One line and exit 2 for what no check foresaw; the traceback only with --debug."""
    # deferred: the library loads when a command runs (fast --help)
    from fertility.errors import one_line

    if isinstance(exc, OSError) and getattr(exc, "filename", None):
        what = f"{exc.filename}: {exc.strerror or one_line(exc)}"
    elif isinstance(exc, MemoryError):
        what = "out of memory"
    elif isinstance(exc, RecursionError):
        what = "input nested too deeply (recursion limit)"
    else:
        what = f"unexpected {type(exc).__name__}: {one_line(exc)}"
    if _DEBUG["on"]:
        traceback.print_exception(exc)
    click.echo(
        f"error: {visible(what)}"
        + ("" if _DEBUG["on"] else " (rerun as `fertility --debug ...` for the traceback)"),
        err=True,
    )
    sys.exit(2)
