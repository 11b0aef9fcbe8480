"""`hf://datasets/ORG/NAME[@REVISION]/PATH` corpus paths (Hugging Face datasets).

What PATH names (a file, or a folder and everything under it) is fetched into the Hugging Face
cache by huggingface_hub (an optional package: `pip install huggingface_hub`), then read as
the local files it became, so labels come from the same names (`data/ben_Beng/train/`) and a
second run reads the cache. The files are fetched whole: name a language's folder
(`hf://datasets/HuggingFaceFW/fineweb-2/data/ben_Beng/train`) to bound what is fetched;
`--precision` then reads random row groups of it.

Never a hang: offline (HF_HUB_OFFLINE=1, or TRANSFORMERS_OFFLINE) no request is made, and a
hub that does not answer within fertility.tokenizers.hf.HUB_ANSWER_S (3 s) is not waited for;
either is one line naming the path (CorpusError: exit 2).
"""

from __future__ import annotations

import os

from fertility.errors import CorpusError, one_line
from fertility.hub import HUB_ANSWER_S, hub_offline, hub_unreachable

PREFIX = "hf://"


def is_remote(path: str) -> bool:
    return path.startswith(PREFIX)


def fetch(path: str) -> str:
    """The local file or folder (in the Hugging Face cache) holding what `path` names."""
    parts = path[len(PREFIX) :].split("/")
    if len(parts) < 3 or parts[0] != "datasets" or not parts[1] or not parts[2]:
        raise CorpusError(f"{path}: not a Hugging Face dataset path (hf://datasets/ORG/NAME/PATH)")
    name, _, revision = parts[2].partition("@")
    repo, sub = f"{parts[1]}/{name}", "/".join(p for p in parts[3:] if p)
    try:
        import huggingface_hub  # deferred: only for hf:// paths, and optional
        from huggingface_hub import constants
    except ImportError:
        raise CorpusError(
            f"{path}: needs the huggingface_hub package (pip install huggingface_hub)"
        ) from None
    if hub_offline():
        raise CorpusError(f"{path}: offline (HF_HUB_OFFLINE=1): a hf:// path needs the hub")
    unreachable = hub_unreachable(constants.ENDPOINT, HUB_ANSWER_S)
    if unreachable:
        raise CorpusError(f"{path}: {unreachable}")
    try:
        local = huggingface_hub.snapshot_download(
            repo,
            repo_type="dataset",
            revision=revision or None,
            allow_patterns=[sub, f"{sub}/**"] if sub else None,
        )
    except Exception as e:  # hub, HTTP and OS errors alike: one line
        raise CorpusError(f"{path}: {one_line(e)}") from None
    target = os.path.join(local, sub) if sub else local
    if not os.path.exists(target):
        raise CorpusError(f"{path}: no such file or folder in {repo}")
    return target
