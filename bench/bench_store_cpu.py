"""Where the CPU of a read from an object store goes, on this rig: one epoch of read_batches
(batch 1024, no shuffling) over the same files on local disk and in fake-gcs-server behind the
50 ms latency proxy, with the CPU seconds of the reader's process, the emulator's and the
proxy's (from /proc). On 2 cores the emulator and the proxy take CPU from the reader, which a
real store does not; this separates the two.

    python bench/bench_store_cpu.py --rows 2000000 --repeat 3
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import machine, rows_args, save_json  # noqa: E402

DELAY = 0.05


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    args = rows_args(__doc__).parse_args()
    from bench_object_store import on_gcs

    import tfspark

    doc: dict = {"machine": machine(), "rows": args.rows, "runs": []}
    with on_gcs(args.rows, {"rows": 1, "blocks": 1024}) as (gcs, local, bucket):
        remote = gcs.filesystem(DELAY)
        proxy = gcs._proxies[DELAY]._proc.pid
        for layout, here in local.items():
            mib = sum(os.path.getsize(os.path.join(here, f)) for f in os.listdir(here)) / 2**20
            for k in range(args.repeat + 1):  # the first round warms up, untimed
                for place, fs, path in (("local", None, here),
                                        ("gcs+50ms", remote, f"{bucket}/{layout}")):
                    before = time.process_time(), cpu_s(gcs._proc.pid), cpu_s(proxy)
                    t = time.perf_counter()
                    rows = sum(len(b["f0"]) for b in tfspark.read_batches(
                        path, 1024, shuffle_buffer=0, label_cols=[], filesystem=fs))
                    run = {"layout": layout, "place": place, "mib": round(mib),
                           "rows_s": rows / (time.perf_counter() - t),
                           "reader_cpu_s": time.process_time() - before[0],
                           "emulator_cpu_s": cpu_s(gcs._proc.pid) - before[1],
                           "proxy_cpu_s": cpu_s(proxy) - before[2]}
                    if k == 0:
                        continue
                    doc["runs"].append(run)
                    print(f"{layout:6s} {place:8s} {run['mib']:4d} MiB "
                          f"{run['rows_s'] / 1e6:5.2f}M rows/s (epoch), CPU s: reader "
                          f"{run['reader_cpu_s']:.2f}, emulator {run['emulator_cpu_s']:.2f}, "
                          f"proxy {run['proxy_cpu_s']:.2f}", flush=True)
    save_json(args.json, doc)

if __name__ == "__main__":
    main()
