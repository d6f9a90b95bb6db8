"""Where a read_batches iteration is, as a JSON-serializable dict, so that a training job saves
it with its checkpoint and, given it back, gets exactly the batches it had not yet received.

The batches of an iteration are a function of the data set, the reader's settings and one
seed: each epoch's file order is drawn from (seed, epoch), the files are read in turns
(numpy.interleave), and window w of an epoch is permuted by a generator drawn from
(seed, epoch, w). So a place in the iteration is (epoch, window, rows of it already handed on)
plus where the turns stood when that window began; resuming rebuilds that one window and goes
on from there. The settings that shape the batches are kept too, and a state is refused by a
reader whose settings differ (a state of other batches would not resume anything).
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tfspark.errors import OptionError, StateMismatch
from tfspark.numpy.interleave import Position
from tfspark.store.concurrency import cores
from tfspark.store.shards import Shard

FORMAT = "tfspark.read_batches/1"
_ADDED = {"seed"}  # settings that states saved by earlier versions lack: not compared then


@dataclass(frozen=True)
class ReaderState:
    """A place in an iteration (module docstring); `batches` counts what was handed on."""

    seed: int
    settings: dict[str, Any]
    iteration: int = 1
    epoch: int = 0
    window: int = 0
    taken: int = 0  # rows of the window already handed on
    turns: dict[str, Any] | None = None  # Interleave.snapshot() when the window began
    batches: int = 0
    # resumed on another number of workers, in the epoch it resumed: {"states": the old
    # workers' states, "workers": m, "worker": j, "epoch": that epoch} (numpy.elastic);
    # None otherwise
    elastic: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The state as JSON-serializable data."""
        return {"format": FORMAT, **asdict(self)}

    def at(self) -> tuple[list[Position | None] | None, int]:
        """Where each slot starts and whose turn is first, for the window this state is in."""
        if self.turns is None:
            return None, 0
        return ([None if p is None else Position(*p) for p in self.turns["slots"]],
                int(self.turns["turn"]))

    def elastic_epoch(self) -> int | None:
        """The epoch a resume on another number of workers continued (None: none)."""
        return None if self.elastic is None else int(self.elastic.get("epoch", self.epoch))

    def moved(self, **changes: Any) -> ReaderState:
        """This state with some fields changed (a copy of its fields: dataclasses.replace,
        which runs __init__ again, cost a reader 13 us a batch)."""
        if not changes.keys() <= self.__dict__.keys():
            unknown = sorted(changes.keys() - self.__dict__.keys())
            raise TypeError(f"ReaderState has no field {unknown}")
        new = object.__new__(ReaderState)
        new.__dict__.update(self.__dict__, **changes)
        return new


def fresh(seed: int | None, iteration: int, settings: dict[str, Any]) -> ReaderState:
    """The start of an iteration: a given seed makes every iteration's own seed from it (a
    new shuffle each pass, the same in every run); without one, a random seed is drawn."""
    if seed is None:
        own = secrets.randbits(63)
    else:
        own = int(np.random.SeedSequence([seed, iteration]).generate_state(1, np.uint64)[0] >> 1)
    return ReaderState(seed=own, settings=settings, iteration=iteration)


def settings_of(part: Shard, *, batch_size: int, buffer: int, slots: int, shuffle_files: bool,
                shuffle: str, epochs: int | None, drop_remainder: bool, chunk_records: int,
                columns: list[str], strings: str, seed: int | None,
                vocabularies: dict[str, list[bytes]] | None = None) -> dict[str, Any]:
    """What shapes an iteration's batches: the reader's settings and which rows of which
    files of which write it reads (a digest), and the vocabularies of strings="ids". seed:
    the one given (a state carries its iteration's own; this one draws the next passes')."""
    return {"batch_size": batch_size, "shuffle_buffer": buffer, "num_threads": slots,
            "shuffle_files": shuffle_files, "shuffle": shuffle, "epochs": epochs,
            "drop_remainder": drop_remainder,
            "chunk_records": chunk_records, "columns": columns, "strings": strings,
            "seed": seed, "files": files_digest(part),
            **({"vocabularies": _digest(vocabularies)} if vocabularies is not None else {})}


def files_digest(part: Shard) -> str:
    """Which rows of which files of which write a shard reads, as a digest."""
    files = [[loc.uri, part.versions[f] if part.versions else None,
              part.records[f] if part.records else None,
              part.keep[f] if part.keep else None] for f, loc in enumerate(part.files)]
    return hashlib.sha256(json.dumps([files, part.every], default=list).encode()
                          ).hexdigest()[:16]


def _digest(vocabularies: dict[str, list[bytes]]) -> str:
    h = hashlib.sha256()
    for name in sorted(vocabularies):
        h.update(json.dumps([name, [v.hex() for v in vocabularies[name]]]).encode())
    return h.hexdigest()[:16]


