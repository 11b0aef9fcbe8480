"""Fixtures shared across the test folders."""

import pytest


@pytest.fixture()
def run(capsys):
    """Run the `fertility` command in-process: (exit code, stdout, stderr)."""
    from fertility.cli import main

    def invoke(*argv):
        with pytest.raises(SystemExit) as exc:
            main([str(a) for a in argv])
            raise SystemExit(0)
        out, err = capsys.readouterr()
        return exc.value.code or 0, out, err

    return invoke
