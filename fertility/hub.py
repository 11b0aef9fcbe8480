"""The Hugging Face hub as every command meets it: whether the user asked for no network
(HF_HUB_OFFLINE, TRANSFORMERS_OFFLINE), and whether the hub answers at all within a bound,
so an unreachable hub is one line, never a hang. Used by `hf:` tokenizer specs
(fertility.tokenizers.hf) and `hf://` corpus paths (fertility.corpus.remote)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")

# The hub must first answer one HTTP request within HUB_ANSWER_S (any status counts): a
# closed network fails there, in seconds, instead of in the client's retries.
HUB_ANSWER_S = 3.0


def hub_offline() -> bool:
    flags = (os.environ.get("HF_HUB_OFFLINE"), os.environ.get("TRANSFORMERS_OFFLINE"))
    return any((v or "").strip().upper() in {"1", "ON", "YES", "TRUE"} for v in flags)


def within(seconds: float, fn: Callable[[], _T]) -> tuple[bool, _T | None]:
    """(True, fn()'s result) when it returns within `seconds` (its exception is raised
    here); (False, None) when it is still running (a daemon thread, left to finish on its
    own)."""
    box: dict = {}

    def work() -> None:
        try:
            box["result"] = fn()
        except BaseException as e:  # raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=work, name="fertility-hub", daemon=True)
    thread.start()
    thread.join(max(seconds, 0.0))
    if thread.is_alive():
        return False, None
    if "error" in box:
        raise box["error"]
    return True, box["result"]


def hub_unreachable(endpoint: str, timeout_s: float) -> str | None:
    """None when the hub at `endpoint` (HF_ENDPOINT) answers one HEAD request within
    `timeout_s`, name resolution included (any HTTP status, or a TLS error, counts as an
    answer: the hub client decides what it means); else why not, for the error line. urllib,
    like the hub client, goes through the proxies the environment names."""

    # deferred: huggingface_hub, and urllib's HTTP and TLS, only for hf: specs
    import http.client
    import ssl
    import urllib.error
    import urllib.request

    url = endpoint.rstrip("/") + "/"

    def ask() -> str | None:
        try:
            request = urllib.request.Request(url, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout_s):
                return None
        except urllib.error.HTTPError:
            return None  # an answer
        except urllib.error.URLError as e:
            if isinstance(e.reason, ssl.SSLError):
                return None  # it spoke TLS
            if isinstance(e.reason, TimeoutError):
                return f"the Hugging Face hub ({url}) did not answer within {timeout_s:g} s"
            return "cannot reach the Hugging Face hub"
        except TimeoutError:
            return f"the Hugging Face hub ({url}) did not answer within {timeout_s:g} s"
        except (OSError, ValueError, http.client.HTTPException):
            return "cannot reach the Hugging Face hub"

    finished, why = within(timeout_s, ask)
    if not finished:  # name resolution, which has no timeout of its own, or a slow answer
        return f"the Hugging Face hub ({url}) did not answer within {timeout_s:g} s"
    return why
