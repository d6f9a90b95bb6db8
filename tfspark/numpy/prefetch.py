"""The reader's work off the consumer's thread: a generator run in a thread of its own a bounded
number of items ahead (tf.data's prefetch), and a window's columns joined and permuted by a few
threads at once. The shuffle's copies are most of what the reader does outside its decoding
threads, and NumPy releases the GIL while it copies, so a training loop (a step dispatched, a
batch put on the device) no longer waits for them. Measured in bench/bench_gpu_feed.py.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from tfspark.numpy.columns import Stack, Table, concat_rows, fill, take_rows
from tfspark.store.fetch import hand_over

T = TypeVar("T")
_END = object()


def ahead(make: Callable[[], Iterator[T]], depth: int, name: str) -> Iterator[T]:
    """The items of make()'s generator, produced by a thread up to `depth` items ahead. Its
    exception is raised here; closing this generator stops the thread and closes make()'s
    generator in it (which stops the reading threads) before returning."""
    items: queue.Queue = queue.Queue(max(1, depth))
    stop = threading.Event()

    def produce() -> None:
        try:
            source = make()
            try:
                for item in source:
                    if not hand_over(items, (True, item), stop):
                        return
            finally:
                source.close()  # type: ignore[attr-defined]
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised there
            hand_over(items, (False, e), stop)
            return
        hand_over(items, (True, _END), stop)

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while True:
            ok, item = items.get()
            if not ok:
                raise item
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        thread.join()


class Mixer:
    """Joins a window's pieces and permutes its rows, the columns (and the stacks' rows) split
    over `workers` threads (one: in the calling thread). close() ends the threads."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="tfspark-mix") \
            if self.workers > 1 else None

    def mix(self, pieces: list[Table], rows: np.ndarray | None,
            stacks: Sequence[Stack] = ()) -> Table:
        """The pieces' rows one after another, then in the order `rows` (None: as they are);
        each stack's columns written side by side into one array (numpy.columns)."""
        inside = {c for s in stacks for c in s.columns}
        names = [n for n in pieces[0] if n not in inside]

        def part(chunk: list[str]) -> list[Any]:
            out = []
            for name in chunk:
                col = concat_rows([p[name] for p in pieces])
                out.append(col if rows is None else take_rows(col, rows))
            return out

        cols = self._spread(part, names + sorted(inside))
        out = {name: cols[name] for name in names}
        if stacks:
            n = len(cols[stacks[0].columns[0]])
            cut = np.linspace(0, n, self.workers + 1).astype(int)
            jobs = []
            for s in stacks:
                out[s.name] = np.empty((n, s.width), s.dtype)
                jobs += [(s, out[s.name], int(lo), int(hi)) for lo, hi in zip(cut, cut[1:])
                         if hi > lo]

            def write(job: tuple[Stack, np.ndarray, int, int]) -> None:
                s, matrix, lo, hi = job
                fill(matrix, s, [cols[c] for c in s.columns], lo, hi)

            # by row ranges, so no two threads write the same rows' cache lines
            list(self._pool.map(write, jobs) if self._pool else map(write, jobs))
        return out

    def _spread(self, part: Callable[[list[str]], list[Any]], names: list[str]
                ) -> dict[str, Any]:
        """{name: part's result}, the names split over the threads."""
        if self._pool is None or len(names) < 2:
            return dict(zip(names, part(names)))
        chunks = [c for c in (names[i::self.workers] for i in range(self.workers)) if c]
        done = list(self._pool.map(part, chunks))
        return {name: col for chunk, got in zip(chunks, done) for name, col in zip(chunk, got)}

    def close(self) -> None:
        """End the threads (after the work given to them)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
