"""`tfspark export|demo|spec|inspect|stats|validate|verify|index|train`: the command line
(`tfspark`, or `python -m tfspark.cli`).

Argument parsing and the commands that read a data set; export, demo and spec (the commands
that run Spark) are in cli.spark_commands; errors are rendered by cli.errors, inspect by
cli.inspect, the local Spark session and the export source by cli.session.

export and demo run a local Spark session whose catalog persists in a Derby metastore under the
warehouse directory, so the backup table is still there for the next session. inspect and verify
read a written data set with no Spark at all.

An error prints one line to stderr (`error: ...`, plus a `hint: ...` line where one helps) and
exits 2, or 130 when interrupted; Spark and JVM errors are cut down to their error class and
first message line. `--debug` prints the full traceback as well.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from typing import Any, NoReturn

from tfspark import __version__
from tfspark.cli import inspect, plots, tfx
from tfspark.cli.config import TRAIN_BACKENDS, add_store_arg, filesystem_of, store_table
from tfspark.cli.errors import describe_error, interrupted, silence_stdout
from tfspark.cli.progress_lines import ProgressLines
from tfspark.cli.spark_commands import write_commands
from tfspark.errors import OptionError, install
from tfspark.quiet import quiet_tensorflow, stderr_filtered
from tfspark.store.uris import redact, redact_text

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

_EPILOG = """\
examples:
  tfspark demo                                   export the embedded sample, decode, train
  tfspark export --print-config > export.toml    a commented config to start from
  tfspark export --config export.toml --source db.events --output out/events
  tfspark inspect out/events --records 5         manifest, spec table, 5 decoded records
  tfspark verify out/events                      check every CRC, count and record

Run `tfspark COMMAND --help` for a command's options. Exit status: 0 ok, 1 verify or validate
found problems, 2 error, 130 interrupted. Add --debug for the full traceback of an error."""


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default: sys.argv[1:]); returns the exit status.

    Errors are reported on stderr as one line plus an optional hint (see `describe_error`)
    and give exit status 2 (130 for Ctrl-C); with --debug the traceback is printed first.
    """
    args = build_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    quiet_tensorflow(getattr(args, "verbose", False))
    with _logging(debug):
        return _run(args, debug)


def _run(args: argparse.Namespace, debug: bool) -> int:
    try:
        return args.run(args)
    except KeyboardInterrupt:
        if debug:
            _print_traceback()
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `tfspark inspect ... | head`: stop quietly
        silence_stdout()
        return EXIT_ERROR
    except Exception as e:
        if debug:
            _print_traceback()
        if interrupted(e):  # Ctrl-C, then a failed cleanup (e.g. stopping a dying Spark)
            print("error: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        message, hint = describe_error(e)
        print(f"error: {message}", file=sys.stderr)
        if hint and not (debug and "--debug" in hint):
            print(f"hint: {hint}", file=sys.stderr)
        return EXIT_ERROR


def _print_traceback() -> None:
    """--debug's traceback, every URI in it redacted (Spark's errors, and a store's, repeat
    paths and request URLs: a SAS token's signature is in one's query)."""
    print(redact_text(traceback.format_exc()), end="", file=sys.stderr)


@contextlib.contextmanager
def _logging(debug: bool) -> Iterator[None]:
    """tfspark's own warnings go to stderr. Other libraries' log records (py4j logs its broken
    calls through the root logger, with tracebacks, when Ctrl-C interrupts one) only with
    --debug: a root handler keeps Python from printing them by itself. The loggers are as
    they were after the block (main called from Python leaves nothing behind)."""
    loggers = [logging.getLogger(name) for name in ("tfspark", "tfspark.progress", "")]
    saved = [(lg, list(lg.handlers), lg.level, lg.propagate) for lg in loggers]
    _set_up(debug)
    try:
        yield
    finally:
        for lg, handlers, level, propagate in saved:
            for h in [h for h in lg.handlers if h not in handlers]:
                lg.removeHandler(h)
            lg.setLevel(level)
            lg.propagate = propagate


def _set_up(debug: bool) -> None:
    ours = logging.getLogger("tfspark")
    if not ours.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        ours.addHandler(handler)
        ours.setLevel(logging.INFO if debug else logging.WARNING)
        ours.propagate = False
    # The command's progress (export stages, verify's files, a first compile) on stdout.
    progress = logging.getLogger("tfspark.progress")
    if not progress.handlers:
        progress.addHandler(ProgressLines())
        progress.setLevel(logging.INFO)
        progress.propagate = False
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler() if debug else logging.NullHandler())


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line and a hint (argparse prints the
    whole usage first: 25 lines for export), exit status 2 as every other error."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        print(f"hint: run `{self.prog} --help` for its usage", file=sys.stderr)
        raise SystemExit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    """The `tfspark` argument parser: global options and one subparser per command."""
    parser = _Parser(
        prog="tfspark", epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Spark DataFrames -> TFRecord files of tf.train.Example, with a parquet copy\n"
                    "of the same rows and the feature spec alongside; inspect, verify and train\n"
                    "on the result.")
    parser.add_argument("--debug", action="store_true",
                        help="on an error, print the full traceback (also after COMMAND)")
    parser.add_argument("--verbose", action="store_true",
                        help="show what Spark's JVM and TensorFlow print at start-up, and "
                             "Keras's per-step progress in train (also after COMMAND)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    # --debug after the command too; SUPPRESS keeps a subparser from resetting the global one.
    common = _Parser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="on an error, print the full traceback")
    common.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="show the JVM's and TensorFlow's start-up output (and Keras's "
                             "per-step progress in train)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                title="commands")

    def command(name: str, help: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=description, parents=[common])

    write_commands(command)
    _read_commands(command)
    return parser


