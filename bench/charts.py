"""Benchmark results (bench/results/all.json) -> PNG charts of the comparisons, for the docs.

    python bench/report.py        # rewrites docs/benchmarks.md and these charts from the JSON

One chart per benchmark (encode.png, write.png, read.png, spark_read.png) and headline.png, the
speed-up of each tfspark path over the usual alternative, with its target. matplotlib's Agg
renderer through Figure objects (no pyplot, no display, no global backend switch), with
matplotlib's default style and no "Software"/date metadata, so the same JSON gives the same
bytes. 800 px wide at 100 dpi: README width.

The comparison data (headline_ratios, TARGETS) is plain Python; only render_charts imports
matplotlib.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

# Targets from the benchmark issues. The read benchmark records its own in its JSON ("targets"),
# which win over these.
TARGETS = {
    "encode": 80.0,  # tfspark / per-row tf.train.Example loop
    "encode_rows_per_s": 1_000_000,  # tfspark encoder, one core
    "write": 0.5,  # df.write.format("tfrecord") / df.write.parquet, rows/s
    "read.hand_tuned": 0.9,  # make_dataset / TFRecordDataset -> batch -> parse_example
    "read.per_record": 10.0,  # make_dataset / parse_single_example then batch
    "read.csv": 3.0,  # make_dataset / make_csv_dataset
}

WIDTH_IN = 8.0
DPI = 100
TFSPARK = "#2a7fb8"  # tfspark's own paths
OTHER = "#a3a3a3"  # the alternatives
MET = "#2a9d6f"
MISSED = "#d1495b"
NO_TARGET = "#6c7a89"


def machine_base(machine: str | None) -> str:
    """"x86_64, 2 cores, Python 3.11.7, load average 3.7 at start" -> the part before the load."""
    return re.split(r",\s*load average", machine or "")[0].strip()


def load_average(machine: str | None) -> str | None:
    m = re.search(r"load average ([0-9.]+)", machine or "")
    return m.group(1) if m else None


def read_targets(read: dict) -> dict[str, float]:
    out = {k.split(".", 1)[1]: v for k, v in TARGETS.items() if k.startswith("read.")}
    return out | {k: float(v) for k, v in read.get("targets", {}).items()}


def headline_ratios(results: dict) -> list[dict]:
    """Each tfspark path against the usual alternative: label, ratio (higher is better for
    tfspark), target (None if there is none), unit text and the benchmark it comes from."""
    out: list[dict] = []
    enc = results.get("encode")
    if enc:
        ratio = enc.get("ratio") or enc["tfspark_rows_per_s"] / enc["per_row_loop_rows_per_s"]
        out.append({"bench": "encode", "label": "Encode, one core: tfspark\nvs per-row "
                    "tf.train.Example", "short": "encode: tfspark vs per-row tf.train.Example "
                    "+ TFRecordWriter (rows/s)", "ratio": float(ratio),
                    "target": TARGETS["encode"]})
    wr = results.get("write")
    if wr and "tfrecord" in wr.get("rows_per_s", {}) and "parquet" in wr.get("rows_per_s", {}):
        ratio = wr["rows_per_s"]["tfrecord"] / wr["rows_per_s"]["parquet"]
        out.append({"bench": "write", "label": "Spark write: TFRecord source\nvs df.write.parquet",
                    "short": "Spark write: `df.write.format(\"tfrecord\")` vs `df.write.parquet` "
                    "(rows/s)", "ratio": ratio, "target": TARGETS["write"]})
    rd = results.get("read")
    if rd and "make_dataset" in rd.get("examples_per_s", {}):
        eps = rd["examples_per_s"]
        targets = read_targets(rd)
        for key, label, short in (
                ("per_record", "tf.data read: make_dataset\nvs parse_single_example",
                 "tf.data read: `make_dataset` vs parse_single_example then batch"),
                ("csv", "tf.data read: make_dataset\nvs make_csv_dataset",
                 "tf.data read: `make_dataset` vs `make_csv_dataset`"),
                ("hand_tuned", "tf.data read: make_dataset\nvs hand-tuned tf.data",
                 "tf.data read: `make_dataset` vs hand-tuned batch -> parse_example")):
            if key in eps:
                out.append({"bench": "read", "label": label, "short": short + " (examples/s)",
                            "ratio": eps["make_dataset"] / eps[key], "target": targets.get(key)})
    sr = results.get("spark_read")
    if sr and "tfrecord" in sr.get("rows_per_s", {}) and "parquet" in sr.get("rows_per_s", {}):
        ratio = sr["rows_per_s"]["tfrecord"] / sr["rows_per_s"]["parquet"]
        out.append({"bench": "spark_read", "label": "Spark read: TFRecord source\nvs "
                    "spark.read.parquet", "short": "Spark read: `spark.read.format(\"tfrecord\")` "
                    "vs `spark.read.parquet` (rows/s)", "ratio": ratio, "target": None})
    return out


def fmt_ratio(x: float) -> str:
    return f"{x:.0f}x" if x >= 20 else f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def si(x: float) -> str:
    """1560884 -> "1.56M", 14015 -> "14.0k", 0 -> "0"."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            v = x / div
            return (f"{v:.3g}" if v < 100 else f"{v:.0f}") + suffix
    return f"{x:.3g}"


