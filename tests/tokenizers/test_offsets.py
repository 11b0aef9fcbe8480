"""Token spans rebuilt from token byte lengths (fertility.tokenizers.base.flat_offsets), against
spans worked out by hand."""

import numpy as np

from fertility.tokenizers.base import flat_from_id_lists, flat_offsets

# token id -> byte length: 0 "a" (1), 1 "é" (2), 2 a lone surrogate (3 bytes under
# surrogatepass), 3 "x" (1), 4 the first byte of "é" (1), 5 its second byte (1)
LENGTHS = np.array([1, 2, 3, 1, 1, 1])


def test_spans_across_texts_with_an_empty_one_and_a_surrogate():
    texts = ["aé", "", "\ud800x", "é"]
    lists = [[0, 1], [], [2, 3], [4, 5]]
    counts = np.array([2, 0, 2, 2])
    ids, starts, ends, got_counts = flat_from_id_lists(texts, iter(lists), counts, LENGTHS)
    assert ids.tolist() == [0, 1, 2, 3, 4, 5]
    # local code-point spans; each byte piece of "é" spans the whole character
    assert starts.tolist() == [0, 1, 0, 1, 0, 0]
    assert ends.tolist() == [1, 2, 1, 2, 1, 1]
    assert got_counts.tolist() == [2, 0, 2, 2]


def test_texts_whose_tokens_do_not_add_up_are_named_and_clipped():
    texts = ["ax", "éa", "x"]
    ids = np.array([0, 1, 0, 3, 3])  # "ax": a; "éa": é a x (one byte too many); "x": x
    counts = np.array([1, 3, 1])
    starts, ends, bad = flat_offsets(texts, ids, counts, LENGTHS)
    assert bad == [0, 1]
    assert starts.tolist() == [0, 0, 1, 2, 0]  # the extra token starts at the text's end
    assert ends.tolist() == [1, 1, 2, 2, 1]
    assert flat_from_id_lists(texts, [[0], [1, 0, 3], [3]], counts, LENGTHS) is None
