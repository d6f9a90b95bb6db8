"""Feature statistics: what write_tfrecords' statistics cost in the export, against
reading the data set and running Keras's adapt() for the same layers, and how long
keras_preprocessing takes to build them from the manifest.

    python bench/bench_stats.py PATH     # a data set written by `tfspark export` (the sample)
"""

from __future__ import annotations

import argparse
import json
import os
import time


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import keras
    import numpy as np

    import tfspark

    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path")
    args = p.parse_args(argv)
    with open(os.path.join(args.path, "_tfspark.json")) as f:
        stats = json.load(f)["stats"]
    spec = tfspark.FeatureSpec.from_dict(json.load(open(os.path.join(args.path,
                                                                     "_tfspark.json")))["spec"])
    numbers = [f.name for f in spec.features if f.kind == "fixed" and not f.shape
               and f.dtype != "string"]
    strings = [f.name for f in spec.features if f.kind == "fixed" and not f.shape
               and f.dtype == "string"]
    t = time.perf_counter()
    cols: dict[str, list] = {n: [] for n in numbers + strings}
    for batch in tfspark.make_dataset(args.path, 4096, shuffle_buffer=0, label_cols=[]):
        for n in cols:
            cols[n].append(batch[n].numpy())
    for n in numbers:
        keras.layers.Normalization(axis=None).adapt(np.concatenate(cols[n]).astype("float32"))
    for n in strings:
        keras.layers.StringLookup().adapt(np.concatenate(cols[n]))
    adapt_s = time.perf_counter() - t
    t = time.perf_counter()
    tfspark.keras_preprocessing(args.path)
    build_s = time.perf_counter() - t
    print(f"statistics in the export: {stats.get('stats_seconds')} s; read + adapt() of "
          f"{len(numbers)} Normalization and {len(strings)} StringLookup layers: {adapt_s:.2f} s;"
          f" keras_preprocessing: {build_s:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
