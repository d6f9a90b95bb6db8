"""resumable_fit: Keras 3 model.fit from a read_batches reader that a restarted run resumes
exactly where the last checkpoint was taken, mid-epoch included, on any backend.

Keras's fit cannot start inside an epoch (its own BackupAndRestore saves the step but
restarts the epoch), and a reader restarted by hand gives other batches. So each checkpoint
(keras.resume: weights and optimizer state, the epochs' history) also holds every worker's
reader state after the last batch trained, and a resumed run is two fit calls: the rest of the
interrupted epoch (steps_per_epoch = the steps left), then the epochs after it. The batches
are those an uninterrupted run trains on, in the same order; the interrupted epoch's metrics
cover the steps after the restart only.

Keras reads ahead of the step it trains (one batch on a GPU, a prefetching thread on
TensorFlow): Feed keeps the batches it handed out until a step is trained on them, so a
checkpoint records where the trained batches end, and a second fit call gets the batches the
first one read but did not train on.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tfspark.errors import OptionError, StateMismatch
from tfspark.keras import resume
from tfspark.store.uris import local_directory

_OWN = ("x", "y", "batch_size", "initial_epoch", "shuffle")  # fit's, that resumable_fit sets


class Feed:
    """The batches of a reader for one or more fit calls, each with the reader's state after
    it; `state` is the reader's state after the last batch a step was trained on."""

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._it: Iterator[Any] | None = None
        self._out: deque[tuple[Any, dict[str, Any]]] = deque()  # handed out, not trained
        self._back: deque[tuple[Any, dict[str, Any]]] = deque()  # read ahead, given back
        self._lock = threading.Lock()  # the queues and the state
        self._reading = threading.Lock()  # one next() on the reader at a time, in order
        self._round = 0  # a generator of an earlier fit call takes nothing more
        self.state: dict[str, Any] = reader.state_dict()

    def load(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        """Start at a reader state a checkpoint saved (a list: every worker's, of a run on
        another number of workers)."""
        self._reader.load_state_dict(state)
        self.state = self._reader.state_dict()

    def batches(self) -> Iterator[Any]:
        """The batches for one fit call (a reader's iteration ends: the next one begins, as
        Keras's epochs over a reader of epochs=1 would). The reader is read outside the queues'
        lock, so a step marking its batch trained never waits on a read."""
        with self._lock:
            self._round += 1
            mine = self._round
        while True:
            with self._lock:
                if mine != self._round:
                    return
                item = self._back.popleft() if self._back else None
                if item is not None:
                    self._out.append(item)
            if item is None:
                with self._reading:
                    item = self._next()
                    if item is None:
                        return
                    with self._lock:
                        if mine != self._round:  # rewound while reading: next call's first
                            self._back.append(item)
                            return
                        self._out.append(item)
            yield item[0]

    def _next(self) -> tuple[Any, dict[str, Any]] | None:
        """The reader's next batch and its state after it; None: no data at all."""
        for _ in range(2):  # an iteration ended: one more begins
            if self._it is None:
                self._it = iter(self._reader)
            try:
                return next(self._it), self._reader.state_dict()
            except StopIteration:
                self._it = None
        return None

    def trained(self, steps: int) -> None:
        """`steps` more batches were trained on."""
        with self._lock:
            for _ in range(steps):
                self.state = self._out.popleft()[1]

    def rewind(self) -> None:
        """After a fit call: the batches it read but did not train on come first next."""
        with self._lock:
            self._round += 1
            self._back.extendleft(reversed(self._out))
            self._out.clear()


@dataclass
class Resumed:
    """What resumable_fit did: `history` {metric: [one value per epoch]} over every epoch,
    also those trained before a restart; `resumed_at` (epochs done, steps into the next) of
    the checkpoint it started from ((0, 0): a fresh start)."""

    history: dict[str, list[float]] = field(default_factory=dict)
    resumed_at: tuple[int, int] = (0, 0)


def resumable_fit(model: Any, batches: Any, epochs: int, checkpoint_dir: str | None = None, *,
                  every: int | None = None, steps_per_epoch: int | None = None,
                  callbacks: list[Any] | None = None, worker: int = 0, workers: int = 1,
                  is_chief: bool = True,
                  differs: Callable[[int], bool] | None = None,
                  every_worker_saves: bool = False, log: Callable[[str], None] | None = None,
                  source: Callable[[Feed], Any] | None = None, **fit_kwargs: Any) -> Resumed:
    """model.fit(batches, epochs=epochs, ...) that saves checkpoints to checkpoint_dir (at
    each epoch's end and every `every` steps) and, when one is there, goes on from the newest
    exactly as the run that saved it would have: same weights, optimizer state and batches.

    batches: a read_batches reader (epochs=None, or each iteration one of fit's epochs).
    every: steps between checkpoints within an epoch (None: at epoch ends only).
    steps_per_epoch: default the reader's steps_per_epoch() (from the manifest's counts).
    worker, workers, is_chief, differs, every_worker_saves, log: a worker's place in a
      multi-worker run (train_on_spark's ctx.fit passes them; see resume.epoch_checkpoint).
      A checkpoint saved by another number of workers resumes here too: each worker's
      reader, shard=(workers, worker), continues its share of the rows the old workers had
      not trained on in the interrupted epoch (read_batches with every old worker's state),
      in as many steps on every worker; the epochs after it are those of a run begun here.
    source: what a fit call reads, made of the Feed (default: its batches; TensorFlow's
      multi-worker strategy needs them as a dataset it does not shard: tf.worker).
    Other keyword arguments (validation_data, verbose, ...) go to model.fit.
    """
    import keras

    taken = [k for k in _OWN if k in fit_kwargs]
    if taken:
        raise OptionError(f"resumable_fit: {', '.join(taken)} are its own (the reader gives "
                          f"the batches, the checkpoint the epoch to start at); leave them out")
    if not hasattr(batches, "state_dict"):
        raise OptionError(f"resumable_fit: batches must be a read_batches reader (it saves the "
                          f"reader's place with each checkpoint); got {type(batches).__name__}")
    steps = steps_per_epoch or batches.steps_per_epoch()
    if not steps:
        raise OptionError("resumable_fit: the reader does not know its batches per epoch (no "
                          "counts in the manifest): give steps_per_epoch=")
    if every is not None and (not isinstance(every, int) or every < 1):
        raise OptionError(f"every={every!r}: give the steps between checkpoints (an int >= 1) "
                          f"or None for checkpoints at epoch ends only")
    feed = Feed(batches)
    make = source or Feed.batches
    done = Resumed()
    epoch, step = 0, 0
    if checkpoint_dir is not None:
        checkpoint_dir = local_directory(checkpoint_dir, "checkpoint_dir")
        found = resume.latest(checkpoint_dir)
        epoch, step = (found[0], found[1]) if found else (0, 0)
        if differs is not None:
            resume.same_on_every_worker(differs, epoch, checkpoint_dir, step)
        if found is not None:
            done.history = resume.restore(model, found[2])
            _load(feed, resume.reader_states(found[2]), found[2], checkpoint_dir, worker,
                  workers)
            done.resumed_at = (epoch, step)
            if log is not None:
                log(f"resumed from the checkpoint of epoch {epoch}"
                    + (f", step {step}" if step else "") + f" ({found[2]})")
    saver = _saver(keras, feed, done, directory=checkpoint_dir, steps=steps, every=every,
                   worker=worker, is_chief=is_chief, differs=differs,
                   every_worker_saves=every_worker_saves)
    own = [saver, *(callbacks or []), *_progress(keras, epochs, callbacks, fit_kwargs)]
    rest = steps - step
    shared = getattr(batches, "resumed_steps", lambda: None)() if step else None
    if shared is not None and steps == batches.steps_per_epoch():  # (an epoch is a pass)
        rest = shared  # this worker's share of the epoch another number of workers began
        if log is not None:
            log(f"the rest of that epoch, begun on another number of workers: {rest} steps "
                f"on each")
    if step and epoch < epochs:  # the rest of the interrupted epoch
        saver.offset, saver.end = step, step + rest
        if rest:
            model.fit(make(feed), steps_per_epoch=rest, initial_epoch=epoch,
                      epochs=epoch + 1, callbacks=own, shuffle=False, **fit_kwargs)
            feed.rewind()
        epoch += 1
    if epoch < epochs:
        saver.offset, saver.end = 0, steps
        model.fit(make(feed), steps_per_epoch=steps, initial_epoch=epoch,
                  epochs=epochs, callbacks=own, shuffle=False, **fit_kwargs)
        feed.rewind()
    return done


def _load(feed: Feed, saved: list[dict[str, Any]], checkpoint: str, directory: str,
          worker: int, workers: int) -> None:
    """Put the feed at the reader state(s) a checkpoint holds: this worker's, or, saved by
    another number of workers, all of theirs (read_batches resumes them on this shard)."""
    if not saved:
        raise OptionError(f"checkpoint {checkpoint!r} has no reader state (saved by another "
                          f"kind of run): remove {directory!r} to start afresh")
    elsewhere = len(saved) != workers
    try:
        feed.load(saved if elsewhere else saved[worker])
    except StateMismatch as e:  # (its words are for read_batches' own state=)
        raise OptionError(f"checkpoint {checkpoint!r} was saved with a reader that gives other "
                          f"batches ({e.what}): resume with the same data set and reader "
                          f"arguments, or remove {directory!r} to start afresh") from None
    except OptionError as e:
        if not elsewhere:
            raise
        n = len(saved)
        by = f"{n} worker{'s' if n > 1 else ''}"
        if any(isinstance(st.get("elastic"), dict) for st in saved):
            raise OptionError(
                f"checkpoint {checkpoint!r} was saved by {by} part-way through an epoch they "
                f"took over from a run on another number of workers: resume it on {by} "
                f"(tfspark train --workers {n}) until that epoch ends, then on any number"
                ) from None
        raise OptionError(f"checkpoint {checkpoint!r} was saved by {by} and cannot resume on "
                          f"{workers}: {e}") from None


def _progress(keras: Any, epochs: int, callbacks: list[Any] | None,
              fit_kwargs: dict[str, Any]) -> list[Any]:
    """Keras's progress bar counting the run's epochs: the rest of an interrupted epoch is a
    fit call of its own (epochs=epoch + 1), which Keras's own bar shows as "Epoch 3/3" in a
    run of 5. No bar of ours where fit shows none (verbose=0) or the caller gives one."""
    if fit_kwargs.get("verbose", "auto") == 0 or any(
            isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks or ()):
        return []

    class Progress(keras.callbacks.ProgbarLogger):
        def set_params(self, params: dict[str, Any]) -> None:
            super().set_params(params)
            self.epochs = epochs

    return [Progress()]


def _saver(keras: Any, feed: Feed, done: Resumed, *, directory: str | None, steps: int,
           every: int | None, worker: int, is_chief: bool,
           differs: Callable[[int], bool] | None, every_worker_saves: bool) -> Any:
    """The callback that tells the feed which batches were trained on and saves the
    checkpoints (each worker stages its reader state; then the chief saves)."""

    class Saver(keras.callbacks.Callback):
        offset = 0  # steps of the epoch trained before this fit call
        end = steps  # the step the epoch ends at

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self.epoch, self.seen = epoch, 0

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            ran = batch + 1 - self.seen  # steps_per_execution: `batch` is the last one run
            feed.trained(ran)
            self.seen = batch + 1
            at = self.offset + self.seen
            if every and at // every > (at - ran) // every and at < self.end:
                self._save(self.epoch, at)

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            for k, v in (logs or {}).items():
                done.history.setdefault(k, []).append(float(v))
            self.offset = 0
            self._save(epoch + 1, 0)

        def _save(self, epochs_done: int, step: int) -> None:
            if directory is None:
                return
            resume.stage_reader(directory, epochs_done, step, worker, feed.state)
            if differs is not None and differs(resume.place(epochs_done, step)):
                raise RuntimeError(f"the workers are at different steps (this one after "
                                   f"{epochs_done} epochs and {step} steps)")
            if is_chief:
                resume.save(self.model, directory, epochs_done, done.history, step, True)
            elif every_worker_saves:
                resume.save_scratch(self.model)

    return Saver()
