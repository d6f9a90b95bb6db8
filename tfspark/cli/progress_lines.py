"""The command line's view of tfspark.progress (tfspark/progress.py): stage lines on stdout
as they come; the steps of many (verify's files) as one bar that redraws itself on a terminal,
and as a line each elsewhere (a log file, a pipe, CI)."""

from __future__ import annotations

import logging
import shutil
import sys
from typing import Any, TextIO

BAR = 24  # characters of the bar


class ProgressLines(logging.Handler):
    """A logging handler for "tfspark.progress" that writes to sys.stdout (the one of the
    moment: main() may run several times in one process, under another stdout each time)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.bar_open = False  # a bar is drawn and its line not ended

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
                self.stream.write(("\n" if self.bar_open else "") + text + "\n")
                self.bar_open = False
            self.stream.flush()
        except Exception:  # noqa: BLE001 - as logging.StreamHandler: report, do not raise
            self.handleError(record)
