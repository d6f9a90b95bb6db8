"""The read side's CRC-32C: the x86 crc32 instruction in the compiled scan (three lanes, the GIL
released), against the way before, which left the data CRCs of records of 16 KiB or more to the
crc32c package after the scan (a Python call per record, holding the GIL; tfrecord.
CRC_INSTRUCTION = False), side by side in one run. Every record of the table below is that big.

1. GB/s of each CRC alone on 64 MiB (one core).
2. read_batches on the GPU-feed table of bench_gpu_feed.py (40 float32 + 4 int64 + label, blocks
   of 1024 rows: 180 KB records, 16 files), default window shuffle, batch 8192: rows/s and CPU-s
   per epoch, medians of --repeat, both ways alternating in one process.
3. With --py-spy PATH: the share of time some thread holds the GIL while read_batches runs
   epoch after epoch (py-spy --gil attached for 6 s, each way in a process of its own), as GIL
   seconds per epoch: the serial part that bounds the reader on many cores.

    python bench/bench_crc.py --rows 2000000 --repeat 7
    python bench/bench_crc.py --rows 2000000 --repeat 7 --py-spy /tmp/pyspy/bin/py-spy
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import machine, rows_args, save_json  # noqa: E402

WAYS = {"instruction": True, "package": False}  # tfrecord.CRC_INSTRUCTION


def crc_rates() -> dict[str, float]:
    import crc32c
    import numpy as np

    from tfspark.wire import crc_hw

    buf = np.random.default_rng(0).integers(0, 256, 1 << 26, dtype=np.uint8)
    ways = {"tables (compiled)": lambda: crc_hw._crc_tables(buf, 0, buf.size),
            "crc32c package": lambda: crc32c.crc32c(buf)}
    if crc_hw.AVAILABLE:
        ways["instruction, 3 lanes"] = lambda: crc_hw._crc_instruction(buf, 0, buf.size)
    out = {}
    for name, run in ways.items():
        run()
        t = time.perf_counter()
        for _ in range(5):
            run()
        out[name] = buf.size * 5 / (time.perf_counter() - t) / 1e9
    return out


def epochs(path: str, instruction: bool, n: int) -> tuple[float, float]:
    """Median seconds and CPU seconds of n epochs of read_batches."""
    import tfspark
    from tfspark.wire import tfrecord

    tfrecord.CRC_INSTRUCTION = instruction
    wall, cpu = [], []
    for _ in range(n):
        t, c = time.perf_counter(), time.process_time()
        for _ in tfspark.read_batches(path, 8192, seed=1, label_cols=[]):
            pass
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def gil_share(py_spy: str, path: str, way: str) -> float:
    """GIL seconds per epoch: the share of 6 s in which py-spy --gil (attached to a process
    reading epoch after epoch) finds a thread holding the GIL, times the epoch's seconds."""
    code = (f"import sys; sys.path.insert(0, {HERE!r}); from bench_crc import epochs; "
            f"epochs({path!r}, {WAYS[way]}, 1); print('warm', flush=True); "
            f"epochs({path!r}, {WAYS[way]}, 1000)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        proc.stdout.readline()  # one epoch done: started, compiled, warm
        with tempfile.NamedTemporaryFile(suffix=".txt") as out:
            subprocess.run([py_spy, "record", "--pid", str(proc.pid), "--duration", "6",
                            "--gil", "-r", "500", "--nonblocking", "-f", "raw", "-o", out.name],
                           capture_output=True, check=True)
            samples = sum(int(line.rsplit(" ", 1)[1]) for line in open(out.name))
    finally:
        proc.kill()
        proc.wait()
    return samples / 500 / 6.0 * epochs(path, WAYS[way], 3)[0]


def main() -> None:
    ap = rows_args(__doc__, repeat=7)
    ap.add_argument("--py-spy", help="py-spy's path: also measure the GIL's share")
    args = ap.parse_args()
    from bench_block import write_files
    from bench_gpu_feed import data

    from tfspark.wire import crc_hw

    results: dict = {"machine": machine(), "rows": args.rows,
                     "instruction_available": crc_hw.AVAILABLE, "crc_gb_s": crc_rates()}
    for name, rate in results["crc_gb_s"].items():
        print(f"{name:22s} {rate:6.2f} GB/s", flush=True)
    ways = WAYS if crc_hw.AVAILABLE else {"package": False}
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-crc-") as tmp:
        table, spec = data(args.rows)
        path = write_files(args.rows, os.path.join(tmp, "blocks"), 1024, data=table,
                           files=16)
        for on in ways.values():
            epochs(path, on, 1)  # warm-up: compiles, page cache
        runs: dict[str, list[tuple[float, float]]] = {w: [] for w in ways}
        for _ in range(args.repeat):
            for way, on in ways.items():
                runs[way].append(epochs(path, on, 1))
        for way in ways:
            s = statistics.median(r[0] for r in runs[way])
            c = statistics.median(r[1] for r in runs[way])
            results[way] = {"rows_s": args.rows / s, "cpu_s": c}
            print(f"read_batches, {way:11s} {args.rows / s / 1e6:6.2f} M rows/s  "
                  f"{c:.2f} CPU-s per epoch", flush=True)
            if args.py_spy:
                g = gil_share(args.py_spy, path, way)
                results[way]["gil_s"] = g
                print(f"  GIL held {g:.3f} s per epoch", flush=True)
    if args.json:
        save_json(args.json, results)


if __name__ == "__main__":
    main()
