"""Train a small Keras model on a data set exported by tfspark: the `tfspark train` job.

What goes into the model comes from the export's statistics of the train split
(cli.train_features: numbers normalized, categories looked up, arrays pooled, row ids and free
text left out with a line saying so) or, for data without statistics, is adapted on a sample of
batches (cli.train_sample). The label decides the head (train_features.head). On the TensorFlow
backend make_dataset feeds it; on JAX, read_batches (cli.train_feed). With a worker context, it is
one of train_on_spark's workers (cli.train_cluster): read_batches feeds its training through
ctx.fit on either backend, so a retried stage resumes exactly (mid-epoch with
checkpoint_every). Keras, TensorFlow and JAX are imported inside the functions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from tfspark.cli import train_features, train_feed, train_jax, train_sample
from tfspark.cli.config import TrainConfig
from tfspark.cli.train_features import pick_label, task_from_stats, task_of
from tfspark.errors import OptionError, SchemaError
from tfspark.numpy.columns import num_rows
from tfspark.spec import Feature, FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fs import store_filesystem
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.uris import redact

# ---------------------------------------------------------------- the job

def train(config: TrainConfig | Mapping[str, Any],
          echo: Callable[[str], None] = print, worker: Any = None) -> dict[str, Any]:
    """Train, validate, save; return the numbers it printed (see the keys of _fit's result).

    worker: a tfspark.keras.worker.WorkerContext when this is one of several workers of
    train_on_spark (see train_distributed): the model is built in its scope (strategy or
    distribution), each worker reads its shard at batch_size / workers, the chief saves.
    """
    cfg = config if isinstance(config, TrainConfig) else TrainConfig.from_mapping(config)
    if worker is None:
        cfg.check_in_process("config")
    n = worker.num_workers if worker is not None else 1
    data = _Data.of(cfg, _batch_per_worker(cfg, n), worker)
    chosen = _choose(cfg, data)
    chosen.describe(cfg, data.label.name, echo)
    with worker.scope() if worker is not None else contextlib.nullcontext():
        model = _model(cfg, data, chosen)
    train_ds = data.read_train(cfg, chosen.used)
    val_ds = data.read(cfg, data.val_split, chosen.used, shuffle=0) if data.val_split else None
    if val_ds is None:  # else "final: auc=..." reads as a validation figure
        others = [s for s in data.top.splits if s != data.train_split]
        echo(f"no validation split in {redact(cfg.data)} (splits: "
             f"{list(data.top.splits) or 'none'}): the metrics are of the training data"
             + ("; --validation-split NAME (validation_split in --config) names the one to "
                "validate on" if others else ""))
    if worker is not None:
        steps = train_feed.steps(train_ds, cfg.steps_per_epoch)
        echo(f"worker {worker.index} of {n}: shard {worker.index} of the "
             f"{data.train_split or 'data'} at {data.batch} examples per step (global batch "
             f"{cfg.batch_size}), {steps} steps per epoch")
    return _fit(cfg, data, chosen, model, train_ds=train_ds, val_ds=val_ds, echo=echo,
                worker=worker)


def check(cfg: TrainConfig, workers: int) -> str:
    """What train() on `workers` workers refuses before it trains (the batch, the data set,
    its splits, the label, the statistics' plan), found without Keras or a framework; the
    label it trains on. The driver of train --workers checks here first: in the workers, a
    bad setting would fail every worker of every attempt of the stage Spark retries."""
    data = _Data.of(cfg, _batch_per_worker(cfg, workers), None)
    if data.jax or (cfg.use_stats and data.top.feature_stats(data.train_split)):
        _choose(cfg, data)  # without statistics it adapts on a sample: that reads the data
    return data.label.name


def _batch_per_worker(cfg: TrainConfig, workers: int) -> int:
    if cfg.batch_size % workers:
        raise OptionError(f"batch_size {cfg.batch_size} is the global batch of {workers} "
                          f"workers: make it a multiple of {workers}")
    return cfg.batch_size // workers


@dataclasses.dataclass
class _Data:
    """What the job reads: the data set's manifest and spec, its train and validation splits,
    the label and the features that may be used, and how this process reads them."""

    path: str
    top: mf.Manifest
    spec: FeatureSpec
    train_split: str | None
    val_split: str | None
    label: Feature
    candidates: list[Feature]
    batch: int  # this process's batch (the global batch / workers)
    worker: Any
    fs: Any  # the filesystem of cfg's [store], or None
    jax: bool  # read by read_batches for Keras on JAX (train_feed), not by make_dataset

    @classmethod
    def of(cls, cfg: TrainConfig, batch: int, worker: Any) -> _Data:
        """The data of cfg.data; OptionError / SchemaError when it cannot be trained on."""
        fs = store_filesystem(cfg.data, cfg.store, "the train config")
        top = read_data_set_manifest(cfg.data, fs)
        spec = top.spec
        if spec is None:
            raise SchemaError(f"{redact(cfg.data)!r} holds raw records, not Examples: nothing to "
                              f"train on")
        splits = list(top.splits)
        if splits and cfg.train_split not in splits:
            raise OptionError(f"{redact(cfg.data)!r} has splits {splits} but no "
                              f"{cfg.train_split!r}; set train_split (--train-split)")
        val = cfg.validation_split
        if val is None:
            val = next((s for s in VALIDATION_SPLITS if s in splits), None)
        elif val not in splits:
            raise OptionError(f"{redact(cfg.data)!r} has "
                              f"{f'splits {splits} but' if splits else 'no splits, so'} no "
                              f"{val!r} to validate on: set validation_split "
                              f"(--validation-split) to one it has, or leave it out")
        label = pick_label(spec, cfg.label)
        return cls(cfg.data, top, spec, cfg.train_split if splits else None, val, label,
                   [f for f in spec.features if f.name != label.name
                    and f.name not in cfg.exclude], batch, worker, fs, cfg.backend == "jax")

    def read_train(self, cfg: TrainConfig, features: list[Feature]) -> Any:
        """The train split's batches: a read_batches reader on JAX and on a worker (whose
        ctx.fit saves the reader's place), else make_dataset (repeated with steps_per_epoch)."""
        if self.jax or self.worker is not None:
            return train_feed.read(self, cfg, self.train_split, features, None,
                                  "ids" if self.jax else "object")
        return self.read(cfg, self.train_split, features,
                         epochs=None if cfg.steps_per_epoch else 1)

    def read(self, cfg: TrainConfig, split: str | None, features: list[Feature],
             epochs: int | None = 1, shuffle: int | None = None, sample: bool = False) -> Any:
        """make_dataset of these features and the label (shuffle: cfg's unless given); on
        JAX, read_batches (train_feed.read)."""
        if self.jax:
            return train_feed.read(self, cfg, split, features, shuffle)
        from tfspark.tf.dataset import make_dataset

        sub = dataclasses.replace(self.spec, features=tuple(features) + (self.label,))
        several = self.worker is not None and self.worker.num_workers > 1
        # The sample that preprocessing adapts on is the same on every worker (whole data,
        # fixed order); training and validation read this worker's shard.
        return make_dataset(self.path, self.batch, split=split, spec=sub,
                            label_cols=[self.label.name], epochs=epochs, seed=cfg.seed,
                            filesystem=self.fs,
                            shuffle_buffer=cfg.shuffle_buffer if shuffle is None else shuffle,
                            deterministic=sample and several,
                            shard=self.worker.shard if self.worker is not None and not sample
                            else None)


@dataclasses.dataclass
class _Chosen:
    """What the job does with each feature, and the task: from the export's statistics (plan),
    or adapted on a sample (sample_x, sample_y) when there are none."""

    numeric: list[Feature]
    categorical: list[tuple[Feature, list[Any]]]
    arrays: list[Feature]
    ignored: dict[str, str]
    task: dict[str, Any]
    how: dict[str, str]  # one-hot or embedded, per categorical feature
    plan: Any = None  # train_features.Plan (from statistics)
    sample_x: Any = None
    sample_y: Any = None

    @property
    def used(self) -> list[Feature]:
        """Every feature the model takes."""
        return self.numeric + [f for f, _ in self.categorical] + self.arrays

    def describe(self, cfg: TrainConfig, label: str, echo: Callable[[str], None]) -> None:
        """The lines that say what the model takes and what it leaves out."""
        task = self.task
        echo(f"label {label!r}: {task['kind']}"
             + (f" ({task['classes']} classes)" if task["kind"] == "multiclass" else ""))
        echo("preprocessing: " + ("from the export's statistics" if self.plan is not None else
                                  f"adapted on {cfg.adapt_batches} batches (no statistics): "
                                  f"{len(self.sample_y)} rows, label mean "
                                  f"{float(self.sample_y.mean()):.6f}"))
        if self.numeric:  # (a kind the model has none of: no line)
            echo(f"numeric features ({len(self.numeric)}): "
                 f"{', '.join(f.name for f in self.numeric)}")
        if self.categorical:
            echo(f"categorical features ({len(self.categorical)}): " + ", ".join(
                f"{f.name} ({len(v)} values"
                f"{', ' + self.how[f.name] if f.name in self.how else ''})"
                for f, v in self.categorical))
        if self.arrays:
            echo(f"pooled array features ({len(self.arrays)}): "
                 f"{', '.join(f.name for f in self.arrays)}")
        for name, why in self.ignored.items():
            echo(f"ignored {name}: {why}")


def _choose(cfg: TrainConfig, data: _Data) -> _Chosen:
    """The features and task, from the statistics of the train split (every row, no sample),
    or adapted on a sample without them (stats=False, or use_stats = false)."""
    stats = data.top.feature_stats(data.train_split) if cfg.use_stats else None
    if stats:
        p = train_features.plan(data.candidates, stats, cfg)
        if data.jax:
            train_jax.prune(p)
        chosen = _Chosen([f for f, _ in p.numeric], [(f, v) for f, v, _ in p.categorical],
                         [f for f, _ in p.arrays], p.ignored,
                         task_from_stats(data.label, stats.get(data.label.name) or {}),
                         {f.name: h for f, _, h in p.categorical}, plan=p)
    elif data.jax:
        raise OptionError(f"backend 'jax' builds its preprocessing from the export's statistics "
                          f"and {redact(cfg.data)!r} has none for "
                          f"{data.train_split or 'its rows'}: "
                          f"write it with statistics, or train on backend 'tensorflow'")
    else:
        usable = [f for f in data.candidates if f.kind == "fixed"]
        sample_x, sample_y = train_sample.sample(
            data.read(cfg, data.train_split, usable, sample=True), cfg.adapt_batches)
        numeric, categorical, ignored = train_sample.choose_from_sample(
            data.candidates, sample_x, cfg.max_vocab)
        chosen = _Chosen(numeric, categorical, [], ignored,
                         task_of(data.label, sample_y.tolist()), {}, sample_x=sample_x,
                         sample_y=sample_y)
    if not chosen.used:
        raise SchemaError(f"no usable feature in {redact(cfg.data)!r}: {chosen.ignored}")
    return chosen


def _model(cfg: TrainConfig, data: _Data, chosen: _Chosen) -> Any:
    """The compiled model: preprocessing from the statistics' plan, or adapted on the sample."""
    if chosen.plan is not None:
        spec = train_jax.float_inputs(data.spec, chosen.plan) if data.jax else data.spec
        inputs, parts = train_features.model_parts(spec, chosen.plan, cfg,
                                                   "ids" if data.jax else "object")
        return train_features.head(inputs, parts, chosen.task, cfg)
    return train_sample.build_model(data.spec, chosen.numeric, chosen.categorical,
                                    chosen.task, chosen.sample_x, cfg)


def _fit(cfg: TrainConfig, data: _Data, chosen: _Chosen, model: Any, *, train_ds: Any,
         val_ds: Any, echo: Callable[[str], None], worker: Any) -> dict[str, Any]:
    """Fit (resuming from this run's checkpoints on the cluster), report and save."""
    input_rate = _input_rate(train_ds, cfg.bench_batches)
    if input_rate is not None:  # (bench_batches = 0: not measured)
        echo(f"input pipeline alone: {input_rate:,.0f} examples/s")
    timer = _epoch_timer()
    hist, resumed_from = _run_fit(cfg, data, model, train_ds=train_ds, val_ds=val_ds,
                                  timer=timer, worker=worker)
    examples = _epoch_examples(cfg, data.top, data.train_split)
    train_rate = examples / min(timer.seconds) if timer.seconds else None
    if train_rate is None:
        echo("training: no whole epoch ran in this run to time (it resumed in the last one)")
    else:
        echo(f"training: {train_rate:,.0f} examples/s (fastest epoch of "
             f"{len(timer.seconds)})")
    final = {k: float(v[-1]) for k, v in hist.items()}
    echo("final: " + ", ".join(f"{k}={v:.4f}" for k, v in final.items()))
    _save(model, cfg.model_out, worker)
    if worker is None or worker.is_chief:
        echo(f"model saved to {cfg.model_out}")
    return {"model_path": cfg.model_out, "task": chosen.task["kind"], "label": data.label.name,
            "numeric": [f.name for f in chosen.numeric],
            "categorical": [f.name for f, _ in chosen.categorical],
            "arrays": [f.name for f in chosen.arrays], "ignored": chosen.ignored,
            "preprocessing": "statistics" if chosen.plan is not None else "sample",
            "input_examples_per_s": input_rate,
            "train_examples_per_s": train_rate, "final": final,
            "epoch_seconds": list(timer.seconds),
            "workers": worker.num_workers if worker is not None else 1,
            "resumed_from": resumed_from,
            "history": {k: [float(x) for x in v] for k, v in hist.items()}}


def _run_fit(cfg: TrainConfig, data: _Data, model: Any, *, train_ds: Any, val_ds: Any,
             timer: Any, worker: Any) -> tuple[dict[str, list[float]], int]:
    """model.fit; its history over every epoch (also those before a restart) and the epochs
    restored from a checkpoint. Workers resume exactly, at the last epoch's end or, with
    `checkpoint_every`, mid-epoch (ctx.fit over their read_batches reader)."""
    if data.jax:
        fed = train_feed.fit_args(cfg, model, train_ds, val_ds)
    else:  # a worker's reader knows its steps; make_dataset's are its cardinality's
        fed = {"x": train_ds, "validation_data": val_ds, "steps_per_epoch":
               train_feed.steps(train_ds, cfg.steps_per_epoch) if worker is not None
               else cfg.steps_per_epoch}
    timer.whole = fed.get("steps_per_epoch")  # (None: make_dataset's cardinality)
    if worker is not None:
        done = worker.fit(model, fed.pop("x"), cfg.epochs, every=cfg.checkpoint_every,
                          verbose=cfg.verbose, callbacks=[timer], **fed)
        return done.history, done.resumed_at[0]  # every epoch once, also before a restart
    if data.jax:
        fed["x"] = train_feed.passes(fed["x"])
    history = model.fit(**fed, epochs=cfg.epochs, verbose=cfg.verbose, shuffle=False,
                        callbacks=[timer])
    return history.history, 0


def _save(model: Any, path: str, worker: Any) -> None:
    """The chief saves (on JAX the other workers take part: WorkerContext.save)."""
    if worker is None or worker.is_chief:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with warnings.catch_warnings():
        # Keras's saving calls np.array on TF variables, which numpy 2 flags; not ours to fix.
        warnings.filterwarnings("ignore", "__array__ implementation", DeprecationWarning)
        if worker is None:
            model.save(path)
        else:
            worker.save(model, path)



VALIDATION_SPLITS = ("validation", "val")  # validated on when present and none is named
BENCH_SECONDS = 0.5  # at least this long after the first batch: past what was read ahead


def _input_rate(ds: Any, n_batches: int) -> float | None:
    """Examples/s of iterating the dataset alone, over at least n_batches batches and
    BENCH_SECONDS after the first one (pipeline start-up excluded; a reader that reads ahead
    had most of a small data set ready at once). When the data ends first, the rate is of
    the whole pass, first batch included. A reader is put back where it was, so training
    starts where it would have without this. None: not measured (n_batches 0, no batch)."""
    if n_batches <= 0:
        return None
    state = ds.state_dict() if hasattr(ds, "state_dict") else None
    begun = time.perf_counter()
    it = iter(ds)
    try:
        first = _rows(next(it)[0])
        start, n, taken = time.perf_counter(), 0, 0
        while taken < n_batches or time.perf_counter() - start < BENCH_SECONDS:
            try:
                x, _y = next(it)
            except StopIteration:
                return (first + n) / (time.perf_counter() - begun)
            n, taken = n + _rows(x), taken + 1
        return n / (time.perf_counter() - start)
    except StopIteration:
        return None
    finally:
        if hasattr(it, "close"):
            it.close()  # a reader's threads stop
        if state is not None:
            ds.load_state_dict(state)


def _rows(x: Any) -> int:
    """The rows of a batch's features (a dict of arrays, tensors or Ragged columns)."""
    first = next(iter(x.values()))
    if getattr(first, "shape", None) is not None:  # arrays, tensors, tf.RaggedTensor
        return int(first.shape[0])
    return num_rows(x)  # read_batches' columns, a Ragged first


def _epoch_timer() -> Any:
    """A Keras callback recording the training wall time (validation excluded) of each whole
    epoch: not of the rest of one interrupted and resumed (fewer steps than `whole`, the
    steps of an epoch, when it is known; else than the most any epoch took)."""
    import keras

    class EpochTimer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self._seconds: list[float] = []
            self._steps: list[int] = []
            self._start = self._pause = 0.0
            self.whole: int | None = None

        @property
        def seconds(self) -> list[float]:
            whole = self.whole or max(self._steps, default=0)
            return [s for s, n in zip(self._seconds, self._steps) if n == whole]

        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._start = time.perf_counter()
            self._steps.append(0)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._steps[-1] = batch + 1

        def on_test_begin(self, logs: Any = None) -> None:
            self._pause = time.perf_counter()

        def on_test_end(self, logs: Any = None) -> None:
            self._start += time.perf_counter() - self._pause

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            self._seconds.append(time.perf_counter() - self._start)

    return EpochTimer()


def _epoch_examples(cfg: TrainConfig, top: mf.Manifest, split: str | None) -> int:
    if cfg.steps_per_epoch:
        return cfg.steps_per_epoch * cfg.batch_size
    return top.rows_of_split(split)
