"""read_batches' own arguments checked before anything is read (make_dataset's shared ones are
checked by store/read_plan.py): one line each, naming the argument and what it takes."""

from __future__ import annotations

from typing import Any

from tfspark.errors import OptionError
from tfspark.numpy.decode import STRING_FORMS
from tfspark.numpy.padding import RAGGED_FORMS

SHUFFLES = ("window", "global")


def check_batch_args(*, num_threads: Any, strings: Any, shuffle: Any, vocabulary: Any,
                     ragged: Any, pad_to: Any, processes: Any) -> None:
    """Raise OptionError for the first of read_batches' own arguments that is not accepted."""
    for name, value in (("num_threads", num_threads), ("processes", processes)):
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or
                                  value < 1):
            raise OptionError(f"{name} must be a positive int or None, got {value!r}")
    if strings not in STRING_FORMS:
        raise OptionError(f"strings must be one of {list(STRING_FORMS)}, got {strings!r}")
    if shuffle not in SHUFFLES:
        raise OptionError(f"shuffle must be one of {list(SHUFFLES)}, got {shuffle!r}")
    if vocabulary is not None and strings != "ids":
        raise OptionError(f"vocabulary= is for strings='ids' (strings={strings!r} reads the "
                          f"strings themselves)")
    if ragged not in RAGGED_FORMS:
        raise OptionError(f"ragged must be one of {list(RAGGED_FORMS)}, got {ragged!r}")
    if pad_to is not None and ragged != "padded":
        raise OptionError("pad_to= is for ragged='padded'")
