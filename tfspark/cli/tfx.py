"""The commands in TFX's terms: `tfspark stats PATH --format tfdv --out DIR` writes TFDV's
statistics (stats.pb) and a TFMD schema (schema.pbtxt) of a data set; `tfspark validate PATH
--schema FILE` lists its anomalies against a saved schema (see the data set's TFX module)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tfspark.cli.config import add_store_arg, filesystem_of
from tfspark.cli.inspect import missing_local_path
from tfspark.errors import OptionError, install
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.uris import local_only, redact


def add_command(command: Any) -> None:
    """Register `validate` with the CLI (command: cli.main's subcommand parser factory)."""
    p = command("validate", "check a data set against a TFMD schema; exit 1 on anomalies",
                "Compare a data set's statistics (per split) with a TFMD Schema saved "
                "earlier (tfspark stats --format tfdv writes one; TFDV's write_schema_text "
                "too): features gone or new, changed types, missing values, value counts, "
                "string values outside a domain, numbers outside a domain. One line per "
                "anomaly; exit status 1 when there is any. Reads the statistics the write "
                f"stored, no records; needs {install('tfx')}.")
    p.add_argument("path", help="a directory written by tfspark (write_tfrecords, "
                   "write_dataset, tfspark export)")
    p.add_argument("--schema", required=True, metavar="FILE",
                   help="the schema to check against (schema.pbtxt)")
    p.add_argument("--split", help="check this split only (default: every split)")
    add_store_arg(p)
    p.set_defaults(run=run_validate)


def write_files(args: argparse.Namespace) -> int:
    """stats --format tfdv: stats.pb and schema.pbtxt into --out."""
    from tfspark.store import tfx as store_tfx

    if not args.out:
        raise OptionError("stats --format tfdv: give --out DIR, the directory for stats.pb "
                          "and schema.pbtxt")
    if args.plot:
        raise OptionError("stats: --plot draws the table's statistics; run it without "
                          "--format tfdv")
    out = Path(local_only(args.out, "--out", "the files are written to a local directory",
                          " (and copy them to the store after)"))
    missing_local_path(args.path)
    m = read_data_set_manifest(args.path, filesystem_of(args.path, args.store))
    where = redact(args.path)
    m.check_split(args.split, where)
    stats = store_tfx.statistics_list(m, [args.split] if args.split else [None, *m.splits],
                                      where)
    schema = store_tfx.schema_of(m, where)
    if out.exists() and not out.is_dir():
        raise OptionError(f"--out {out} is a file; give a directory")
    out.mkdir(parents=True, exist_ok=True)
    for name, data in (("stats.pb", stats.SerializeToString()),
                       ("schema.pbtxt", store_tfx.schema_text(schema).encode())):
        tmp = out / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, out / name)
    names = ", ".join(d.name for d in stats.datasets)
    print(f"wrote {out / 'stats.pb'} (TFDV statistics of {names}: "
          f"{len(stats.datasets[0].features)} features)")
    print(f"wrote {out / 'schema.pbtxt'} (TFMD schema: {len(schema.feature)} features, "
          f"{len(schema.string_domain)} string domains)")
    return 0


def run_validate(args: argparse.Namespace) -> int:
    """The validate command: the report, exit 1 on anomalies."""
    from tfspark.store import tfx as store_tfx

    missing_local_path(args.path)
    schema = store_tfx.load_schema(args.schema)
    report = store_tfx.validate(args.path, schema, split=args.split,
                                filesystem=filesystem_of(args.path, args.store))
    report.schema = args.schema
    print(report.render())
    return 0 if report.ok else 1


