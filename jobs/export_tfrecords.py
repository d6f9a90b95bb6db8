"""spark-submit entry point of the export job: the same flags and config as `tfspark export`.

    spark-submit jobs/export_tfrecords.py --config export.toml [--output gs://bucket/out]

(`tfspark export --print-config > export.toml` gives a commented config to start from.)

spark-submit provides the session (master, warehouse, metastore), so the config's master and
warehouse are not used here. tfspark must be installed on the driver and the executors.
"""

from __future__ import annotations

import argparse
import sys

from pyspark.sql import SparkSession

from tfspark.cli.errors import describe_error
from tfspark.cli.session import run_export
from tfspark.cli.spark_commands import add_export_args, config_from_args


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="export_tfrecords.py", description=__doc__)
    add_export_args(parser)
    parser.add_argument("--debug", action="store_true",
                        help="on error, raise with the full traceback instead of one line")
    args = parser.parse_args(argv)
    try:
        cfg = config_from_args(args)
        spark = SparkSession.builder.appName(cfg.app_name).getOrCreate()
        print(run_export(spark, cfg).summary())
    except Exception as e:
        if args.debug:
            raise
        message, hint = describe_error(e)  # one line (+ hint), as `tfspark export` prints
        print(f"error: {message}", file=sys.stderr)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
