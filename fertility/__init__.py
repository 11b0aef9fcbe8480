"""fertility: measure, diagnose and fix tokenizer fertility per Unicode script and language.

    import fertility
    report = fertility.analyze(["corpus/"], ["bpe=tokenizer.json"])
    report.frame          # one tidy DataFrame: a row per (tokenizer, language|script)
    fertility.diagnose(report)

The public names are imported lazily so `fertility --help` stays fast.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["analyze", "load_tokenizer", "diagnose", "gate", "Report", "FertilityError"]

_WHERE = {
    "analyze": ("fertility.measure", "analyze"),
    "Report": ("fertility.measure", "Report"),
    "load_tokenizer": ("fertility.tokenizers", "load_tokenizer"),
    "diagnose": ("fertility.diagnose", "diagnose"),
    "gate": ("fertility.gate", None),  # the module: fertility.gate.gate_corpus / evaluate
    "FertilityError": ("fertility.errors", "FertilityError"),
}


def __getattr__(name: str):
    if name in _WHERE:
        module, attr = _WHERE[name]
        mod = importlib.import_module(module)
        return mod if attr is None else getattr(mod, attr)
    raise AttributeError(f"module 'fertility' has no attribute {name!r}")
