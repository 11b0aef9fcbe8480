"""Token spans rebuilt from the tokens' bytes (fertility.tokenizers.base.flat_offsets), against
spans worked out by hand."""

import numpy as np

from fertility.tokenizers.base import (
    TokenBytes,
    flat_from_id_lists,
    flat_offsets,
    pre_tokens_from_words,
)

# token id -> bytes: 0 "a", 1 "é", 2 a lone surrogate (3 bytes under surrogatepass), 3 "x",
# 4 the first byte of "é", 5 its second byte, 6 nothing (an id whose text is empty)
TABLE = [b"a", "é".encode(), "\ud800".encode("utf-8", "surrogatepass"), b"x", b"\xc3", b"\xa9", b""]
BYTES = TokenBytes.of(TABLE)


def test_token_bytes_counts_each_ids_bytes_and_the_characters_they_start():
    assert BYTES.length.tolist() == [1, 2, 3, 1, 1, 1, 0]
    assert BYTES.leads.tolist() == [1, 1, 1, 1, 1, 0, 0]  # 0xA9 continues a character
    assert BYTES.first_lead.tolist() == [1, 1, 1, 1, 1, 0, 0]


def test_spans_across_texts_with_an_empty_one_and_a_surrogate():
    texts = ["aé", "", "\ud800x", "é"]
    lists = [[0, 1], [], [2, 3], [4, 5]]
    counts = np.array([2, 0, 2, 2])
    ids, starts, ends, got_counts = flat_from_id_lists(texts, iter(lists), counts, BYTES)
    assert ids.tolist() == [0, 1, 2, 3, 4, 5]
    # local code-point spans; each byte piece of "é" spans the whole character
    assert starts.tolist() == [0, 1, 0, 1, 0, 0]
    assert ends.tolist() == [1, 2, 1, 2, 1, 1]
    assert got_counts.tolist() == [2, 0, 2, 2]


def test_texts_whose_tokens_do_not_add_up_are_named_and_clipped():
    texts = ["ax", "éa", "x"]
    ids = np.array([0, 1, 0, 3, 3])  # "ax": a; "éa": é a x (one byte too many); "x": x
    counts = np.array([1, 3, 1])
    starts, ends, bad = flat_offsets(texts, ids, counts, BYTES)
    assert bad == [0, 1]
    assert starts.tolist() == [0, 0, 1, 2, 0]  # the extra token starts at the text's end
    assert ends.tolist() == [1, 1, 2, 2, 1]
    assert flat_from_id_lists(texts, [[0], [1, 0, 3], [3]], counts, BYTES) is None


def test_tokens_that_add_up_to_the_bytes_but_not_the_characters_are_mapped_byte_by_byte():
    # "é" (two bytes, one character) over "ab" (two bytes, two characters): the byte
    # lengths agree, the characters do not, so the span is the bytes' (both characters)
    starts, ends, bad = flat_offsets(["ab"], np.array([1]), np.array([1]), BYTES)
    assert (starts.tolist(), ends.tolist(), bad) == ([0], [2], [])


def test_an_empty_token_covers_nothing_where_it_falls():
    # "a" then an empty token: it sits at the text's end (1, 1), not over the "a"
    starts, ends, bad = flat_offsets(["a"], np.array([0, 6]), np.array([2]), BYTES)
    assert (starts.tolist(), ends.tolist(), bad) == ([0, 1], [1, 1], [])


def test_pre_tokens_from_word_ids_by_hand():
    """Tokens (ids aside) of "ab cd" as a|b| c|d with words 0 0 1 1; of "xy" as one token of
    word 0 then an empty one of word 1 (no pre-token: it covers nothing); of "q r" with a
    token of no word (a special token), left out, as is a text whose word ids go back. A
    pre-token ends at its tokens' last end, not its first token's."""
    ids = np.zeros(8, np.int64)
    starts = np.array([0, 1, 2, 4, 0, 2, 0, 1])
    ends = np.array([1, 2, 4, 5, 2, 2, 1, 3])
    per_text = np.array([4, 2, 2])
    words = [[0, 0, 1, 1], [0, 1], [0, None]]
    got = pre_tokens_from_words((ids, starts, ends, per_text), [0, 1, 2], words)
    assert got.docs.tolist() == [0, 1] and got.per_doc.tolist() == [2, 1]
    assert got.spans.tolist() == [[0, 2], [2, 5], [0, 2]]
    back = pre_tokens_from_words((ids[:2], starts[:2], ends[:2], np.array([2])), [0], [[1, 0]])
    assert back.docs.size == 0 and back.spans.shape == (0, 2)
