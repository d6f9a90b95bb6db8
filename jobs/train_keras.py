"""Train a small Keras model on a tfspark data set: in this process (no Spark needed),

    python jobs/train_keras.py [--config train.toml] [--data out/ds] [--epochs 5]

or on N Spark tasks at once (tfspark.train_on_spark, MultiWorkerMirroredStrategy), with the
session spark-submit provides (its master, its executors, their GPUs):

    spark-submit jobs/train_keras.py --workers 4 --data /dbfs/tfspark/ds \
        --checkpoint-dir /dbfs/tfspark/ckpt --model-out /dbfs/tfspark/model.keras

Settings are in a train config (`tfspark train --print-config` prints the default one, used when
--config is not given; see tfspark.cli.config.TrainConfig); flags override them.
"""

from __future__ import annotations

import argparse
import json
import sys

from tfspark.cli.config import load_train_config, packaged
from tfspark.cli.train import train
from tfspark.errors import TfsparkError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="train_keras.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=str(packaged("train.toml")))
    p.add_argument("--data", help="tfspark directory to train on")
    p.add_argument("--label", help="label column (default: the spec's)")
    p.add_argument("--train-split", dest="train_split", metavar="NAME")
    p.add_argument("--validation-split", dest="validation_split", metavar="NAME",
                   help="default: validation or val when the data set has it")
    p.add_argument("--batch-size", type=int, dest="batch_size")
    p.add_argument("--epochs", type=int)
    p.add_argument("--steps-per-epoch", type=int, dest="steps_per_epoch")
    p.add_argument("--learning-rate", type=float, dest="learning_rate")
    p.add_argument("--model-out", dest="model_out", help="where to save the .keras model")
    p.add_argument("--workers", type=int, help="Spark tasks to train on (default 1: here)")
    p.add_argument("--checkpoint-dir", dest="checkpoint_dir",
                   help="with --workers: a directory every executor shares")
    p.add_argument("--checkpoint-every", type=int, dest="checkpoint_every", metavar="STEPS",
                   help="with --workers: a checkpoint every STEPS steps too (mid-epoch resume)")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k not in ("config", "json")}
    try:
        cfg = load_train_config(args.config, **overrides)
        if cfg.workers > 1:
            from tfspark.cli.train_cluster import train_distributed

            result = train_distributed(cfg)  # spark-submit's session, else one on cfg.master
        else:
            result = train(cfg)
    except (TfsparkError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