def _read_commands(command: Any) -> None:
    """inspect, stats, validate, verify, index and train: the commands that read a written
    data set."""
    p = command("inspect", "summarize a data set and decode a few records",
                "Print a data set's manifest (records, files, MiB per split and partition), its "
                "feature spec as a table, and a few records decoded with it. Needs no Spark. "
                "A lone .tfrecord[.gz] file shows its raw Example keys.")
    p.add_argument("path", help="a directory written by tfspark, or one .tfrecord[.gz] file")
    p.add_argument("--records", type=int, default=3, help="records to decode (default 3)")
    p.add_argument("--split", help="decode records of this split only")
    add_store_arg(p)
    p.set_defaults(run=inspect.run)
    plots.add_command(command)
    tfx.add_command(command)
    p = command("verify", "check every file, CRC, count and record; exit 1 on problems",
                "Read every file the manifest names, check both CRCs of every record, compare "
                "record counts with the manifest, parse every record with the spec and list "
                "stray data files. Needs no Spark. Exit status 1 when anything is wrong.")
    p.add_argument("path", help="a directory written by tfspark (or one of its splits)")
    add_store_arg(p)
    p.set_defaults(run=_verify)
    p = command("index", "write DALI's index files of a data set's TFRecord files",
                "Write, for every TFRecord file of the data set that has none yet, the index "
                "NVIDIA DALI's readers.tfrecord takes (what its tfrecord2idx writes: offset "
                "and size of each record), under PATH/_tfspark_index/; remove those of files "
                "the data set no longer holds. Every record's CRCs are checked on the way. "
                "Needs no Spark.")
    p.add_argument("path", help="a directory written by tfspark (uncompressed)")
    p.add_argument("--split", help="index this split's files only")
    add_store_arg(p)
    p.set_defaults(run=_index)
    p = command("train", "train a small Keras model on an exported data set",
                "Train a small Keras model on an exported data set with tf.data "
                f"(tfspark.make_dataset). Needs TensorFlow: {install('tf')}; with "
                f"--backend jax, Keras on JAX fed by read_batches, no TensorFlow: "
                f"{install('jax')}. Flags override the keys of --config.")
    p.add_argument("--config", default=None, metavar="TOML",
                   help="TOML of train settings (tfspark train --print-config shows one)")
    p.add_argument("--print-config", action="store_true",
                   help="print a commented config file to start from, and exit: "
                        "tfspark train --print-config > train.toml")
    p.add_argument("path", nargs="?", help="exported data set directory (or --data)")
    p.add_argument("--data", help="exported data set directory")
    p.add_argument("--label", help="label feature (default: the spec's labels)")
    p.add_argument("--train-split", metavar="NAME", help="the split to train on (default train)")
    p.add_argument("--validation-split", metavar="NAME",
                   help="the split to validate on (default: validation or val when there)")
    p.add_argument("--batch-size", type=int, help="examples per batch")
    p.add_argument("--epochs", type=int, help="passes over the train split")
    p.add_argument("--model-out", help="where to save the .keras model")
    p.add_argument("--use-stats", action=argparse.BooleanOptionalAction, default=None,
                   help="preprocessing from the export's statistics (default yes); "
                        "--no-use-stats adapts on a sample (scalar features only)")
    p.add_argument("--backend", choices=TRAIN_BACKENDS,
                   help="Keras 3's backend (default tensorflow)")
    p.add_argument("--workers", type=int,
                   help="train on N Spark tasks at once (MultiWorkerMirroredStrategy; "
                        "batch-size is then the global batch); default 1: this process. "
                        "A rerun resumes an unfinished run's checkpoints, on any N")
    p.add_argument("--master", help="Spark master for --workers (default local[*])")
    p.add_argument("--checkpoint-dir",
                   help="with --workers: a directory every executor shares, for the "
                        "checkpoints a retried stage resumes from and the workers' "
                        "logs (default: beside --model-out)")
    p.add_argument("--checkpoint-every", type=int, metavar="STEPS",
                   help="with --workers: a checkpoint every STEPS steps too, "
                        "so a retried stage resumes mid-epoch on exactly the batches left")
    add_store_arg(p)
    p.set_defaults(run=_train)


