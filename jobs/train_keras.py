"""Train a small Keras model on a tfspark data set (no Spark needed):

    python jobs/train_keras.py --config conf/train.toml [--data out/ds] [--epochs 5]

Settings are in conf/train.toml (see tfspark.cli.config.TrainConfig); flags override them.
"""

from __future__ import annotations

import argparse
import json
import sys

from tfspark.cli.config import load_train_config
from tfspark.cli.train import train
from tfspark.errors import TfsparkError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="train_keras.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="conf/train.toml")
    p.add_argument("--data", help="tfspark directory to train on")
    p.add_argument("--label", help="label column (default: the spec's)")
    p.add_argument("--batch-size", type=int, dest="batch_size")
    p.add_argument("--epochs", type=int)
    p.add_argument("--steps-per-epoch", type=int, dest="steps_per_epoch")
    p.add_argument("--learning-rate", type=float, dest="learning_rate")
    p.add_argument("--model-out", dest="model_out", help="where to save the .keras model")
    p.add_argument("--json", help="also write the results as JSON to this file")
    args = p.parse_args(argv)
    overrides = {k: v for k, v in vars(args).items() if k not in ("config", "json")}
    try:
        result = train(load_train_config(args.config, **overrides))
    except (TfsparkError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