def _caption(r: dict, fallback_cmd: str) -> str:
    bits = [r.get("machine") or "", f"`{r.get('command') or fallback_cmd}` via make bench"]
    return " | ".join(b for b in bits if b).replace("`", "")


# --- drawing -------------------------------------------------------------------------------

def _figure(height_in: float, rows: int = 1, height_ratios: list[float] | None = None):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, 1, gridspec_kw={"height_ratios": height_ratios}
                        if height_ratios else None, squeeze=False)[:, 0]
    for ax in axes:
        ax.spines[["top", "right"]].set_visible(False)
        ax.grid(axis="x", color="0.9", linewidth=0.8)
        ax.set_axisbelow(True)
    return fig, list(axes)


def _si_axis(ax) -> None:
    from matplotlib.ticker import FuncFormatter

    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: si(x)))


def _hbars(ax, labels: list[str], values: list[float], colors: list[str],
           texts: list[str], xlabel: str, headroom: float = 1.32) -> None:
    ys = list(range(len(values)))
    bars = ax.barh(ys, values, color=colors, height=0.62)
    ax.set_yticks(ys, labels)
    ax.invert_yaxis()
    ax.bar_label(bars, labels=texts, padding=4, fontsize=9)
    ax.set_xlim(0, max(values) * headroom)
    ax.set_xlabel(xlabel)
    _si_axis(ax)


def _target_line(ax, x: float, text: str) -> None:
    """A dashed vertical line at x, labelled just above the plot area."""
    ax.axvline(x, color="0.25", linestyle="--", linewidth=1)
    ax.text(x, 1.0, text, transform=ax.get_xaxis_transform(), fontsize=8, color="0.25",
            ha="center", va="bottom")


def _finish(fig, title: str, caption: str, path: str) -> str:
    fig.suptitle(title, fontsize=12, fontweight="bold")
    fig.supxlabel(caption, fontsize=7.5, color="0.4")
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    return path


def chart_encode(r: dict, path: str) -> str:
    fast, slow = r["tfspark_rows_per_s"], r["per_row_loop_rows_per_s"]
    fig, (ax,) = _figure(2.9)
    _hbars(ax, ["tfspark\n(BatchEncoder + RecordWriter)",
                "per-row tf.train.Example\n+ tf.io.TFRecordWriter"],
           [fast, slow], [TFSPARK, OTHER],
           [f"{si(fast)} rows/s ({r.get('bytes_per_row', '?')} B/row)", f"{si(slow)} rows/s"],
           "rows/s, one core (higher is better)")
    _target_line(ax, TARGETS["encode_rows_per_s"], f"target {si(TARGETS['encode_rows_per_s'])} "
                 "rows/s")
    ratio = r.get("ratio") or fast / slow
    return _finish(fig, f"Encoder: tfspark writes {fmt_ratio(ratio)} the rows/s of the per-row "
                   "loop", _caption(r, "python bench/bench_encode.py"), path)


