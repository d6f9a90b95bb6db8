"""The command line's view of tfspark.progress (progress): stage lines on stdout
as they come; the steps of many (verify's files) as one bar that redraws itself on a terminal,
and elsewhere (a log file, a pipe, CI) as lines: the first step's, one every EVERY_S seconds
and the last's, so that a data set of thousands of files does not fill a job's log."""

from __future__ import annotations

import logging
import shutil
import sys
import time
from typing import Any, TextIO

BAR = 24  # characters of the bar
EVERY_S = 10.0  # not on a terminal: a step's line at most this often (the first and last always)


class ProgressLines(logging.Handler):
    """A logging handler for "tfspark.progress" that writes to sys.stdout (the one of the
    moment: main() may run several times in one process, under another stdout each time)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.bar_open = False  # a bar is drawn and its line not ended
        self.clock = time.monotonic
        self._step_line_at: float | None = None  # when the last step's line was written

    @property
    def stream(self) -> TextIO:
        """Where the lines go: the current sys.stdout."""
        return sys.stdout

    def emit(self, record: logging.LogRecord) -> None:
        """Write one record: a step as the bar (a terminal) or a line; anything else a line."""
        try:
            text = record.getMessage()
            step: Any = getattr(record, "step", None)
            if step is not None and bool(getattr(self.stream, "isatty", lambda: False)()):
                done, total = step
                fill = BAR * done // max(total, 1)
                line = f"[{'#' * fill}{'.' * (BAR - fill)}] {text}"
                width = shutil.get_terminal_size((100, 20)).columns - 1
                self.stream.write("\r" + line[:width].ljust(width))
                self.bar_open = done < total
                if not self.bar_open:
                    self.stream.write("\n")
            else:
                if step is not None and not self._step_line_due(*step):
                    return
                self.stream.write(("\n" if self.bar_open else "") + text + "\n")
                self.bar_open = False
            self.stream.flush()
        except Exception:  # noqa: BLE001 - as logging.StreamHandler: report, do not raise
            self.handleError(record)

    def _step_line_due(self, done: int, total: int) -> bool:
        """Whether a step's line is written where no bar is drawn: the first of a run of
        steps, then one EVERY_S seconds, and the last."""
        now = self.clock()
        first = self._step_line_at is None or done <= 1
        if done >= total:
            self._step_line_at = None  # the next step begins a new run
            return True
        if first or now - self._step_line_at >= EVERY_S:  # type: ignore[operator]
            self._step_line_at = now
            return True
        return False
