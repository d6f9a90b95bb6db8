"""numpy/prefetch.py: the reader's producer thread and its column mixer, with real threads."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tfspark.numpy.columns import Ragged, concat_tables, take_table
from tfspark.numpy.prefetch import Mixer, ahead


def test_ahead_yields_every_item_in_order_from_another_thread():
    threads = []

    def make():
        threads.append(threading.current_thread())
        yield from range(100)

    assert list(ahead(make, 3, "t")) == list(range(100))
    assert threads and threads[0] is not threading.current_thread()


def test_ahead_raises_the_producers_exception_after_its_items():
    def make():
        yield 1
        yield 2
        raise ValueError("file part-00003 is damaged")

    got = []
    with pytest.raises(ValueError, match="part-00003"):
        for item in ahead(make, 1, "t"):
            got.append(item)
    assert got == [1, 2]


def test_closing_early_stops_the_thread_and_closes_the_source():
    closed = threading.Event()

    def make():
        try:
            yield from range(10**9)
        finally:
            closed.set()

    before = {t.name for t in threading.enumerate()}
    items = ahead(make, 2, "tfspark-test-producer")
    assert [next(items) for _ in range(5)] == [0, 1, 2, 3, 4]
    items.close()
    assert closed.is_set()  # the source's finally ran (the reading threads stop there)
    assert "tfspark-test-producer" not in {t.name for t in threading.enumerate()} - before


@pytest.mark.parametrize("workers", [1, 3])
def test_mixer_equals_join_then_take(workers):
    rng = np.random.default_rng(0)

    def piece(n):
        lengths = rng.integers(0, 4, n)
        splits = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return {"a": rng.standard_normal(n), "b": rng.integers(0, 9, (n, 2)),
                "c": Ragged(rng.integers(0, 99, int(splits[-1])), splits),
                "d": np.array([b"x%d" % i for i in range(n)], dtype=object)}

    pieces = [piece(n) for n in (5, 0, 17, 3)]
    order = rng.permutation(25)
    mixer = Mixer(workers)
    try:
        for rows in (order, None):
            got = mixer.mix(pieces, rows)
            want = concat_tables(pieces)
            if rows is not None:
                want = take_table(want, rows)
            assert list(got) == list(want)
            for name in want:
                g, w = got[name], want[name]
                if isinstance(w, Ragged):
                    assert g.to_list() == w.to_list()
                else:
                    np.testing.assert_array_equal(g, w)
    finally:
        mixer.close()
