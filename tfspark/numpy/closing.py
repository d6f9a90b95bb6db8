"""Ending a reader's iteration that another thread may be inside. Keras `fit` on the TensorFlow
backend reads a Python iterator through tf.data's `from_generator`, whose threads call next()
on it; when fit stops early (a callback raised), one of them may still be inside, and
generator.close() from the user's thread then raises "generator already executing"."""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def stoppable(run: Iterator[T], stop: threading.Event) -> Generator[T, Any, None]:
    """run's items, ending at the step after `stop` is set (run closed in the thread that is
    inside it, which may not be the one that asked)."""
    try:
        for item in run:
            yield item
            if stop.is_set():
                return
    finally:
        run.close()  # type: ignore[attr-defined]


def close_iteration(run: Generator[Any, Any, None], stop: threading.Event,
                    timeout: float = 30.0) -> None:
    """Close a stoppable() generator from any thread: when another thread is inside it, the
    flag ends it at that thread's next step, and this waits for that step (a batch, moments)
    up to `timeout`; after it, the flag alone ends it."""
    stop.set()
    deadline = time.monotonic() + timeout
    while True:
        try:
            run.close()
            return
        except ValueError as e:
            if "already executing" not in str(e):
                raise
            if time.monotonic() > deadline:
                return
            time.sleep(0.005)
