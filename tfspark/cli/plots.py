"""`tfspark stats PATH [--split S] [--plot DIR]`: a data set's feature statistics as a table,
and as PNG charts (matplotlib, the `plot` extra): one per feature that has something to draw.

    numbers   a histogram from the stored deciles and min/max: each of the ten bins holds a
              tenth of the rows, so its height (rows per unit) is 0.1 * rows / its width (a
              bin of zero width, a repeated value, adds its tenth to the next bin)
    strings and ids (and the elements of id arrays)   the 20 most frequent values, as bars
Nothing is read but the manifest: the statistics were computed by Spark during the export.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from tfspark.cli.config import add_store_arg, filesystem_of
from tfspark.cli.inspect import missing_local_path, stats_table
from tfspark.errors import OptionError, SchemaError, require
from tfspark.spec.kinds import float_of_json
from tfspark.store import manifest as mf

TOP_BARS = 20


def add_command(command: Any) -> None:
    """Register `stats` with the CLI (command: main.py's subcommand parser factory)."""
    p = command("stats", "print a data set's feature statistics; --plot writes PNG charts",
                "Print the feature statistics write_tfrecords stored in the manifest (per "
                "split with --split); --plot DIR writes one PNG per feature: histograms of "
                "numbers (from the deciles) and the most frequent values of strings and ids. "
                "--plot needs matplotlib: pip install 'tfspark[plot]'.")
    p.add_argument("path", help="a directory written by write_tfrecords / tfspark export")
    p.add_argument("--split", help="the statistics of this split (default: all rows)")
    p.add_argument("--plot", metavar="DIR", help="write PNG charts into this directory")
    add_store_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The stats command: the table, then the charts when --plot is given."""
    missing_local_path(args.path)
    m = mf.read_manifest(args.path, filesystem=filesystem_of(args.path, args.store))
    per = feature_stats(m, args.path, args.split)
    what = f"split {args.split!r}" if args.split else "all rows"
    print(f"statistics of {args.path} ({what}; of present values, nulls counted apart):")
    print("\n".join(stats_table(per)))
    if args.plot:
        written = plot(per, args.plot)
        print(f"wrote {len(written)} chart(s) to {args.plot}")
    return 0


def feature_stats(m: mf.Manifest, path: str, split: str | None) -> dict[str, Any]:
    """{feature: statistics} of a manifest, for one split or all rows; SchemaError if none."""
    per = m.feature_stats(split)
    if per is None and split is not None:
        raise OptionError(f"{path} has no statistics for split {split!r}; splits with "
                          f"statistics: {m.stats_splits()}")
    if per is None:
        raise SchemaError(f"{path} has no feature statistics: write it with "
                          f"tfspark.write_tfrecords(..., stats=True) (the default) or "
                          f"`tfspark export` without --no-stats")
    return per


def plot(per: dict[str, Any], out_dir: str) -> list[Path]:
    """One PNG per feature with deciles or top values; returns the files written."""
    require("matplotlib", "tfspark stats --plot", "plot")
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, s in per.items():
        fig, ax = plt.subplots(figsize=(7, 4))
        if _histogram(ax, s):
            ax.set_title(f"{name}: distribution (from deciles, {s.get('count', 0):,} rows)")
        elif _bars(ax, s):
            ax.set_title(f"{name}: the {min(TOP_BARS, len(s['top']))} most frequent values")
        else:
            plt.close(fig)
            continue
        fig.tight_layout()
        path = out / f"{_file_name(name)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written



def _histogram(ax: Any, s: dict[str, Any]) -> bool:
    q = (s.get("quantiles") or {}).get("values") or []
    if not q or s.get("min") is None or s.get("max") is None:
        return False
    edges = [float_of_json(s["min"]), *map(float_of_json, q), float_of_json(s["max"])]
    rows = s.get("count") or s.get("rows") or 0
    lefts, widths, mass = [], [], []
    pending = 0.0
    for a, b in zip(edges, edges[1:]):
        pending += 0.1
        if b > a:  # a bin of zero width (a repeated value) adds its tenth to the next bin
            lefts.append(a)
            widths.append(b - a)
            mass.append(pending)
            pending = 0.0
    if not lefts:
        return False
    mass[-1] += pending
    heights = [m * rows / w for m, w in zip(mass, widths)]
    ax.bar(lefts, heights, width=widths, align="edge", edgecolor="black")
    ax.set_xlabel("value")
    ax.set_ylabel("rows per unit")
    return True


def _bars(ax: Any, s: dict[str, Any]) -> bool:
    top = (s.get("top") or [])[:TOP_BARS]
    if not top:
        return False
    labels = [str(v)[:24] for v, _ in top]
    ax.barh(range(len(top)), [n for _, n in top])
    ax.set_yticks(range(len(top)), labels)
    ax.invert_yaxis()
    ax.set_xlabel("rows" if "length" not in s else "elements")
    return True


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) or "feature"
