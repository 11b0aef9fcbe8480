"""fertility.threads.by_chunks: the results of one call over the whole list, in order, for
any length; a forked child (a worker process) gets a pool of its own instead of waiting
forever on its parent's threads, which fork does not copy."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from fertility import threads


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 100])
def test_chunks_give_the_whole_list_in_order(n, monkeypatch):
    items = list(range(n))
    seen = []

    def squares(part):
        seen.append(len(part))
        return [x * x for x in part]

    for cores in (1, 2, 3):
        seen.clear()
        monkeypatch.setattr(threads, "usable_cores", lambda c=cores: c)
        assert threads.by_chunks(squares, items) == [x * x for x in items]
        assert sum(seen) == n and len(seen) == max(1, min(cores, n))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_makes_its_own_pool(monkeypatch):
    """os.fork after the parent's pool ran: a child handed the parent's pool waits forever
    (its threads were not copied; checked by giving the child the parent's pool: killed by
    the alarm below); with a pool of its own it answers."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)

    def slow(part):  # both of the parent's threads started: each chunk takes a while
        time.sleep(0.1)
        return part

    assert threads.by_chunks(slow, [1, 2, 3]) == [1, 2, 3]
    time.sleep(0.3)  # both idle, waiting for work: in a child no thread would take it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer within 10 s or be killed
        try:
            signal.alarm(10)
            got = threads.by_chunks(lambda part: [x + 1 for x in part], list(range(10)))
            os.write(write, json.dumps(got).encode())
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    with os.fdopen(read) as fh:
        answer = fh.read()
    assert os.waitstatus_to_exitcode(status) == 0, "the child hung on its parent's pool"
    assert json.loads(answer) == list(range(1, 11))
