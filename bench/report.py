"""bench/results/all.json -> docs/benchmarks.md and docs/img/*.png (figures only from a real run).

    python bench/report.py                      # from the saved results; runs no benchmark
    python bench/report.py [--results bench/results/all.json] [--out docs/benchmarks.md]
                           [--img-dir docs/img] [--no-charts]

Only the generated blocks of the page are rewritten: each sits between
`<!-- BEGIN generated: NAME ... -->` and `<!-- END generated: NAME -->` (NAME is header, encode,
write, read or spark_read), and everything outside them (hand-written notes) is kept as it is.
A block whose benchmark is missing from the results is left untouched; a block missing from the
page is appended. A page without any block is refused unless --overwrite (which starts afresh).
Without all.json, the per-benchmark bench/results/NAME.json files are used.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, HERE)

import charts  # noqa: E402  (plain Python; matplotlib only inside charts.render_charts)

ORDER = ("encode", "write", "export", "first_write", "read", "vs_parquet", "spark_read",
         "block")
SCRIPTS = {"encode": "bench_encode.py", "write": "bench_write.py",
           "export": "bench_export.py", "read": "bench_read.py",
           "spark_read": "bench_spark_read.py", "first_write": "bench_first_write.py",
           "block": "bench_block.py", "vs_parquet": "bench_vs_parquet.py"}
SHORT = {"encode": "encode", "write": "Spark write", "export": "export", "read": "tf.data read",
         "spark_read": "Spark read", "first_write": "first write", "block": "block layout",
         "vs_parquet": "read_batches vs the parquet copy"}
TITLES = {"encode": "Encoder: encode_batch + framing, one core",
          "write": "Spark write on local[2]", "read": "tf.data read",
          "export": "The export against parquet: write_tfrecords on local[2]",
          "spark_read": "Spark read on local[2]",
          "first_write": "First write in a fresh local session",
          "block": "Block layout (rows_per_record)",
          "vs_parquet": "read_batches against the parquet copy read by pyarrow"}
BEGIN = "<!-- BEGIN generated: {name} (bench/report.py rewrites this block) -->"
END = "<!-- END generated: {name} -->"
BLOCK = re.compile(r"<!-- BEGIN generated: (\w+)[^>]*-->\n.*?<!-- END generated: \1 -->",
                   re.DOTALL)


def _command(name: str, r: dict) -> str:
    return r.get("command") or f"python bench/{SCRIPTS.get(name, name)}"


def _intro(name: str, r: dict, *details: str) -> str:
    """"`python bench/bench_x.py --rows N` (run by `python bench/run_all.py`; details...)" """
    via = ["run by `python bench/run_all.py`"] if "command" in r else []
    return f"`{_command(name, r)}` (" + "; ".join([*via, *(d for d in details if d)]) + ")"


def _ratio(x: float) -> str:
    return f"{x:.1f}x" if x >= 10 else f"{x:.2f}x"


def _wrap(lines: list[str], width: int = 100) -> list[str]:
    """Prose lines wrapped like the hand-written text; tables, images, headings left alone."""
    out: list[str] = []
    for line in lines:
        if line and not line.startswith(("|", "!", "#", "<", "`" * 3)):
            # No break inside a `code span`: its spaces are hidden from textwrap.
            line = re.sub(r"`[^`]*`", lambda m: m.group(0).replace(" ", "\0"), line)
            out += [w.replace("\0", " ") for w in textwrap.wrap(
                line, width, break_long_words=False, break_on_hyphens=False)]
        else:
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return [*out, ""]  # a blank line before the END marker closes any table


def _load(r: dict) -> str:
    la = charts.load_average(r.get("machine"))
    return f"load average {la} at start" if la else ""


def _repeat(r: dict) -> str:
    m = re.search(r"--repeat (\d+)", r.get("command", ""))
    n = r.get("repeat") or (int(m.group(1)) if m else None)
    return f"best of {n} alternating runs" if n else "best of the alternating runs"


def _img(img_rel: str | None, name: str, alt: str) -> list[str]:
    return [f"![{alt}]({img_rel}/{name}.png)", ""] if img_rel else []


def _encode(r: dict, img_rel: str | None) -> list[str]:
    ratio = r.get("ratio") or r["tfspark_rows_per_s"] / r["per_row_loop_rows_per_s"]
    met = (ratio >= charts.TARGETS["encode"]
           and r["tfspark_rows_per_s"] >= charts.TARGETS["encode_rows_per_s"])
    return [
        f"## {TITLES['encode']}", "",
        _intro("encode", r, f"{r['rows']:,} rows x 10 columns: 5 float, 3 int64, 2 short "
               "strings", r.get("cpu", ""), _load(r)), "",
        "| writer | rows/s | |",
        "|---|---:|---|",
        "| tfspark (Arrow batches of 10,000 -> BatchEncoder -> RecordWriter -> file) | "
        f"{r['tfspark_rows_per_s']:,} | {r.get('tfspark_mb_per_s', '?')} MB/s, "
        f"{r.get('bytes_per_row', '?')} B/row |",
        f"| per-row `tf.train.Example` + `tf.io.TFRecordWriter` (on {r['loop_rows']:,} rows) | "
        f"{r['per_row_loop_rows_per_s']:,} | |",
        f"| **ratio** | **{ratio:.1f}x** | target >= {charts.TARGETS['encode']:g}x and >= "
        f"{charts.TARGETS['encode_rows_per_s']:,} rows/s: {'met' if met else 'missed'} |",
        "", *_img(img_rel, "encode", "Encoder: tfspark vs per-row tf.train.Example, rows/s")]


WRITE_LABELS = {"parquet": "`df.write.parquet`", "tfrecord": "`df.write.format(\"tfrecord\")`",
                "tfrecord.gz": "the same, gzip (level 6)",
                "workflow": "`write_tfrecords`, whole (TFRecords, parquet copy, statistics)"}


def _write(r: dict, img_rel: str | None) -> list[str]:
    rps, b = r["rows_per_s"], r.get("bytes_per_row", {})
    vs = r.get("throughput_vs_parquet", {})
    rows = [f"## {TITLES['write']}", "",
            _intro("write", r, f"{r['rows']:,} rows x 10 columns: 5 double, 3 long, 2 short "
                   "strings, read from parquet", _repeat(r), _load(r)), "",
            "| writer | seconds | rows/s | throughput vs parquet | bytes/row on disk |",
            "|---|---:|---:|---:|---:|"]
    for k, label in WRITE_LABELS.items():
        if k in rps:
            ratio = vs.get(k, rps[k] / rps["parquet"] if "parquet" in rps else None)
            rows.append(f"| {label} | {r['seconds'][k]} | {rps[k]:,} | "
                        f"{'' if ratio is None else f'{ratio:.2f}x'} | {b.get(k, '')} |")
    target = charts.TARGETS["write"]
    if "tfrecord" in rps and "parquet" in rps:
        ratio = rps["tfrecord"] / rps["parquet"]
        rows += ["", f"Target: TFRecord writing >= {target}x parquet: "
                     f"{ratio:.2f}x, {'met' if ratio >= target else 'missed'}."]
    return rows + ["", *_img(img_rel, "write", "Spark write: rows/s and bytes per row")]


EXPORT_LABELS = {"parquet": "`df.write.parquet`",
                 "floor_transfer": "floor: the rows through Python (`mapInArrow`, no output)",
                 "floor_pyarrow": "floor: `mapInArrow` + pyarrow's parquet writer",
                 "row": "`write_tfrecords`, defaults (row layout)",
                 "block": "`write_tfrecords`, `rows_per_record=1024`",
                 "row_no_stats": "`write_tfrecords`, `stats=False` (row layout)"}
EXPORT_TARGET = 1.5  # write_tfrecords' time at most this many times parquet's
EXPORT_FLOOR_FACTOR = 1.15  # or this many times the floor's, where the floor is above it


def _export(r: dict, img_rel: str | None) -> list[str]:
    runs = r["runs"]
    sizes = " and ".join(f"{x['rows']:,}" for x in runs)
    out = [f"## {TITLES['export']}", "",
           _intro("export", r, f"{sizes} rows x 10 columns: 5 double, 3 long, 2 short strings, "
                  f"read from parquet; each writer's best of {r['repeat']}, alternating",
                  _load(r)), "",
           "| writer | " + " | ".join(f"{x['rows']:,} rows: s | vs parquet" for x in runs)
           + " |", "|---|" + "---:|---:|" * len(runs)]
    for k, label in EXPORT_LABELS.items():
        out.append(f"| {label} | " + " | ".join(
            f"{x['seconds'][k]:.2f} | {x['vs_parquet'][k]:.2f}x" for x in runs) + " |")
    verdicts = []
    for x in runs:
        vs = x["vs_parquet"]
        # above 1.5x, the floor (the rows through Python and pyarrow's writer) sets the bar
        limit = EXPORT_TARGET if vs["floor_pyarrow"] <= EXPORT_TARGET else \
            EXPORT_FLOOR_FACTOR * vs["floor_pyarrow"]
        said = ", ".join(f"{layout} {vs[layout]:.2f}x "
                         f"({'met' if vs[layout] <= limit else 'missed'})"
                         for layout in ("row", "block"))
        verdicts.append(f"{x['rows']:,} rows, at most {limit:.2f}x: {said}")
    passes = {p for x in runs for p in x["passes"].values()}
    out += ["", f"Target: `write_tfrecords` at most {EXPORT_TARGET}x parquet's time, or "
                f"{EXPORT_FLOOR_FACTOR}x the floor with pyarrow's writer where that floor is "
                f"above {EXPORT_TARGET}x: {'; '.join(verdicts)}. Passes over the rows: "
                f"{', '.join(str(p) for p in sorted(passes, key=str))}.", ""]
    phased = next((x for x in runs if x.get("phases")), None)
    if phased:
        cpu = phased["phases"]["cpu_s"]
        stages = phased["stages"]["row"] or {}
        out += [f"Where the time goes ({phased['rows']:,} rows): the CPU seconds of each part "
                f"of the tasks' work on one core, over the same rows, and the wall seconds of "
                f"the stages the write itself times (row layout).", "",
                "| phase | seconds |", "|---|---:|"]
        out += [f"| {k} (CPU) | {v:.2f} |" for k, v in cpu.items()]
        out += [f"| the rows into Python, nothing written (wall, the transfer floor) | "
                f"{phased['seconds']['floor_transfer']:.2f} |"]
        out += [f"| stage `{k}` (wall) | {v:.2f} |" for k, v in stages.items()]
        out.append("")
    return out


VS_PARQUET_TARGETS = {"row layout": 1.0, "block layout": 3.0}  # times the parquet copy's rate


def _vs_parquet(r: dict, img_rel: str | None) -> list[str]:
    out = [f"## {TITLES['vs_parquet']}", "",
           _intro("vs_parquet", r, f"{r['rows']:,} rows x 11 columns: 5 double, 3 long, 2 short "
                  f"strings, an id; batches of {r['batch']}, one epoch, no shuffle; each "
                  f"reader's best of {r['repeat']}, alternating; every reader's rows checked "
                  f"against the table", _load(r)), "",
           "| reader | rows/s | vs the parquet copy | target |", "|---|---:|---:|---|"]
    for k, rate in r["rows_per_s"].items():
        t = VS_PARQUET_TARGETS.get(k)
        verdict = "" if t is None else \
            f">= {t:g}x: {'met' if r['vs_parquet'][k] >= t else 'missed'}"
        label = "pyarrow on the parquet copy" if k == "parquet copy" else f"`read_batches`, {k}"
        out.append(f"| {label} | {rate / 1e6:.2f}M | {r['vs_parquet'][k]:.2f}x | {verdict} |")
    out += ["", f"Two reading threads against one (row layout): {r['threads_2_vs_1']:.2f}x "
                f"(target >= 1.8x).", "",
            "The row layout's stages, CPU seconds on one core over all its files:", "",
            "| stage | CPU s |", "|---|---:|"]
    out += [f"| {k} | {v:.2f} |" for k, v in r["stages_cpu_s"].items()]
    out.append("")
    if r.get("frameworks"):
        out += ["Each framework's reader of the row layout against the parquet copy fed to that "
                "framework as its users would (`--frameworks`), side by side:", "",
                "| framework | tfspark rows/s | the parquet copy's | tfspark is |",
                "|---|---:|---:|---:|"]
        out += [f"| {k} | {f['tfspark_rows_per_s'] / 1e6:.2f}M | "
                f"{f['parquet_rows_per_s'] / 1e6:.2f}M | {f['vs_parquet']:.2f}x |"
                for k, f in r["frameworks"].items()]
        out.append("")
    return out


READ_LABELS = {"make_dataset": "`make_dataset` (no shuffle)",
               "make_dataset_shuffled": "`make_dataset` (default window shuffle)",
               "hand_tuned": "(a) TFRecordDataset -> batch -> parse_example -> prefetch",
               "per_record": "(b) parse_single_example, then batch",
               "csv": "(c) tf.data.experimental.make_csv_dataset"}


def _read(r: dict, img_rel: str | None) -> list[str]:
    eps = r["examples_per_s"]
    rows = [f"## {TITLES['read']}", "",
            _intro("read", r, f"{r['rows']:,} rows x 10 columns, batch {r['batch_size']}, "
                   f"{r['files']} files, TensorFlow {r.get('tensorflow', '?')}", _repeat(r),
                   _load(r)), "",
            "| pipeline | examples/s | make_dataset is | target |", "|---|---:|---:|---|"]
    targets = charts.read_targets(r)
    for k, label in READ_LABELS.items():
        if k in eps:
            ratio = eps["make_dataset"] / eps[k]
            target = (f">= {targets[k]:g}x: {'met' if ratio >= targets[k] else 'missed'}"
                      if k in targets else "")
            rows.append(f"| {label} | {eps[k]:,.0f} | {ratio:.2f}x | {target} |")
    return rows + ["", *_img(img_rel, "read", "tf.data read: examples/s per pipeline")]


def _spark_read(r: dict, img_rel: str | None) -> list[str]:
    rps, sec, b = r["rows_per_s"], r["seconds"], r.get("bytes_per_row", {})
    files = r.get("files", {})
    nfiles = (f"{files['tfrecord']} files each" if files.get("tfrecord") == files.get("parquet")
              else ", ".join(f"{v} {k} files" for k, v in files.items()))
    n = len(r.get("all_seconds", {}).get("tfrecord", []))
    rows = [f"## {TITLES['spark_read']}", "",
            _intro("spark_read", r, f"{r['rows']:,} rows, {nfiles}",
                   f"best of {n} alternating runs" if n else "", _load(r)), "",
            "| reader | seconds | rows/s | bytes/row on disk |", "|---|---:|---:|---:|"]
    labels = {"tfrecord": "`spark.read.format(\"tfrecord\")` -> noop",
              "parquet": "`spark.read.parquet` -> noop"}
    for k, label in labels.items():
        if k in rps:
            rows.append(f"| {label} | {sec[k]} | {rps[k]:,} | {b.get(k, '')} |")
    if "tfrecord" in rps and "parquet" in rps:
        rows += ["", f"TFRecord reading at {rps['tfrecord'] / rps['parquet']:.2f}x parquet "
                     "(no target)."]
    return rows + ["", *_img(img_rel, "spark_read", "Spark read: TFRecord vs parquet, rows/s")]


FIRST_LABELS = {"parquet": "`df.write.parquet`", "datasource": "`df.write.format(\"tfrecord\")`",
                "write_tfrecords": "`write_tfrecords` (parquet backup + TFRecords + statistics)",
                "write_tfrecords_nostats": "`write_tfrecords(stats=False)`"}


def _first_write(r: dict, img_rel: str | None) -> list[str]:
    med = r["median"]
    rows = [f"## {TITLES['first_write']}", "",
            _intro("first_write", r, f"{r['rows']:,} rows x 4 columns (long, double, string, "
                   f"long), each writer in a fresh process and local[*] session, writers "
                   f"alternating, median of {r['repeat']} runs", _load(r)), "",
            "| writer | first write, s | second write, s |", "|---|---:|---:|"]
    for k, label in FIRST_LABELS.items():
        if k in med:
            rows.append(f"| {label} | {med[k]['first_s']:.2f} | {med[k]['second_s']:.2f} |")
    rows += ["", f"Target: `write_tfrecords`' first write <= parquet's first write + "
                 f"{r['target_extra_s']:g} s: {r['extra_first_s']:+.2f} s, "
                 f"{'met' if r['met'] else 'missed'}.", ""]
    return rows


def _header(results: dict, img_rel: str | None) -> list[str]:
    out = ["Measured side by side by one command, `make bench`: it runs `python bench/run_all.py`, "
           "which runs each benchmark below in its own process (the exact command is given in "
           "each section) and saves the results in `bench/results/all.json`, then "
           "`python bench/report.py`, which rewrites the generated parts of this page and the "
           "charts in `docs/img/` from that file. Ratios are what count: absolute figures move "
           "with machine load.", ""]
    bases = {charts.machine_base(r.get("machine")) for r in results.values() if r.get("machine")}
    loads = [f"{SHORT.get(n, n)} {charts.load_average(r['machine'])}"
             for n, r in results.items() if charts.load_average(r.get("machine"))]
    if bases:
        out += [f"Machine: {'; '.join(sorted(bases))}" + (
            f" (load average at the start of each benchmark: {', '.join(loads)})" if loads
            else "") + ".", ""]
    items = charts.headline_ratios(results)
    if items:
        out += [*_img(img_rel, "headline", "tfspark vs the usual alternative: speed-up per "
                      "benchmark, with targets"),
                "| comparison | ratio | target |", "|---|---:|---|"]
        for i in items:
            t = i["target"]
            verdict = "" if t is None else f">= {t:g}x: {'met' if i['ratio'] >= t else 'missed'}"
            out.append(f"| {i['short']} | {_ratio(i['ratio'])} | {verdict} |")
        out.append("")
    out += ["To rebuild this page and the charts from the saved results, without running any "
            "benchmark: `python bench/report.py` (the same as `python bench/run_all.py "
            "--report-only`). Text outside the generated blocks (the notes below each section) "
            "is kept.", ""]
    return out


def _block(r: dict, img_rel: str | None) -> list[str]:
    t, sp, ratio, met = r["tf"], r["spark"], r["ratios"], r["met"]
    n, sn, eps = r["rows"], r["spark_rows"], t["examples_per_s"]

    def verdict(key: str, text: str) -> str:
        return f"{text}: {'met' if met[key] else 'missed'}"

    return [
        f"## {TITLES['block']}", "",
        _intro("block", r, f"rows_per_record={r['rows_per_record']}, the 10-column table; "
               f"tf.data on {n:,} rows in 8 files per layout, Spark on {sn:,} rows, "
               f"best of {r['repeat']} alternating runs", _load(r)), "",
        "| measure | row layout | block layout | parquet | block vs | target |",
        "|---|---:|---:|---:|---:|---|",
        f"| `make_dataset`, batch {r['batch_size']}, no shuffle (examples/s) | "
        f"{eps['rows']:,.0f} | {eps['blocks']:,.0f} | | {_ratio(ratio['read_vs_rows'])} rows | "
        f"{verdict('read_vs_rows', '>= 5x')}; "
        f"{verdict('read_examples_per_s', '>= 1M/s')} |",
        f"| `make_dataset`, default window shuffle (examples/s) | {eps['rows_shuffled']:,.0f} | "
        f"{eps['blocks_shuffled']:,.0f} | | "
        f"{_ratio(eps['blocks_shuffled'] / eps['rows_shuffled'])} rows | |",
        f"| bytes per row, uncompressed | {t['bytes']['rows'] / n:.1f} | "
        f"{t['bytes']['blocks'] / n:.1f} | | {ratio['bytes_vs_rows']:.2f}x rows | "
        f"{verdict('bytes_vs_rows', '<= 0.33x')} |",
        f"| bytes per row, gzip level 6 (parquet: snappy) | | "
        f"{t['bytes']['blocks_gzip'] / n:.1f} | {sp['bytes']['parquet'] / sn:.1f} | "
        f"{ratio['gzip_vs_parquet']:.2f}x parquet | {verdict('gzip_vs_parquet', '<= 0.8x')} |",
        f"| Spark write, s (`df.write.format(\"tfrecord\")` / `.parquet`) | "
        f"{sp['write_s']['rows']:.2f} | {sp['write_s']['blocks']:.2f} | "
        f"{sp['write_s']['parquet']:.2f} | {ratio['write_vs_parquet']:.2f}x parquet's rows/s | "
        f"{verdict('write_vs_parquet', '>= 1.2x')} |",
        f"| Spark read into noop, s | {sp['read_s']['rows']:.2f} | {sp['read_s']['blocks']:.2f} | "
        f"{sp['read_s']['parquet']:.2f} | {ratio['spark_read_vs_parquet']:.2f}x parquet's "
        f"rows/s | {verdict('spark_read_vs_parquet', '>= 0.75x')} |", ""]


SECTIONS = {"encode": _encode, "write": _write, "export": _export, "read": _read,
            "spark_read": _spark_read, "first_write": _first_write, "block": _block,
            "vs_parquet": _vs_parquet}


def blocks(results: dict, img_rel: str | None = "img") -> dict[str, str]:
    """{block name: its markdown, markers included} for the header and each benchmark present."""
    body = {"header": _header(results, img_rel)}
    for name in ORDER:
        if name in results:
            body[name] = SECTIONS[name](results[name], img_rel)
    for name, r in results.items():  # anything else: its JSON
        if name not in body:
            body[name] = [f"## {name}", "", f"`{_command(name, r)}`", "", "```json",
                          json.dumps({k: v for k, v in r.items() if k != "command"}, indent=1),
                          "```", ""]
    return {name: "\n".join([BEGIN.format(name=name), *_wrap(lines), END.format(name=name)])
            for name, lines in body.items()}


def render(results: dict, existing: str | None = None, img_rel: str | None = "img") -> str:
    """The page: `existing` with its generated blocks replaced (hand-written text kept), or a
    fresh page when existing is None."""
    new = blocks(results, img_rel)
    if existing is None:
        return "\n\n".join(["# Benchmarks", *new.values()]) + "\n"
    if not BLOCK.search(existing):
        raise ValueError("no generated blocks (<!-- BEGIN generated: ... -->) in the page; "
                         "rerun with --overwrite to replace it")
    seen: set[str] = set()

    def swap(m: re.Match) -> str:
        seen.add(m.group(1))
        return new.get(m.group(1), m.group(0))

    text = BLOCK.sub(swap, existing)
    extra = [block for name, block in new.items() if name not in seen]
    if extra:
        text = text.rstrip("\n") + "\n\n" + "\n\n".join(extra) + "\n"
    return text


def load_results(path: str) -> dict:
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    out = {}
    for name in ORDER:  # no all.json: the per-benchmark files bench/run_all.py leaves behind
        p = os.path.join(os.path.dirname(path), f"{name}.json")
        if os.path.exists(p):
            with open(p) as f:
                out[name] = json.load(f)
    if not out:
        raise SystemExit(f"no results: {path} (run `make bench` first)")
    return out


def write_report(results: dict, out: str, img_dir: str | None, overwrite: bool = False
                 ) -> list[str]:
    """Rewrites the page `out` and (unless img_dir is None) the charts; returns the paths."""
    existing = None
    if os.path.exists(out) and not overwrite:
        with open(out) as f:
            existing = f.read()
    img_rel = (os.path.relpath(img_dir, os.path.dirname(os.path.abspath(out))).replace(os.sep, "/")
               if img_dir else None)
    text = render(results, existing, img_rel)
    written = list(charts.render_charts(results, img_dir).values()) if img_dir else []
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        f.write(text)
    return [out, *written]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=os.path.join(RESULTS, "all.json"))
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    p.add_argument("--img-dir", default=os.path.join(ROOT, "docs", "img"))
    p.add_argument("--no-charts", action="store_true", help="page only, no PNGs (and no links)")
    p.add_argument("--overwrite", action="store_true",
                   help="write a fresh page, dropping the hand-written text of the old one")
    a = p.parse_args(argv)
    try:
        paths = write_report(load_results(a.results), a.out,
                             None if a.no_charts else a.img_dir, a.overwrite)
    except ValueError as e:
        raise SystemExit(f"{a.out}: {e}") from None
    for path in paths:
        print(os.path.relpath(path, ROOT), f"{os.path.getsize(path):,} bytes")


if __name__ == "__main__":
    main()
