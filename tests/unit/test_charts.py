"""bench/charts.py and bench/report.py on a small synthetic results dict (the shape of
bench/results/all.json): the PNGs, the page's ratios, and that hand-written text survives."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

RESULTS = {
    "encode": {
        "machine": "x86_64, 2 cores, Python 3.11.7, load average 1.0 at start",
        "cpu": "pinned to one core", "rows": 1000, "loop_rows": 100,
        "tfspark_rows_per_s": 1_200_000, "per_row_loop_rows_per_s": 12_000, "ratio": 100.0,
        "tfspark_mb_per_s": 200.0, "bytes_per_row": 188.0,
        "command": "python bench/bench_encode.py --rows 1000",
    },
    "write": {
        "machine": "x86_64, 2 cores, Python 3.11.7, load average 1.5 at start",
        "master": "local[2]", "rows": 2000,
        "seconds": {"parquet": 2.0, "tfrecord": 2.5, "tfrecord.gz": 5.0, "workflow": 3.0},
        "rows_per_s": {"parquet": 1000, "tfrecord": 800, "tfrecord.gz": 400, "workflow": 667},
        "throughput_vs_parquet": {"parquet": 1.0, "tfrecord": 0.8, "tfrecord.gz": 0.4,
                                  "workflow": 0.67},
        "bytes_per_row": {"parquet": 50.0, "tfrecord": 190.0, "tfrecord.gz": 45.0},
        "command": "python bench/bench_write.py --rows 2000 --repeat 1",
    },
    "read": {
        "rows": 1000, "batch_size": 128, "files": 2, "repeat": 1, "tensorflow": "2.21.0",
        "machine": "x86_64, 2 cores, Python 3.11.7, load average 2.0 at start",
        "examples_per_s": {"make_dataset": 200_000.0, "make_dataset_shuffled": 190_000.0,
                           "hand_tuned": 80_000.0, "per_record": 16_000.0, "csv": 50_000.0},
        "targets": {"hand_tuned": 0.9, "per_record": 10.0, "csv": 3.0},
        "command": "python bench/bench_read.py --rows 1000",
    },
    "spark_read": {
        "machine": "x86_64, 2 cores, Python 3.11.7, load average 2.5 at start",
        "master": "local[2]", "rows": 1000, "files": {"parquet": 2, "tfrecord": 2},
        "seconds": {"tfrecord": 2.0, "parquet": 1.0},
        "all_seconds": {"tfrecord": [2.0], "parquet": [1.0]},
        "rows_per_s": {"tfrecord": 500, "parquet": 1000},
        "bytes_per_row": {"parquet": 50.0, "tfrecord": 190.0},
        "command": "python bench/bench_spark_read.py --rows 1000",
    },
}


def _load(name: str):
    """bench/NAME.py as a module (bench/ is scripts, not a package; report imports charts)."""
    bench = str(ROOT / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    spec = importlib.util.spec_from_file_location(f"_tfspark_bench_{name}",
                                                  ROOT / "bench" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def charts():
    pytest.importorskip("matplotlib")
    return _load("charts")


@pytest.fixture(scope="module")
def report():
    return _load("report")


def test_render_charts_writes_valid_deterministic_pngs(charts, tmp_path):
    written = charts.render_charts(RESULTS, str(tmp_path / "a"))
    assert set(written) == {"headline", "encode", "write", "read", "spark_read"}
    for name, path in written.items():
        data = Path(path).read_bytes()
        assert Path(path) == tmp_path / "a" / f"{name}.png"
        assert data[:8] == PNG_MAGIC, name
        assert 5_000 < len(data) < 150_000, (name, len(data))
        assert b"Software" not in data  # no matplotlib version stamp in the metadata
    # The same results give the same bytes (no timestamps), so regenerated charts diff clean.
    again = charts.render_charts(RESULTS, str(tmp_path / "b"))
    for name, path in written.items():
        assert Path(again[name]).read_bytes() == Path(path).read_bytes(), name


def test_only_the_benchmarks_present(charts, tmp_path):
    written = charts.render_charts({"read": RESULTS["read"]}, str(tmp_path))
    assert set(written) == {"headline", "read"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["headline.png", "read.png"]


def test_headline_ratios(charts):
    items = charts.headline_ratios(RESULTS)
    assert [i["bench"] for i in items] == ["encode", "write", "read", "read", "read",
                                           "spark_read"]
    assert [round(i["ratio"], 2) for i in items] == [100.0, 0.8, 12.5, 4.0, 2.5, 0.5]
    assert [i["target"] for i in items] == [80.0, 0.5, 10.0, 3.0, 0.9, None]


def test_report_contains_ratios_commands_and_images(report):
    text = report.render(RESULTS)
    for needle in ("100.0x", "0.80x", "12.5x", "4.00x", "2.50x", "0.50x",
                   "1,200,000", "12,000", "200,000", "190.0",
                   "python bench/bench_encode.py --rows 1000",
                   "python bench/bench_write.py --rows 2000 --repeat 1",
                   "x86_64, 2 cores, Python 3.11.7", "make bench", "python bench/report.py",
                   "](img/headline.png)", "](img/encode.png)", "](img/write.png)",
                   "](img/read.png)", "](img/spark_read.png)"):
        assert needle in text, needle
    assert "missed" not in text  # every target met in RESULTS
    slow = RESULTS | {"encode": RESULTS["encode"] | {"ratio": 50.0}}
    assert "50.0x | >= 80x: missed" in report.render(slow)
    # Without charts there are no image links.
    assert "![" not in report.render(RESULTS, img_rel=None)


def test_report_keeps_hand_written_text(report):
    page = report.render(RESULTS)
    page = page.replace("# Benchmarks\n", "# Benchmarks\n\nHAND-WRITTEN INTRO\n", 1)
    page = page.replace("<!-- END generated: write -->",
                        "<!-- END generated: write -->\n\nHAND-WRITTEN WRITE NOTE", 1)
    newer = RESULTS | {"encode": RESULTS["encode"] | {"ratio": 123.4}}
    again = report.render(newer, page)
    assert "HAND-WRITTEN INTRO" in again and "HAND-WRITTEN WRITE NOTE" in again
    assert "123.4x" in again and "**100.0x**" not in again
    assert report.render(newer, again) == again  # idempotent

    # A benchmark missing from the results keeps its block; one missing from the page is added.
    only_read = report.render({"read": RESULTS["read"]}, again)
    assert "123.4x" in only_read
    partial = again.split("<!-- BEGIN generated: spark_read")[0]
    assert "## Spark read on" in report.render(RESULTS, partial)

    with pytest.raises(ValueError):
        report.render(RESULTS, "# Benchmarks\n\nno generated blocks here\n")


def test_write_report_files(report, tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "docs" / "benchmarks.md"
    paths = report.write_report(RESULTS, str(out), str(tmp_path / "docs" / "img"))
    assert out.exists() and "](img/headline.png)" in out.read_text()
    assert len(paths) == 6 and all(Path(p).exists() for p in paths)
