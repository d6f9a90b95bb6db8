"""bench/results/all.json -> docs/benchmarks.md (figures only from a real run, with commands).

    python bench/report.py [--results bench/results/all.json] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _encode(r: dict) -> list[str]:
    return [
        "## Encoder: encode_batch + framing, one core",
        "",
        f"`{r['command']}` ({r['rows']:,} rows x 10 columns: 5 float, 3 int64, 2 short "
        f"strings; {r['cpu']})",
        "",
        "| writer | rows/s | |",
        "|---|---:|---|",
        f"| tfspark (Arrow batches of 10,000 -> BatchEncoder -> RecordWriter) | "
        f"{r['tfspark_rows_per_s']:,} | {r['tfspark_mb_per_s']} MB/s, {r['bytes_per_row']} B/row |",
        f"| per-row `tf.train.Example` + `tf.io.TFRecordWriter` (on {r['loop_rows']:,} rows) | "
        f"{r['per_row_loop_rows_per_s']:,} | |",
        f"| **ratio** | **{r['ratio']}x** | target >= 80x and >= 1,000,000 rows/s |",
        "",
    ]


def _write(r: dict) -> list[str]:
    rows = ["## Spark write on local[2]", "",
            f"`{r['command']}` ({r['rows']:,} rows x 10 columns: 5 double, 3 long, 2 short "
            f"strings, read from parquet; best of the alternating runs)", "",
            "| writer | seconds | rows/s | throughput vs parquet |", "|---|---:|---:|---:|"]
    names = {"parquet": "`df.write.parquet`", "tfrecord": "`df.write.format(\"tfrecord\")`",
             "tfrecord.gz": "the same, gzip (level 6)",
             "workflow": "`write_tfrecords`: its TFRecord stage"}
    for k, label in names.items():
        if k in r["seconds"]:
            rows.append(f"| {label} | {r['seconds'][k]} | {r['rows_per_s'][k]:,} | "
                        f"{r['throughput_vs_parquet'][k]}x |")
    b = r["bytes_per_row"]
    rows += ["", f"Bytes per row on disk: parquet {b['parquet']}, TFRecord {b['tfrecord']}, "
                 f"TFRecord gzip {b['tfrecord.gz']}. Target: TFRecord writing >= 0.5x parquet.",
             ""]
    return rows


def _read(r: dict) -> list[str]:
    eps = r["examples_per_s"]
    labels = {"make_dataset": "`make_dataset` (no shuffle)",
              "make_dataset_shuffled": "`make_dataset` (default window shuffle)",
              "hand_tuned": "(a) TFRecordDataset -> batch -> parse_example -> prefetch",
              "per_record": "(b) parse_single_example, then batch",
              "csv": "(c) tf.data.experimental.make_csv_dataset"}
    rows = ["## tf.data read", "",
            f"`{r['command']}` ({r['rows']:,} rows x 10 columns, batch {r['batch_size']}, "
            f"{r['files']} files, TensorFlow {r.get('tensorflow', '?')}; best of "
            f"{r['repeat']} alternating runs)", "",
            "| pipeline | examples/s | make_dataset is | target |", "|---|---:|---:|---|"]
    targets = r.get("targets", {})
    for k, label in labels.items():
        if k in eps:
            ratio = eps["make_dataset"] / eps[k]
            target = f">= {targets[k]}x" if k in targets else ""
            rows.append(f"| {label} | {eps[k]:,.0f} | {ratio:.2f}x | {target} |")
    return rows + [""]


def _generic(name: str, r: dict) -> list[str]:
    lines = [f"## {name}", "", f"`{r['command']}`", "", "```",
             json.dumps({k: v for k, v in r.items() if k not in ("command",)}, indent=1),
             "```", ""]
    return lines


def render(results: dict) -> str:
    out = ["# Benchmarks", "",
           "Measured side by side in one run on this project's machines; ratios are what count "
           "(absolute figures move with machine load). Regenerate with `make bench` (runs "
           "`bench/run_all.py`, then `bench/report.py`).", ""]
    machine = next((r.get("machine") for r in results.values() if r.get("machine")), None)
    if machine:
        out += [f"Machine: {machine}.", ""]
    for name, r in results.items():
        if name == "encode":
            out += _encode(r)
        elif name == "write":
            out += _write(r)
        elif name == "read":
            out += _read(r)
        else:
            out += _generic({"read": "tf.data read", "spark_read": "Spark read"}.get(name, name),
                            r)
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=os.path.join(HERE, "results", "all.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    a = p.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(render(results))
    print(a.out)


if __name__ == "__main__":
    main()