def load(state: Any, settings: dict[str, Any]) -> ReaderState:
    """A state given back (state_dict() of an earlier reader), checked against this reader's
    settings; OptionError says what differs."""
    if isinstance(state, ReaderState):
        state = state.to_dict()
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise OptionError(f"state: not a read_batches state (a dict from reader.state_dict() "
                          f"with format {FORMAT!r}); got {_short(state)}")
    known = {f for f in ReaderState.__dataclass_fields__}
    got = ReaderState(**{k: v for k, v in state.items() if k in known})
    wrong = _damage(got)
    if wrong:
        raise OptionError(f"state: a damaged read_batches state ({wrong}); give back "
                          f"reader.state_dict() as it was saved (JSON keeps it whole)")
    theirs = got.settings if isinstance(got.settings, dict) else {}
    differ = [k for k in settings if theirs.get(k) != settings[k]
              and (k in theirs or k not in _ADDED)]
    if differ:
        what = "; ".join(
            "the data set's files or the shard differ" if k == "files" else
            "the vocabularies differ" if k == "vocabularies" else
            f"{k}={theirs.get(k)!r} there, {settings[k]!r} here" for k in differ)
        raise StateMismatch(what)
    return got


def _count(value: Any, least: int = 0) -> bool:
    """Whether value is an int (not a bool) of at least `least`."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _damage(got: ReaderState) -> str | None:
    """What makes a state impossible (a field of the wrong type or out of range, turns that
    do not fit its own settings); None when nothing does."""
    if not isinstance(got.settings, dict):
        return f"settings must be a dict, got {_short(got.settings)}"
    for name in ("seed", "epoch", "window", "taken", "batches"):
        if not _count(getattr(got, name)):
            return f"{name} must be a whole number >= 0, got {_short(getattr(got, name))}"
    if not _count(got.iteration, 1):
        return f"iteration must be a whole number >= 1, got {_short(got.iteration)}"
    epochs = got.settings.get("epochs")
    if isinstance(epochs, int) and _count(epochs) and got.epoch > epochs:
        return f"epoch {got.epoch} is past its {epochs} epochs"
    if got.elastic is not None and not (
            isinstance(got.elastic, dict) and isinstance(got.elastic.get("states"), list)
            and _count(got.elastic.get("workers"), 1) and _count(got.elastic.get("worker"))):
        return (f"elastic must be a dict with the old states, workers and worker, got "
                f"{_short(got.elastic)}")
    if got.turns is None:
        return None
    slots = got.settings.get("num_threads")
    turns = got.turns
    if not isinstance(turns, dict) or not isinstance(turns.get("slots"), list):
        return f"turns must be a dict with a list of slots, got {_short(turns)}"
    if _count(slots, 1) and len(turns["slots"]) != slots:
        return f"turns has {len(turns['slots'])} slots but its num_threads is {slots}"
    if not _count(turns.get("turn")) or turns["turn"] >= len(turns["slots"]):
        return (f"turns' turn must be a slot's number (0..{len(turns['slots']) - 1}), got "
                f"{_short(turns.get('turn'))}")
    for k, slot in enumerate(turns["slots"]):
        if slot is not None and not (isinstance(slot, list) and 1 <= len(slot) <= 4 and
                                     all(_count(v) for v in slot)):
            return (f"slot {k} of turns must be null or a list of up to 4 whole numbers "
                    f">= 0 (file, record, byte, rows), got {_short(slot)}")
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def saved_setting(state: Any, key: str) -> Any:
    """The setting (num_threads, seed) a state was saved with (a reader's or, processes=N, its
    processes'); None when it has none."""
    if isinstance(state, list) and state:  # every worker's, to resume elsewhere: one run's
        state = state[0]
    if not isinstance(state, dict):
        return None
    workers = state.get("workers")
    if isinstance(workers, list) and workers and isinstance(workers[0], dict):
        state = workers[0]
    saved = state.get("settings")
    return saved.get(key) if isinstance(saved, dict) else None


def given_back(state: Any, num_threads: int | None, seed: int | None,
               processes: int | None) -> tuple[int, int | None]:
    """num_threads and seed, when not given, as the state (if any) was saved with; else
    num_threads: the cores this process may use (shared by `processes`), at most 8."""
    if num_threads is None:
        num_threads = saved_setting(state, "num_threads")
        if not isinstance(num_threads, int) or num_threads < 1:
            num_threads = max(1, min(8, cores() // (processes or 1)))
    saved_seed = saved_setting(state, "seed")
    if seed is None and isinstance(saved_seed, int):
        seed = saved_seed  # the next passes' shuffles as in the saved run
    return num_threads, seed
