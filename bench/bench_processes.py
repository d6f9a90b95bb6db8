"""read_batches(..., processes=N) against the reader's threads in the training process, on the
GPU-feed table of bench_gpu_feed.py (40 float32 + 4 int64 + label, blocks of 1024 rows, 16
files), batch 8192, the step's two matrices made by the reader (stack=), default window
shuffle; the ways alternate epoch by epoch in one process, medians of --repeat.

Two consumers:
- "empty": a bare loop; the training process's CPU-s per epoch is what receiving the batches
  costs it (with processes: the hand-over alone; with threads: all the reading).
- "host loop": each batch costs the loop --step-ms of Python holding the GIL, as a GPU
  training loop's device_put and step dispatch do (about 1 ms per batch of 8,192 on the H200,
  docs/benchmarks.md). "memory" is the same loop over batches held in memory: its rate is the
  ceiling, and fed / memory is the ratio whose goal on a GPU is >= 0.9.

CPU-s of the reading processes (psutil) are reported beside the training process's. The
worker processes of PyTorch's DataLoader (torch_dataset, fork) and of Grain's mp_prefetch
(grain_dataset) read the same files with as many processes, for comparison, where installed.

    python bench/bench_processes.py --rows 2000000 --repeat 5
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import machine, rows_args, save_json  # noqa: E402


def busy(ms: float) -> None:
    """Python work holding the GIL for about `ms` milliseconds."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def epoch(source, step_ms: float, children) -> tuple[float, float, float, int]:
    """(seconds, this process's CPU-s, the reading processes' CPU-s, rows) of one pass."""
    before = sum(sum(p.cpu_times()[:2]) for p in children())
    t, c, rows = time.perf_counter(), time.process_time(), 0
    for _x, y in source:
        rows += len(y)
        if step_ms:
            busy(step_ms)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return wall, cpu, sum(sum(p.cpu_times()[:2]) for p in children()) - before, rows


class Epochs:
    """An endless loader's batches, `rows` rows per pass (its workers start once)."""

    def __init__(self, loader, rows: int):
        self.it, self.rows = iter(loader), rows

    def __iter__(self):
        n = 0
        while n < self.rows:
            x, y = next(self.it)
            n += len(y)
            yield x, y


def loaders(path: str, rows: int, n: int, common: dict) -> dict:
    """DataLoader and Grain worker processes over the same files, where installed."""
    out: dict = {}
    try:
        from torch.utils.data import DataLoader

        import tfspark
        ds = tfspark.torch_dataset(path, 8192, epochs=None, num_threads=1, **common)
        out[f"DataLoader({n})"] = Epochs(DataLoader(ds, batch_size=None, num_workers=n,
                                                    persistent_workers=True,
                                                    prefetch_factor=4), rows)
    except ImportError:
        pass
    try:
        import grain

        import tfspark
        ds = tfspark.grain_dataset(path, 8192, epochs=None, num_threads=1, **common)
        out[f"Grain mp_prefetch({n})"] = Epochs(ds.mp_prefetch(
            grain.MultiprocessingOptions(num_workers=n)), rows)
    except ImportError:
        pass
    return out


def main() -> None:
    ap = rows_args(__doc__, repeat=5)
    ap.add_argument("--processes", default="2", help="comma-separated process counts")
    ap.add_argument("--threads", type=int, default=2, help="the threads way's num_threads")
    ap.add_argument("--step-ms", type=float, default=1.0)
    args = ap.parse_args()
    import psutil
    from bench_block import write_files
    from bench_gpu_feed import STACK, data

    import tfspark

    me = psutil.Process()
    results: dict = {"machine": machine(), "rows": args.rows, "step_ms": args.step_ms}
    print(results["machine"], flush=True)
    with tempfile.TemporaryDirectory(prefix="tfspark-bench-processes-") as tmp:
        table, spec = data(args.rows)
        path = write_files(args.rows, os.path.join(tmp, "blocks"), 1024, data=table,
                           files=16)
        common = dict(label_cols="label", stack=STACK, seed=1)
        ways = {"threads": tfspark.read_batches(path, 8192, num_threads=args.threads,
                                                **common)}
        for n in (int(v) for v in args.processes.split(",")):
            ways[f"processes={n}"] = tfspark.read_batches(path, 8192, processes=n, **common)
        ways.update(loaders(path, args.rows, int(args.processes.split(",")[0]), common))
        held = list(ways["threads"])
        ways["memory"] = held  # type: ignore[assignment]
        for source in ways.values():
            for _ in source:  # warm-up: processes started, kernels compiled, page cache
                pass
        for consumer, step in (("empty", 0.0), ("host loop", args.step_ms)):
            runs: dict[str, list] = {w: [] for w in ways}
            for _ in range(args.repeat):
                for way, source in ways.items():
                    runs[way].append(epoch(source, step, me.children))
            out = results.setdefault(consumer, {})
            for way, got in runs.items():
                s, c, k = (statistics.median(r[i] for r in got) for i in range(3))
                rows = got[0][3]
                out[way] = {"rows_s": rows / s, "cpu_s": c, "children_cpu_s": k,
                            "cpu_ms_per_batch": c / -(-rows // 8192) * 1000}
            mem = out["memory"]["rows_s"]
            print(f"\n{consumer}" + (f" ({step} ms of Python per batch)" if step else ""))
            for way, r in out.items():
                ratio = f"  {r['rows_s'] / mem:.2f}x memory" if step else ""
                print(f"  {way:12s} {r['rows_s'] / 1e6:6.2f} M rows/s  training process "
                      f"{r['cpu_s']:.2f} CPU-s ({r['cpu_ms_per_batch']:.2f} ms/batch)  "
                      f"reading processes {r['children_cpu_s']:.2f} CPU-s{ratio}", flush=True)
        for source in ways.values():
            if hasattr(source, "close"):
                source.close()
    save_json(args.json, results)


if __name__ == "__main__":
    main()