WRITE_LABELS = {"parquet": "df.write.parquet", "tfrecord": 'df.write.format("tfrecord")',
                "tfrecord.gz": '"tfrecord", gzip level 6',
                "workflow": "write_tfrecords,\nwhole"}


def chart_write(r: dict, path: str) -> str:
    rps, vs = r["rows_per_s"], r.get("throughput_vs_parquet", {})
    keys = [k for k in WRITE_LABELS if k in rps]
    bpr = r.get("bytes_per_row", {})
    bkeys = [k for k in WRITE_LABELS if k in bpr]
    fig, axes = _figure(5.4, rows=2 if bkeys else 1,
                        height_ratios=[len(keys), len(bkeys) + 0.6] if bkeys else None)
    parquet = rps.get("parquet")
    _hbars(axes[0], [WRITE_LABELS[k] for k in keys], [rps[k] for k in keys],
           [OTHER if k == "parquet" else TFSPARK for k in keys],
           [f"{si(rps[k])} rows/s" + (f" ({vs.get(k, rps[k] / parquet):.2f}x parquet)"
                                      if parquet else "") for k in keys],
           f"rows/s, Spark {r.get('master', 'local')} (higher is better)", headroom=1.5)
    if parquet:
        _target_line(axes[0], TARGETS["write"] * parquet, f"target {TARGETS['write']}x parquet")
    if bkeys:
        _hbars(axes[1], [WRITE_LABELS[k].replace("\n", " ") for k in bkeys],
               [bpr[k] for k in bkeys], [OTHER if k == "parquet" else TFSPARK for k in bkeys],
               [f"{bpr[k]:.1f} B/row" for k in bkeys], "bytes per row on disk (lower is smaller)",
               headroom=1.25)
        axes[1].xaxis.set_major_formatter("{x:.0f}")
    ratio = rps["tfrecord"] / parquet if parquet and "tfrecord" in rps else None
    title = (f"Spark write, {r.get('rows', 0):,} rows: TFRecord at {ratio:.2f}x parquet"
             if ratio else "Spark write")
    return _finish(fig, title, _caption(r, "python bench/bench_write.py"), path)


READ_LABELS = {"make_dataset": "tfspark make_dataset",
               "make_dataset_shuffled": "make_dataset, window shuffle",
               "hand_tuned": "(a) hand-tuned: batch ->\nparse_example -> prefetch",
               "per_record": "(b) parse_single_example,\nthen batch",
               "csv": "(c) make_csv_dataset"}


def chart_read(r: dict, path: str) -> str:
    eps = r["examples_per_s"]
    keys = [k for k in READ_LABELS if k in eps]
    md = eps.get("make_dataset")
    texts = []
    for k in keys:
        t = f"{si(eps[k])} examples/s"
        if md and not k.startswith("make_dataset"):
            t += f" (make_dataset {fmt_ratio(md / eps[k])})"
        texts.append(t)
    fig, (ax,) = _figure(3.9)
    _hbars(ax, [READ_LABELS[k] for k in keys], [eps[k] for k in keys],
           [TFSPARK if k.startswith("make_dataset") else OTHER for k in keys], texts,
           f"examples/s, one epoch at batch {r.get('batch_size', '?')} (higher is better)",
           headroom=1.55)
    return _finish(fig, f"tf.data read, {r.get('rows', 0):,} rows: make_dataset vs the usual "
                   "pipelines", _caption(r, "python bench/bench_read.py"), path)


