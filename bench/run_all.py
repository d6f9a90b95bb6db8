"""Run every benchmark, each in its own process, and write docs/benchmarks.md and its charts.

    python bench/run_all.py                 # full sizes (1M encode/read rows, 5M write rows)
    python bench/run_all.py --quick         # small sizes, for a smoke run
    python bench/run_all.py --only encode,write   # the others keep their saved results
    python bench/run_all.py --report-only   # no benchmark: page + charts from the saved results
    python bench/run_all.py --no-report     # results (bench/results/*.json) only

The results go to bench/results/NAME.json and, together, bench/results/all.json; then
bench/report.py rewrites the generated blocks of docs/benchmarks.md and docs/img/*.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

# name -> (script, full-size args, quick args)
BENCHES = {
    "encode": ("bench_encode.py", ["--rows", "1000000"], ["--rows", "100000", "--loop-rows",
                                                          "20000"]),
    "write": ("bench_write.py", ["--rows", "5000000", "--repeat", "2"],
              ["--rows", "200000", "--repeat", "1"]),
    "export": ("bench_export.py", ["--rows", "2000000", "10000000", "--repeat", "3"],
               ["--rows", "200000", "--repeat", "1"]),
    "read": ("bench_read.py", ["--rows", "1000000"], ["--rows", "100000"]),
    "spark_read": ("bench_spark_read.py", ["--rows", "1000000"], ["--rows", "100000"]),
    "first_write": ("bench_first_write.py", ["--repeat", "5"], ["--repeat", "1"]),
    "block": ("bench_block.py", ["--rows", "1000000", "--spark-rows", "5000000"],
              ["--rows", "100000", "--spark-rows", "200000", "--repeat", "1"]),
    "vs_parquet": ("bench_vs_parquet.py", ["--rows", "2000000", "--repeat", "4", "--frameworks"],
                   ["--rows", "200000", "--repeat", "1"]),
    "numpy_read": ("bench_numpy_read.py", ["--rows", "1000000"],
                   ["--rows", "100000", "--repeat", "1"]),
    "object_store": ("bench_object_store.py", ["--rows", "2000000", "--repeat", "2"],
                     ["--rows", "100000", "--repeat", "1", "--small-rows", "500"]),
}


def run(names: list[str], quick: bool) -> dict[str, dict]:
    os.makedirs(RESULTS, exist_ok=True)
    out = {}
    for name in names:
        script, full, small = BENCHES[name]
        path = os.path.join(HERE, script)
        if not os.path.exists(path):
            print(f"skip {name}: {script} not found")
            continue
        result = os.path.join(RESULTS, f"{name}.json")
        cmd = [sys.executable, path, *(small if quick else full), "--json", result]
        print("$", " ".join(os.path.relpath(c, ROOT) if c.startswith(ROOT) else c for c in cmd),
              flush=True)
        t = time.time()
        subprocess.run(cmd, check=True, cwd=ROOT)
        with open(result) as f:
            out[name] = json.load(f) | {"command": " ".join(
                ["python", os.path.relpath(path, ROOT), *(small if quick else full)]),
                "wall_s": round(time.time() - t, 1)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default=",".join(BENCHES))
    p.add_argument("--report-only", action="store_true",
                   help="run no benchmark; rewrite the page and charts from the saved results")
    p.add_argument("--no-report", action="store_true",
                   help="leave docs/benchmarks.md and docs/img/ alone")
    a = p.parse_args()
    all_json = os.path.join(RESULTS, "all.json")
    if not a.report_only:
        names = [n.strip() for n in a.only.split(",") if n.strip()]
        unknown = sorted(set(names) - set(BENCHES))
        if unknown:
            p.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
        results = run(names, a.quick)
        if os.path.exists(all_json) and set(results) != set(BENCHES):
            # A partial run (--only) replaces its own entries and keeps the others' last results.
            with open(all_json) as f:
                results = json.load(f) | results
        with open(all_json, "w") as f:
            json.dump(results, f, indent=1)
        print(json.dumps(results, indent=1))
    if not a.no_report:
        import report

        report.main(["--results", all_json])


if __name__ == "__main__":
    main()
