"""The BatchReader read_batches() returns (numpy.read): tfspark output -> batches of NumPy arrays,
for JAX, PyTorch and every Keras 3 backend. Needs neither TensorFlow nor pyspark.

    plan (store.read_plan, as make_dataset) -> per epoch: the shard's files, shuffled -> turns
    over `num_threads` slots, each a thread streaming its files (CRCs checked) and decoding
    chunks of records with the compiled kernels, which release the GIL (numpy.interleave) ->
    windows of shuffle_buffer rows, each joined and permuted by up to MIX_THREADS threads ->
    batches (with a shuffle, cut a window ahead of the consumer by a thread of their own:
    numpy.prefetch)

The batches are a function of the data, the arguments and the seed alone (not of thread
timing), so a reader says where it is (state_dict(), numpy.state) and a new one given that
state (read_batches(..., state=...)) yields exactly the batches that were still to come.
Memory is bounded: at most `QUEUED` decoded pieces wait per slot, plus at most four shuffle
windows (one being filled, one cut and waiting to be queued, one queued, one handed out).
Each file's rows are counted against the manifest at its end.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from tfspark.errors import OptionError, scrubbed
from tfspark.numpy import elastic, units
from tfspark.numpy import state as states
from tfspark.numpy.closing import close_iteration, stoppable
from tfspark.numpy.columns import Stack, Table, cut_rows, num_rows, pad_batch, slice_table
from tfspark.numpy.decode import NumpyDecoder
from tfspark.numpy.elastic import Remainder
from tfspark.numpy.interleave import FileChunks, Interleave
from tfspark.numpy.prefetch import Mixer, ahead
from tfspark.store.cache import FileCache
from tfspark.store.concurrency import files_ahead
from tfspark.store.fetch import IO_THREADS, Fetcher
from tfspark.store.read_plan import ReadPlan
from tfspark.store.shards import Shard, split_shard
from tfspark.store.shards import shard as shard_plan

_CHUNK_ROWS = 65536  # rows decoded per kernel pass (blocks: at least one block); measured
MIX_THREADS = 4  # threads joining and permuting a window's columns (at most num_threads)


class BatchReader:
    """The iterable read_batches returns; each iteration runs all its epochs again (with a
    new shuffle), and state_dict() says where the latest one is."""

    def __init__(self, plan: ReadPlan, batch_size: int, *, shuffle_buffer: int | None,
                 seed: int | None, epochs: int | None, shard: tuple[int, int] | None,
                 even_shards: bool, drop_remainder: bool, num_threads: int,
                 shuffle_files: bool, strings: str = "object", io_threads: int = IO_THREADS,
                 cache_dir: str | None = None,
                 vocabularies: dict[str, list[bytes]] | None = None, shuffle: str = "window"):
        self.plan, self.batch_size, self.epochs = plan, batch_size, epochs
        self.part: Shard = shard_plan(plan, shard, even_shards)
        self._shard = shard
        self.buffer = 10 * batch_size if shuffle_buffer is None else shuffle_buffer
        self.seed, self.drop_remainder = seed, drop_remainder
        self.num_threads, self.shuffle_files = num_threads, shuffle_files
        self.labels, self.strings, self.vocabularies = plan.labels, strings, vocabularies
        self.io_threads, self.shuffle = io_threads, shuffle
        # swept once, of the whole data set's stale copies (not each pass, not each part's)
        self.cache = FileCache.swept(cache_dir, plan.locations, plan.versions)
        self.pad_widths: dict[str, int] = {}  # ragged="padded": {feature: width}
        self.stacks: tuple[Stack, ...] = ()  # stack=: arrays of several features
        if shuffle == "global":
            units.check_global(self.part)
        self._units: list[units.Span] | None = None  # the global shuffle's, found once
        self.decoder_factory: Any = None  # None: the plan's NumpyDecoder (numpy.elastic's
        #                                   replay decodes rows' places only)
        self.last_turns: Interleave | None = None  # the turns of the latest window made
        self.elastic: Remainder | None = None  # this worker's part of a resumed epoch
        self._rem: Remainder | None = None  # ... in the iteration under way
        self._loader: tuple[int, int] | None = None  # (k, w): a loader worker's part (for_worker)
        self._iterations = 0
        self._pending: states.ReaderState | None = None  # where the next iteration starts
        self._state: states.ReaderState | None = None  # after the latest batch handed on
        self._live: tuple[weakref.ref, threading.Event] | None = None  # for close()

    def for_worker(self, workers: int, worker: int) -> BatchReader:
        """This reader's part for one of `workers` loader workers of one process (a PyTorch
        DataLoader's): disjoint parts that together yield each of its rows exactly once per
        epoch (no evening between them: they feed one training rank)."""
        part = copy.copy(self)
        part.part = split_shard(self.part, workers, worker, self.plan.rows_per_record)
        part._iterations, part._pending, part._state, part._live = 0, None, None, None
        part._loader = (workers, worker)
        at = self._pending
        if at is not None and at.elastic is not None:  # an epoch resumed on another number
            if at.batches or at.window or at.taken or self._loader is not None:
                raise OptionError(
                    "state: saved part-way through an epoch resumed on another number of "
                    "workers, by a reader without loader workers: go on with num_workers=0 "
                    "(PyTorch) or no mp_prefetch (Grain) until that epoch ends")
            # each loader worker takes an equal share of the rank's workers' rows
            part.elastic = elastic.remainder(part, at.elastic["states"], *part._place())
            part._pending = at.moved(settings=part.settings(),
                                     elastic={**at.elastic, "loader": [workers, worker]})
        return part

    def steps_per_epoch(self) -> int | None:
        """Batches per epoch, when the manifest gives the counts (batches run on across epochs,
        as make_dataset's do, unless even shards end them with each epoch)."""
        total = self.part.total
        if total is None:
            return None
        return self._batches_of(total)

    def _batches_of(self, rows: int) -> int:
        """The batches `rows` rows make (the last one short, or dropped: drop_remainder)."""
        b = self.batch_size
        return rows // b if self.drop_remainder else -(-rows // b)

    def resumed_steps(self) -> int | None:
        """Batches left of an epoch resumed on another number of workers, before the next
        iteration begins in one (load_state_dict with the old workers' states, or a state
        saved in that epoch): this worker's share of its rows in batches, less those already
        handed on; every worker's is the same.
        None: no such epoch, or its batches are not known (no manifest counts, or shards that
        are not even, whose batches run on into the next epoch)."""
        rem, at = self.elastic, self._pending
        if rem is None or rem.rows is None or at is None or at.elastic is None or \
                self.part.keep is None:
            return None
        return max(0, self._batches_of(rem.rows) - at.batches)

    def __len__(self) -> int:
        total = self.part.total
        if total is None or self.epochs is None:
            raise TypeError("the number of batches is unknown: no manifest counts, or "
                            "epochs=None (repeats forever)")
        if self.part.keep is not None:  # batches end with each epoch
            return int(self.steps_per_epoch() or 0) * self.epochs
        rows = total * self.epochs
        return self._batches_of(rows)

    # ---- where an iteration is

    def settings(self) -> dict[str, Any]:
        """What shapes this reader's batches (a state must have been saved with the same)."""
        return states.settings_of(
            self.part, batch_size=self.batch_size, buffer=self.buffer, slots=self.num_threads,
            shuffle_files=self.shuffle_files, shuffle=self.shuffle, epochs=self.epochs,
            drop_remainder=self.drop_remainder, chunk_records=self._chunk_records(),
            columns=list(self.plan.example_spec.names), strings=self.strings,
            seed=self.seed, vocabularies=self.vocabularies)

    def state_dict(self) -> dict[str, Any]:
        """Where the latest iteration is, after the last batch it handed on (before any: where
        the next one starts), as JSON-serializable data for read_batches(..., state=) or
        load_state_dict()."""
        state = self._state or self._pending
        if state is None:
            state = self._pending = states.fresh(self.seed, self._iterations + 1,
                                                 self.settings())
        return state.to_dict()

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Make the next iteration resume at `state` (from state_dict() of a reader of the same
        data set and arguments); a list: the states of every worker of an interrupted run,
        continued by this reader's shard (numpy.elastic)."""
        if isinstance(state, list):
            self._resume_elsewhere(state)
            return
        was = state.get("elastic") if isinstance(state, dict) else None
        mine = self.shard_of()
        loader = list(self._loader) if self._loader is not None else None
        if isinstance(was, dict) and state.get("epoch") == was.get("epoch") and \
                (was.get("workers"), was.get("worker"), was.get("loader")) != (*mine, loader):
            by = f" (loader worker {was['loader'][1]} of {was['loader'][0]})" \
                if was.get("loader") else ""
            here = f", loader worker {loader[1]} of {loader[0]}" if loader else ""
            raise OptionError(
                f"state: saved by worker {was.get('worker')} of {was.get('workers')}{by} while "
                f"resuming on that many workers; this reader is shard={mine}{here}: resume "
                f"it as it was saved until its epoch {state.get('epoch')} ends")
        got = states.load(state, self.settings())
        if got.elastic is not None and got.epoch == got.elastic_epoch():
            self.elastic = elastic.remainder(self, got.elastic["states"], *self._place())
        elif got.elastic is not None:
            got = got.moved(elastic=None)
        self._pending = got
        self._state = None

    def shard_of(self) -> tuple[int, int]:
        """(m, j): the shard this reader reads ((1, 0): all of it)."""
        return self._shard or (1, 0)

    def _place(self) -> tuple[int, int]:
        """This reader's part of an epoch resumed on another number of workers: its shard's,
        or for a loader worker's part (for_worker(k, w)), the w-th of k parts of it."""
        m, j = self.shard_of()
        if self._loader is None:
            return m, j
        k, w = self._loader
        return m * k, j * k + w

    def _resume_elsewhere(self, old: list[dict[str, Any]]) -> None:
        """Continue the epoch of every old worker's state on this reader's shard."""
        elastic.check_states(old, self._shard)
        m, j = self.shard_of()
        self.elastic = rem = elastic.remainder(self, old, m, j)
        iteration = old[0].get("iteration", 1)
        self._pending = states.ReaderState(
            seed=rem.seed, settings=self.settings(),
            iteration=iteration if isinstance(iteration, int) and iteration >= 1 else 1,
            epoch=rem.epoch, elastic={"states": old, "workers": m, "worker": j,
                                      "epoch": rem.epoch})
        self._state = None

    # ---- iterating

    def __iter__(self) -> Iterator[Any]:
        start = self._pending
        if start is None:
            start = states.fresh(self.seed, self._iterations + 1, self.settings())
        self._pending, self._state = None, start
        self._iterations = start.iteration
        stop = threading.Event()
        run = stoppable(self._run(start), stop)
        self._live = (weakref.ref(run), stop)
        return run

    def close(self) -> None:
        """End the latest iteration and its reading threads (as a processes= reader's close()
        ends its processes); `with read_batches(...) as reader:` closes it at the end."""
        if self._live is not None and (run := self._live[0]()) is not None:
            close_iteration(run, self._live[1])  # (a tf.data thread may be in it: Keras fit's)

    def __enter__(self) -> BatchReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    @scrubbed
    def _run(self, start: states.ReaderState) -> Iterator[Any]:
        # With a shuffle, the batches are made a window ahead by a thread of their own and
        # handed over a window at a time (per batch, the hand-over cost more than reading a
        # small batch); without one there is little to take off this thread, and the hand-over
        # cost more than it saved (bench in docs/benchmarks.md). The state a batch is handed
        # on with is the one state_dict() gives from then on.
        self._rem = self.elastic if start.elastic is not None else None
        windows = ahead(lambda: self._produce(start), 1, "tfspark-batches") \
            if self.buffer > 0 else self._produce(start)
        for window in windows:
            for batch, at in window:
                self._state = at
                yield batch

    def _produce(self, start: states.ReaderState
                 ) -> Iterator[list[tuple[Any, states.ReaderState]]]:
        """[(batch, the reader's state after it)] per window, for every batch from `start`
        on."""
        carry: Table | None = None  # fewer than batch_size rows, waiting for more
        at = start  # the state after the last batch handed on
        epoch = start.epoch
        resume: states.ReaderState | None = start
        while self.epochs is None or epoch < self.epochs:
            for pieces, w, turns in self._windows(start.seed, epoch, resume):
                total = sum(num_rows(p) for p in pieces)
                skip = resume.taken if resume is not None and w == resume.window else 0
                if skip > total:
                    raise OptionError(
                        f"state: a damaged read_batches state (taken={skip}, but window {w} "
                        f"of epoch {epoch} holds {total} rows); give back "
                        f"reader.state_dict() as it was saved")
                here = at.moved(epoch=epoch, window=w, turns=turns,
                                elastic=at.elastic if self._in_rem(epoch) else None)
                window = []
                base = 0  # the window's rows before this piece
                for piece in pieces:
                    n = num_rows(piece)
                    lo = min(n, max(0, skip - base))  # its rows handed on before a resume
                    if lo < n:
                        tables, ends, carry = cut_rows(
                            carry, slice_table(piece, lo, n) if lo else piece, self.batch_size)
                        for table, end in zip(tables, ends):
                            at = here.moved(taken=base + lo + end, batches=at.batches + 1)
                            window.append((self._split(table), at))
                    base += n
                if window:
                    yield window
                at = here.moved(taken=total, batches=at.batches)
            resume = None
            epoch += 1
            if self.part.keep is not None:  # even shards: the epoch ends its last batch
                last, carry = self._rest(carry), None
                if last is not None:
                    at = at.moved(batches=at.batches + 1)
                    yield [(last, at)]
        last = self._rest(carry)
        if last is not None:
            yield [(last, at.moved(batches=at.batches + 1))]

    def _in_rem(self, epoch: int) -> bool:
        """Whether `epoch` is the resumed one (this worker's part of it is read)."""
        return self._rem is not None and epoch == self._rem.epoch

    def _rest(self, carry: Table | None) -> Any:
        """The last, short batch of rows left over (None: none, or dropped)."""
        if carry is None or not num_rows(carry) or self.drop_remainder:
            return None
        return self._split(carry)

    def _windows(self, seed: int, epoch: int, resume: states.ReaderState | None
                 ) -> Generator[tuple[list[Table], int, dict[str, Any]], None, None]:
        """One epoch's rows, a permuted window at a time (in turn order without shuffling),
        each with its number and where the turns stood when it began; from the window of
        `resume` on when given. A window comes as tables whose rows follow one another: one
        table, or where a window needs no permutation and no stacking, the tables the reading
        threads decoded (joining them would copy every row once more)."""
        fetcher = Fetcher(self.io_threads, cache=self.cache)
        rem = self._rem if self._in_rem(epoch) else None
        part = rem.part if rem is not None else self.part
        if rem is not None:
            spans = rem.spans
        elif self.shuffle == "global":
            if self._units is None:
                self._units = units.units(self.part, self.plan.rows_per_record, fetcher)
            spans = self._units
        else:
            spans = units.whole_files(self.part)
        order = list(range(len(spans)))
        if (self.shuffle_files or self.shuffle == "global") and len(order) > 1:
            key = [seed, epoch, 1] if rem is None else [seed, epoch, 3, self._place()[1]]
            order = [int(i) for i in np.random.default_rng(key).permutation(len(order))]

        def decoder() -> Any:
            if self.decoder_factory is not None:
                return self.decoder_factory()
            return NumpyDecoder(self.plan.example_spec, self.plan.rows_per_record,
                                self.strings, self.vocabularies)

        slots = self.num_threads
        # Remote files: each slot opens its next files (their first ranges requested) while
        # it reads one, so one file's latency hides behind another's decoding.
        remote = not all(loc.is_local for loc in part.files)
        chunks = FileChunks(part, decoder, fetcher, self._chunk_records(),
                            files_ahead(self.io_threads, slots, part.sizes) if remote else 0)
        w = resume.window if resume is not None else 0
        # A resumed epoch's part begins with the old windows' rows it takes: window 0.
        first = 1 if rem is not None and num_rows(rem.leftovers) else 0
        at, turn = resume.at() if resume is not None and w >= first else (None, 0)
        turns = self.last_turns = Interleave(chunks, [spans[i] for i in order], slots, at,
                                             turn)
        began = turns.snapshot()
        pending: list[Table] = []
        have = 0
        chunked = turns.turns()
        mixer = Mixer(min(MIX_THREADS, slots))
        try:
            if first and w == 0:
                assert rem is not None
                rows = elastic.read_leftovers(self, rem.leftovers, decoder())
                yield self._mix(mixer, [rows], num_rows(rows), seed, epoch, 0), 0, began
                w = 1
            w = max(w, first)
            for pieces in chunked:
                pending += pieces
                have += sum(num_rows(p) for p in pieces)
                if have and have >= self.buffer:
                    yield self._mix(mixer, pending, have, seed, epoch, w), w, began
                    w, pending, have, began = w + 1, [], 0, turns.snapshot()
            if have:
                yield self._mix(mixer, pending, have, seed, epoch, w), w, began
        finally:
            chunked.close()  # stops the reading threads
            fetcher.close()
            mixer.close()

    def _chunk_records(self) -> int:
        return max(1, _CHUNK_ROWS // self.plan.rows_per_record)

    def _mix(self, mixer: Mixer, pieces: list[Table], rows: int, seed: int, epoch: int,
             window: int) -> list[Table]:
        """A window's pieces joined into one table (the list's one), its rows permuted unless
        there is no shuffle; the pieces as they are where nothing is permuted or stacked."""
        if self.buffer <= 0 and not self.stacks:
            return list(pieces)
        order = None
        if self.buffer > 0:
            order = np.random.default_rng([seed, epoch, 2, window]).permutation(rows)
        return [mixer.mix(pieces, order, self.stacks)]

    def _split(self, batch: Table) -> Any:
        if self.pad_widths:
            batch = pad_batch(batch, self.pad_widths)
        if not self.labels:
            return batch
        ys = {name: batch.pop(name) for name in self.labels}
        return batch, (ys[self.labels[0]] if len(self.labels) == 1 else ys)
