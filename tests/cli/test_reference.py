"""docs/CLI.md is what the click commands print: regenerate it with `make docs`."""

from pathlib import Path

import click

from fertility.cli import cli
from fertility.cli.reference import markdown

DOC = Path(__file__).resolve().parents[2] / "docs" / "CLI.md"


def test_committed_cli_reference_equals_the_commands_help():
    assert DOC.read_text(encoding="utf-8") == markdown(), "docs/CLI.md is stale: run make docs"


def test_every_verb_and_option_is_in_the_reference():
    text = DOC.read_text(encoding="utf-8")
    ctx = click.Context(cli, info_name="fertility")
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert f"## fertility {name}\n" in text
        for param in command.params:
            if getattr(param, "hidden", False):  # deprecated spellings stay out of --help
                continue
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt in text, (name, opt)
