"""The round-trip causes a counts file lists come in one order whatever the process's string
hash seed: two `fertility tokenize` runs of the same inputs write the same files (docs/SCALE.md).
A set's iteration order follows PYTHONHASHSEED, so each seed runs in its own process."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = """
from fertility.measure.roundtrip import new_changes, record
changes = new_changes()
# fullwidth A (compatibility), a doubled space (whitespace), a space put in front
# (prefix_space) and an unknown token (unk): four causes in one document
record(changes, "\\uff21b  \\u00e9", " [UNK]b c", "Ab \\u00e9", "[UNK]", 0)
print(list(changes["causes"]))
"""


def test_the_causes_are_listed_in_one_order_under_any_hash_seed():
    seen = set()
    for seed in range(4):  # 4 causes: 24 orders; under the old set order 4 seeds gave several
        env = {**os.environ, "PYTHONHASHSEED": str(seed)}
        out = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        seen.add(out.stdout.strip())
    assert len(seen) == 1, seen
    causes = ast.literal_eval(seen.pop())
    assert sorted(causes) == causes and len(causes) == 4
