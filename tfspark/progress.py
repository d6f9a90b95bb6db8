"""Progress of long work (an export's stages, verify's files) as lines on the logger
"tfspark.progress" at INFO. The command line shows them; a library user who wants them adds a
handler: logging.getLogger("tfspark.progress").setLevel(logging.INFO) and logging.basicConfig().

A stage says when it begins and, when it ends, its rows, seconds and rows per second. A step of
many (one file of verify's) is a record with extra={"step": (done, total)}: the command line
draws those as one bar that redraws itself on a terminal, and as plain lines elsewhere.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger("tfspark.progress")


@dataclass
class Done:
    """What a stage reports when it ends: rows it handled and a few words more."""

    rows: int | None = None
    detail: str = ""

    def text(self, seconds: float) -> str:
        """'100,000 rows in 3.1 s (32,258 rows/s), detail' (the parts it knows)."""
        parts = [f"{self.rows:,} rows in {seconds:.1f} s" if self.rows is not None
                 else f"{seconds:.1f} s"]
        if self.rows and seconds > 0:
            parts[0] += f" ({self.rows / seconds:,.0f} rows/s)"
        return ", ".join(parts + ([self.detail] if self.detail else []))


@contextlib.contextmanager
def stage(name: str, what: str = "") -> Iterator[Done]:
    """Log `name ...` now and `name: <Done.text>` when the block ends without an error."""
    on = log.isEnabledFor(logging.INFO)
    if on:
        log.info("tfspark: %s%s ...", name, f" ({what})" if what else "")
    done = Done()
    started = time.perf_counter()
    yield done
    if on:
        log.info("tfspark: %s: %s", name, done.text(time.perf_counter() - started))


def many(n: int, noun: str) -> str:
    """'1 file', '2 files', '1,024 files': a count and its noun, for lines people read."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def step(done: int, total: int, message: str) -> None:
    """One step of `total` (a file of verify's) is done."""
    log.info("%s", message, extra={"step": (done, total)})