def _train(args: argparse.Namespace) -> int:
    from tfspark.cli.config import TrainConfig, load_train_config, packaged
    from tfspark.cli.train_jax import use_backend

    if args.print_config:
        print(packaged("train.toml").read_text(), end="")
        return 0
    if args.path and args.data and args.path != args.data:
        raise OptionError(f"train: the data set is named twice, {redact(args.path)!r} and "
                          f"--data {redact(args.data)!r}; give one")
    data = args.path or args.data
    flags: dict[str, Any] = {k: v for k, v in (("data", data), ("label", args.label),
                               ("train_split", args.train_split),
                               ("validation_split", args.validation_split),
                               ("batch_size", args.batch_size), ("epochs", args.epochs),
                               ("model_out", args.model_out), ("use_stats", args.use_stats),
                               ("workers", args.workers), ("master", args.master),
                               ("checkpoint_dir", args.checkpoint_dir),
                               ("checkpoint_every", args.checkpoint_every),
                               ("backend", args.backend),
                               ("store", store_table(args.store) if args.store else None),
                               ("verbose", 1 if args.verbose else None))
                               if v is not None}
    cfg = load_train_config(args.config, **flags) if args.config else \
        TrainConfig.from_mapping(flags, "the command line")
    inspect.missing_local_path(cfg.data)
    from tfspark.cli.train_cluster import unfinished

    # one worker resuming the checkpoints of a run on several: a Spark task, as they were
    several = cfg.workers > 1 or unfinished(cfg)
    if not several:
        cfg.check_in_process(str(args.config) if args.config else "the command line")
    use_backend(cfg.backend, trains_here=not several)  # before Keras is imported
    from tfspark.cli.train import train

    with stderr_filtered(args.verbose, drain=True):  # TensorFlow's C++ start-up notices
        if several:
            from tfspark.cli.train_cluster import train_distributed

            train_distributed(cfg, spark_log=args.verbose)
        else:
            train(cfg)
    return 0


def _index(args: argparse.Namespace) -> int:
    from tfspark.store.dali import DIR, write_indexes
    from tfspark.store.fs import locate
    from tfspark.store.partitions import read_data_set_manifest

    inspect.missing_local_path(args.path)
    loc = locate(args.path, filesystem_of(args.path, args.store))
    pairs, written, removed = write_indexes(loc, args.split)
    gone = f", {removed} of files no longer in it removed" if removed else ""
    print(f"{len(pairs)} TFRecord file(s) indexed for DALI: {written} index file(s) written"
          f"{gone}, under {redact(loc.child_uri(DIR))}")
    print("give DALI's fn.readers.tfrecord path=[...] and index_path=[...] as "
          "tfspark.dali_index(path) pairs them")
    block = read_data_set_manifest(loc).rows_per_record
    if block > 1:
        print(f"note: the block layout: each record DALI reads is a block of up to {block:,} "
              f"rows (as tfspark's readers read it), not one row")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from tfspark.store.integrity import verify

    inspect.missing_local_path(args.path)
    report = verify(args.path, filesystem_of(args.path, args.store))
    print(report.render())
    return 0 if report.ok else 1


# ---------------------------------------------------------------- commands



if __name__ == "__main__":
    raise SystemExit(main())
