"""`tfspark stats PATH [--split S] [--plot DIR]`: a data set's feature statistics as a table,
and as PNG charts (matplotlib, the `plot` extra): one per feature that has something to draw.

    integers and booleans of at most 20 values   one bar per value (rows), from the top values,
              and one of the null rows
    numbers   a histogram from the stored deciles and min/max: each of the ten bins holds a
              tenth of the rows, so its height (rows per unit of value) is 0.1 * rows / its
              width (a bin of zero width, a repeated value, adds its tenth to the next bin);
              a tail longer than 3x the middle 80% is left out, and the chart says so; dates
              and timestamps on a date axis (rows per day)
    strings and ids (and the elements of id arrays)   the 20 most frequent values, as bars
Titles say the rows drawn and the nulls left out. An integer with about one value per row (an
id) and a feature whose statistics hold nothing to draw get a line saying so instead. Nothing
is read but the manifest: the statistics were computed when the data set was written.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from tfspark.cli.config import add_store_arg, filesystem_of
from tfspark.cli.inspect import missing_local_path, stats_table
from tfspark.errors import OptionError, SchemaError, install, require
from tfspark.spec.kinds import float_of_json
from tfspark.store import manifest as mf
from tfspark.store.partitions import read_data_set_manifest
from tfspark.store.uris import local_only, redact

TOP_BARS = 20
_KINDS = {"values": "rows per value", "histogram": "histogram of the deciles",
          "dates": "histogram of the deciles, on a date axis",
          "top": "the most frequent values"}


def add_command(command: Any) -> None:
    """Register `stats` with the CLI (command: cli.main's subcommand parser factory)."""
    p = command("stats", "print a data set's feature statistics; --plot writes PNG charts",
                "Print the feature statistics write_tfrecords stored in the manifest (per "
                "split with --split); --plot DIR writes one PNG per feature: histograms of "
                "numbers (from the deciles) and the most frequent values of strings and ids. "
                f"--plot needs matplotlib: {install('plot')}.")
    p.add_argument("path", help="a directory written by tfspark (write_tfrecords, "
                   "write_dataset, tfspark export)")
    p.add_argument("--split", help="the statistics of this split (default: all rows)")
    p.add_argument("--plot", metavar="DIR", help="write PNG charts into this directory")
    p.add_argument("--format", choices=("table", "tfdv"), default="table",
                   help="table (default): print them; tfdv: write --out DIR/stats.pb (TFDV's "
                        "DatasetFeatureStatisticsList: all rows, and each split as a slice) and "
                        f"DIR/schema.pbtxt (a TFMD Schema); needs {install('tfx')}")
    p.add_argument("--out", metavar="DIR", help="with --format tfdv: the directory to write")
    add_store_arg(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The stats command: the table, then the charts when --plot is given; with --format
    tfdv, TFX's statistics and schema files instead."""
    if args.format == "tfdv":
        from tfspark.cli.tfx import write_files

        return write_files(args)
    if args.out:
        raise OptionError("stats: --out is where --format tfdv writes its files; add "
                          "--format tfdv, or leave --out out")
    if args.plot:
        args.plot = local_only(args.plot, "--plot", "the charts are written to a local "
                               "directory", " (and copy them to the store after)")
    missing_local_path(args.path)
    m = read_data_set_manifest(args.path, filesystem_of(args.path, args.store))
    per = feature_stats(m, args.path, args.split)
    what = f"split {args.split!r}" if args.split else "all rows"
    print(f"statistics of {redact(args.path)} ({what}; of present values, nulls counted apart):")
    print("\n".join(stats_table(per, m.spec)))
    if args.plot:
        encodings = {f.name: f.encoding for f in m.spec.features} if m.spec else {}
        written, skipped = plot(per, args.plot, encodings)
        print(f"wrote {len(written)} chart(s) to {args.plot}:")
        for chart in written:
            print(f"  {chart.path.name}  {_KINDS[chart.kind]}"
                  + (f" ({chart.note})" if chart.note else ""))
        for name, why in skipped:
            print(f"  no chart for {name}: {why}")
    return 0


def feature_stats(m: mf.Manifest, path: str, split: str | None) -> dict[str, Any]:
    """{feature: statistics} of a manifest, for one split or all rows; SchemaError if none."""
    m.check_split(split, path)
    per = m.feature_stats(split)
    if per is None and split is not None:
        raise OptionError(f"{redact(path)} has no statistics for split {split!r}; splits with "
                          f"statistics: {m.stats_splits()}")
    if per is None:
        raise SchemaError(f"{redact(path)} has no feature statistics: write it with "
                          f"tfspark.write_tfrecords(..., stats=True) (the default) or "
                          f"`tfspark export` without --no-stats")
    return per


class Chart(NamedTuple):
    """One chart written: its file, what it draws (values | histogram | dates | top) and a
    note on what it leaves out ("" when nothing)."""

    path: Path
    kind: str
    note: str = ""


def plot(per: dict[str, Any], out_dir: str, encodings: Mapping[str, str] | None = None
         ) -> tuple[list[Chart], list[tuple[str, str]]]:
    """One PNG per feature with deciles or top values; returns the charts written, and the
    features given none with why. encodings: {feature: spec encoding}, so dates and
    timestamps get date axes. Titles say the rows and the nulls."""
    require("matplotlib", "tfspark stats --plot", "plot")
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, skipped = [], []
    for name, s in per.items():
        encoding = (encodings or {}).get(name, "")
        rows = s.get("count") or s.get("rows") or 0
        nulls = s.get("nulls") or 0
        counted = f"{rows:,} rows" + (f", {nulls:,} null ({nulls / (rows + nulls):.1%}) not "
                                      f"drawn" if nulls else "")
        if encoding == "int" and not s.get("top") and rows and \
                (s.get("distinct_approx") or 0) >= 0.9 * rows:
            skipped.append((name, "about one value per row (an id): nothing to draw"))
            continue
        fig, ax = plt.subplots(figsize=(7, 4))
        hist: str | None = None
        if _values(ax, s, encoding, nulls):
            kind, note = "values", ""
            ax.set_title(f"{name}: rows per value ({rows + nulls:,} rows)")
        elif (hist := _histogram(ax, s, encoding)) is not None:
            kind, note = "dates" if encoding in _DATES else "histogram", hist
            ax.set_title(f"{name}: distribution (from deciles; {counted})")
            if note:
                ax.text(0.99, 0.97, note, transform=ax.transAxes, ha="right", va="top",
                        fontsize=8, bbox={"facecolor": "white", "alpha": 0.8})
        elif _bars(ax, s):
            kind, note = "top", ""
            ax.set_title(f"{name}: the {min(TOP_BARS, len(s['top']))} most frequent values "
                         f"({counted})")
        else:
            plt.close(fig)
            skipped.append((name, "its statistics hold neither deciles nor most frequent "
                                  "values (an array of numbers, binary data, free text)"))
            continue
        fig.tight_layout()
        path = out / f"{_file_name(name)}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(Chart(path, kind, note))
    return written, skipped


# A spec encoding drawn on a date axis, and its unit in days (matplotlib's dates are days
# since 1970-01-01, as a date feature's values are).
_DATES = {"date": 1.0, "timestamp": 1 / 86_400e6}
# A tail longer than this many times the middle 80% of the values is left out of the histogram
# (and said so): one decile of a long tail would squash the other nine into a sliver.
TAIL = 3.0


def _values(ax: Any, s: dict[str, Any], encoding: str, nulls: int = 0) -> bool:
    """Integers and booleans with few values: one bar per value (the top values hold all), and
    one of the null rows when there are any."""
    top = s.get("top") or []
    present = s.get("count") or 0
    if (encoding not in ("int", "bool") or not top or len(top) > TOP_BARS
            or sum(n for _, n in top) != present):
        return False
    top = sorted(top, key=lambda p: float_of_json(p[0]))
    labels = [("true" if v else "false") if encoding == "bool" else str(v) for v, _ in top]
    counts = [n for _, n in top]
    ax.bar(range(len(top)), counts, edgecolor="black")
    if nulls:
        ax.bar([len(top)], [nulls], edgecolor="black", hatch="//", color="lightgrey")
        labels.append("null")
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("value")
    ax.set_ylabel("rows")
    return True


def _histogram(ax: Any, s: dict[str, Any], encoding: str) -> str | None:
    """A histogram of the deciles; None when there are none, else a note on what a long tail
    left out ("" when nothing)."""
    q = (s.get("quantiles") or {}).get("values") or []
    if not q or s.get("min") is None or s.get("max") is None:
        return None
    edges = [float_of_json(s["min"]), *map(float_of_json, q), float_of_json(s["max"])]
    rows = s.get("count") or s.get("rows") or 0
    unit = _DATES.get(encoding)
    lo, hi, notes = 0, len(edges) - 1, []
    middle = edges[-2] - edges[1]  # the 10th to the 90th percentile
    if len(edges) == 11 and middle > 0:
        if edges[-1] - edges[-2] > TAIL * middle:
            hi -= 1
            notes.append(f"top 10% not drawn: {_text(edges[-2], unit)} .. "
                         f"{_text(edges[-1], unit)}")
        if edges[1] - edges[0] > TAIL * middle:
            lo += 1
            notes.append(f"bottom 10% not drawn: {_text(edges[0], unit)} .. "
                         f"{_text(edges[1], unit)}")
    lefts, widths, mass = [], [], []
    pending = 0.0
    for a, b in zip(edges[lo:hi], edges[lo + 1:hi + 1]):
        pending += 0.1
        if b > a:  # a bin of zero width (a repeated value) adds its tenth to the next bin
            lefts.append(a)
            widths.append(b - a)
            mass.append(pending)
            pending = 0.0
    if not lefts:
        return None
    mass[-1] += pending
    scale = unit or 1.0
    heights = [m * rows / (w * scale) for m, w in zip(mass, widths)]
    ax.bar([x * scale for x in lefts], heights, width=[w * scale for w in widths],
           align="edge", edgecolor="black")
    if unit is not None:
        ax.xaxis_date()
        ax.figure.autofmt_xdate()
        ax.set_ylabel("rows per day (each bar: a tenth of the rows)")
    else:
        ax.set_xlabel("value")
        ax.set_ylabel("rows per unit of value (each bar: a tenth of the rows)")
    return "; ".join(notes)


def _text(x: float, unit: float | None) -> str:
    """A value as the chart's note says it: a date or time on a date axis, else a number."""
    if unit is None:
        return f"{x:,.6g}"
    import datetime as dt

    when = dt.datetime(1970, 1, 1) + dt.timedelta(days=x * unit)
    return when.date().isoformat() if unit == 1.0 else when.isoformat(sep=" ", timespec="seconds")


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