def chart_spark_read(r: dict, path: str) -> str:
    rps = r["rows_per_s"]
    keys = [k for k in ("tfrecord", "parquet") if k in rps]
    labels = {"tfrecord": 'spark.read.format("tfrecord")', "parquet": "spark.read.parquet"}
    fig, (ax,) = _figure(2.6)
    _hbars(ax, [labels[k] for k in keys], [rps[k] for k in keys],
           [TFSPARK if k == "tfrecord" else OTHER for k in keys],
           [f"{si(rps[k])} rows/s" for k in keys],
           f"rows/s into a noop sink, Spark {r.get('master', 'local')} (higher is better)")
    ratio = rps["tfrecord"] / rps["parquet"] if len(keys) == 2 else None
    title = (f"Spark read, {r.get('rows', 0):,} rows: TFRecord at {ratio:.2f}x parquet"
             if ratio else "Spark read")
    return _finish(fig, title, _caption(r, "python bench/bench_spark_read.py"), path)


def chart_headline(results: dict, path: str) -> str:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import FixedLocator, NullLocator

    items = headline_ratios(results)
    fig, (ax,) = _figure(0.9 + 0.55 * len(items))
    ys = list(range(len(items)))
    colors = [NO_TARGET if i["target"] is None else MET if i["ratio"] >= i["target"] else MISSED
              for i in items]
    # Bars grow from parity (1x) on a log axis: right is faster than the alternative.
    bars = ax.barh(ys, [i["ratio"] - 1 for i in items], left=1, color=colors, height=0.62)
    ax.set_xscale("log")
    ax.set_yticks(ys, [i["label"] for i in items], fontsize=9)
    ax.invert_yaxis()
    for y, i in zip(ys, items):
        if i["target"] is not None:
            ax.vlines(i["target"], y - 0.4, y + 0.4, color="black", linewidth=2, zorder=3)
    for text in ax.bar_label(bars, labels=[fmt_ratio(i["ratio"]) for i in items], padding=4,
                             fontsize=9.5, fontweight="bold"):
        # Readable where a target mark falls just past the end of the bar.
        text.set(zorder=4, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1,
                                 "alpha": 0.85})
    ratios = [i["ratio"] for i in items] + [i["target"] for i in items if i["target"]]
    lo, hi = min(ratios + [1.0]) / 1.8, max(ratios + [1.0]) * 3.2
    ax.set_xlim(lo, hi)
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if lo <= t <= hi]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter("{x:g}x")
    ax.axvline(1, color="0.3", linewidth=1)
    ax.set_xlabel("tfspark throughput / the alternative's (log scale; right of 1x is faster)")
    handles = [Patch(color=c, label=label) for c, label in (
        (MET, "target met"), (MISSED, "target missed"), (NO_TARGET, "no target")) if c in colors]
    handles.append(Line2D([], [], color="black", linewidth=2, label="target"))
    ax.legend(handles=handles, loc="lower right", fontsize=8, frameon=False)
    machines = {machine_base(r.get("machine")) for r in results.values() if r.get("machine")}
    caption = ("; ".join(sorted(m for m in machines if m)) or "this machine") + \
        " | make bench (bench/run_all.py, then bench/report.py)"
    return _finish(fig, "tfspark vs the usual alternative, measured side by side", caption,
                   path)


CHARTS: dict[str, Callable[[dict, str], str]] = {
    "encode": chart_encode, "write": chart_write, "read": chart_read,
    "spark_read": chart_spark_read,
}


def render_charts(results: dict, out_dir: str) -> dict[str, str]:
    """Writes out_dir/{headline,encode,write,read,spark_read}.png for the benchmarks present in
    results; returns {name: path}."""
    from matplotlib import style

    os.makedirs(out_dir, exist_ok=True)
    written: dict[str, str] = {}
    # matplotlib's defaults, not the user's matplotlibrc: the same JSON gives the same image.
    with style.context("default"):
        if headline_ratios(results):
            written["headline"] = chart_headline(results, os.path.join(out_dir, "headline.png"))
        for name, fn in CHARTS.items():
            if name in results:
                written[name] = fn(results[name], os.path.join(out_dir, f"{name}.png"))
    return written
