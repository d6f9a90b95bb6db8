"""Requests to a store made many at a time: a write's sweep of the files it replaces, its
clean-up, its backup moved into place. On an object store each delete or move is a few round
trips, so N files one after another take N times them (an overwrite of 1,000 files at 50 ms a
request: minutes); here up to REQUESTS_AT_ONCE go at once. On local disk each is a system call,
made in series."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tfspark.store.fs import Location

T = TypeVar("T")
R = TypeVar("R")
REQUESTS_AT_ONCE = 16  # as the readers' requests in flight (fetch.IO_THREADS)


def each(loc: Location, do: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """[do(item) for item in items], several at once when loc is on a store. Every item is
    tried; then the first error, if any, is raised."""
    items = list(items)
    if loc.is_local or len(items) < 2:  # in this thread, one after another
        results, first = [], None
        for item in items:
            try:
                results.append(do(item))
            except Exception as e:  # noqa: BLE001 - raised once the others are tried
                first = first or e
        if first is not None:
            raise first
        return results
    with ThreadPoolExecutor(min(REQUESTS_AT_ONCE, len(items)),
                            thread_name_prefix="tfspark-store") as pool:
        done = [pool.submit(do, item) for item in items]
    return [future.result() for future in done]  # (all ended: the pool's exit waited)


def delete_files(loc: Location, rels: Iterable[str]) -> None:
    """Delete the files loc/rel (those already gone are fine)."""
    each(loc, loc.delete, rels)
