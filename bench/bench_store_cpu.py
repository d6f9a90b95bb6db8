"""Where the CPU of a read from an object store goes on this rig, and how fast any reader could
go here: one epoch (batch 1024, no shuffling) over the same files on local disk and in
fake-gcs-server behind the 50 ms latency proxy, with the CPU seconds of the reader's process,
the emulator's and the proxy's (from /proc); and the files only moved ("transfer": every byte
through tfspark's Fetcher into its range buffers, nothing framed or decoded), the least work a
reader of the store must add to what it does on local disk.

The budget: an epoch from the store does at least the local epoch's work plus the transfer's
(the local epoch's own file reads, its transfer line, counted once), all of it on the same
cores, the emulator and the proxy included. So no reader here can beat

    bound = local epoch s / ((local CPU-s + remote transfer CPU-s - local transfer CPU-s) / c)

as a ratio to local, with c the cores the epoch keeps busy: all of them ("at full use"), or as
many as the local epoch itself kept busy, its CPU-s over its seconds ("at local's use"). Each
figure is the median of --repeat epochs, places alternating (the first round warms up).

"busy" is the cores the whole machine kept busy (/proc/stat, sampled every 50 ms) over each
epoch's last 80%, after its start-up (planning, building the pipeline, the first requests): an
epoch that keeps the cores as busy from the store as from local disk has no idle CPU left to
hide the transfer's work in.

    python bench/bench_store_cpu.py --rows 10000000 --repeat 5 --readers make_dataset_graph
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import machine, rows_args, save_json  # noqa: E402

DELAY = 0.05
BATCH = 1024


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Busy:
    """Cores the machine keeps busy (all processes), sampled every `every` seconds from
    /proc/stat while the context is open; tail(share): their mean over the last `share`."""

    def __init__(self, every: float = 0.05):
        self.every, self.samples = every, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _read() -> tuple[int, int]:
        with open("/proc/stat") as f:
            ticks = [int(v) for v in f.readline().split()[1:]]
        return sum(ticks), ticks[3] + ticks[4]  # all, idle + iowait

    def _run(self) -> None:
        cores, before = os.cpu_count() or 1, self._read()
        while not self._stop.wait(self.every):
            now = self._read()
            spent, idle = now[0] - before[0], now[1] - before[1]
            if spent:
                self.samples.append(cores * (1 - idle / spent))
            before = now

    def __enter__(self) -> Busy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def tail(self, share: float = 0.8) -> float:
        last = self.samples[-max(1, round(len(self.samples) * share)):]
        return sum(last) / len(last) if last else 0.0


def transfer(path: str, fs) -> int:
    """Every byte of the data set's files moved into memory by tfspark's Fetcher (remote files
    in its concurrent ranges), as many files at once as the machine has cores."""
    import numpy as np

    from tfspark.store.concurrency import cores
    from tfspark.store.fetch import Fetcher
    from tfspark.store.read_plan import plan_read

    part = plan_read(path, filesystem=fs, label_cols=[])
    sizes = part.sizes or [None] * len(part.locations)
    empty = np.empty(0, np.uint8)

    def drain(f: int) -> int:
        moved = 0
        with fetcher.open(part.locations[f], sizes[f]) as stream:
            if hasattr(stream, "next_span"):  # a remote file: its ranges, not copied
                while (span := stream.next_span(empty)) is not None:
                    moved += len(span)
            else:
                buf = bytearray(8 << 20)
                while got := stream.readinto(buf):
                    moved += got
        return moved

    with Fetcher() as fetcher, ThreadPoolExecutor(cores()) as pool:
        return sum(pool.map(drain, range(len(part.locations))))


def one_epoch(reader: str, path: str, fs) -> int:
    """Rows (or for transfer, bytes) of one epoch of `reader`."""
    import tfspark

    if reader == "transfer":
        return transfer(path, fs)
    if reader == "make_dataset_graph":
        import tensorflow as tf

        ds = tfspark.make_dataset(path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=fs)
        return int(ds.reduce(tf.constant(0, tf.int64),
                             lambda n, b: n + tf.shape(b["f0"], tf.int64)[0]).numpy())
    return sum(len(b["f0"]) for b in tfspark.read_batches(
        path, BATCH, shuffle_buffer=0, label_cols=[], filesystem=fs))


def main() -> None:
    ap = rows_args(__doc__)
    ap.add_argument("--readers", default="read_batches,make_dataset_graph")
    ap.add_argument("--layouts", default="rows,blocks")
    args = ap.parse_args()
    from bench_object_store import on_gcs

    from tfspark.store.concurrency import cores

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    readers = [*args.readers.split(","), "transfer"]
    layouts = {k: v for k, v in {"rows": 1, "blocks": 1024}.items()
               if k in args.layouts.split(",")}
    doc: dict = {"machine": machine(), "rows": args.rows, "cores": cores(), "runs": [],
                 "bounds": []}
    with on_gcs(args.rows, layouts) as (gcs, local, bucket):
        remote = gcs.filesystem(DELAY)
        proxy = gcs._proxies[DELAY]._proc.pid
        places = {"local": lambda layout: (None, local[layout]),
                  "gcs+50ms": lambda layout: (remote, f"{bucket}/{layout}")}
        runs: dict[tuple[str, str, str], list[dict]] = {}
        for k in range(args.repeat + 1):  # the first round warms up, untimed
            for layout in local:
                for reader in readers:
                    for place, where in places.items():
                        fs, path = where(layout)
                        before = os.times(), cpu_s(gcs._proc.pid), cpu_s(proxy)
                        t = time.perf_counter()
                        with Busy() as busy:
                            n = one_epoch(reader, path, fs)
                        secs, after = time.perf_counter() - t, os.times()
                        run = {"layout": layout, "reader": reader, "place": place,
                               "n": n, "s": secs,
                               "user_s": after.user - before[0].user,
                               "system_s": after.system - before[0].system,
                               "emulator_cpu_s": cpu_s(gcs._proc.pid) - before[1],
                               "proxy_cpu_s": cpu_s(proxy) - before[2],
                               "busy_cores": busy.tail()}
                        run["cpu_s"] = (run["user_s"] + run["system_s"]
                                        + run["emulator_cpu_s"] + run["proxy_cpu_s"])
                        if k == 0:
                            continue
                        doc["runs"].append(run)
                        runs.setdefault((layout, reader, place), []).append(run)
                        unit = "MB/s" if reader == "transfer" else "M rows/s"
                        print(f"{layout:6s} {reader:18s} {place:8s} {n / secs / 1e6:7.2f} "
                              f"{unit:8s} CPU s: reader {run['user_s']:.2f} user + "
                              f"{run['system_s']:.2f} system, emulator "
                              f"{run['emulator_cpu_s']:.2f}, proxy {run['proxy_cpu_s']:.2f}; "
                              f"busy {run['busy_cores']:.2f} cores",
                              flush=True)
        med = {key: {m: statistics.median(r[m] for r in rs)
                     for m in ("s", "cpu_s", "busy_cores")}
               for key, rs in runs.items()}
        for layout in local:
            moved = (med[(layout, "transfer", "gcs+50ms")]["cpu_s"]
                     - med[(layout, "transfer", "local")]["cpu_s"])
            for reader in readers[:-1]:
                here, there = med[(layout, reader, "local")], med[(layout, reader, "gcs+50ms")]
                need = here["cpu_s"] + moved  # CPU-s a remote epoch needs at least
                used = here["cpu_s"] / here["s"]  # cores the local epoch kept busy
                bound = {"layout": layout, "reader": reader,
                         "measured": here["s"] / there["s"],
                         "bound_full_use": min(1.0, here["s"] * cores() / need),
                         "bound_local_use": here["cpu_s"] / need,  # (s x used / need)
                         "transfer_cpu_s": moved, "local_cpu_s": here["cpu_s"],
                         "local_cores_busy": used, "busy_local": here["busy_cores"],
                         "busy_remote": there["busy_cores"]}
                doc["bounds"].append(bound)
                print(f"{layout:6s} {reader:18s} epoch vs local: measured "
                      f"{bound['measured']:.2f}x; no reader can beat "
                      f"{bound['bound_full_use']:.2f}x at full use of {cores()} cores, "
                      f"{bound['bound_local_use']:.2f}x at local's use ({used:.2f}); "
                      f"transfer {moved:.2f} CPU-s on top of local's {here['cpu_s']:.2f}; "
                      f"busy after start-up {here['busy_cores']:.2f} cores local, "
                      f"{there['busy_cores']:.2f} from the store",
                      flush=True)
    save_json(args.json, doc)


if __name__ == "__main__":
    main()
