"""Run by a Python with TFDV 1.16 (its own venv: TFDV pins TF 2.16 and pyarrow 10, so it cannot
share tfspark's): reads the stats.pb and schema.pbtxt tfspark wrote for a data set, computes
TFDV's own statistics of the data set's TFRecord files, and prints as JSON what test_tfdv.py
compares. No tfspark here.

    python tfdv_check.py DATASET OUT CHANGED   (OUT holds stats.pb and schema.pbtxt of DATASET;
                                                CHANGED is a later export with the same splits)
"""

from __future__ import annotations

import json
import sys

import tensorflow_data_validation as tfdv


def common(f):
    which = f.WhichOneof("stats")
    s = getattr(f, which)
    c = s.common_stats
    out = {"stats": which, "non_missing": c.num_non_missing, "missing": c.num_missing,
           "min_values": c.min_num_values, "max_values": c.max_num_values,
           "tot_values": c.tot_num_values}
    if which == "num_stats":
        out.update(mean=s.mean, std_dev=s.std_dev, min=s.min, max=s.max)
    if which == "string_stats":
        out.update(unique=s.unique, top=[[v.value, v.frequency] for v in s.top_values[:5]])
    return out


def per_feature(dataset):
    return {"/".join(f.path.step): common(f) for f in dataset.features}


def main() -> None:
    data, out, changed = sys.argv[1:4]
    ours = tfdv.load_stats_binary(f"{out}/stats.pb")
    schema = tfdv.load_schema_text(f"{out}/schema.pbtxt")
    result = {"datasets": [d.name for d in ours.datasets],
              "html": len(tfdv.utils.display_util.get_statistics_html(ours)),
              "ours_valid": {k: v.description for k, v in
                             tfdv.validate_statistics(ours, schema).anomaly_info.items()},
              "splits": {}}
    for d in ours.datasets[1:]:
        theirs = tfdv.generate_statistics_from_tfrecord(
            data_location=f"{data}/{d.name}/*.tfrecord")
        inferred = tfdv.infer_schema(theirs)
        new = tfdv.generate_statistics_from_tfrecord(
            data_location=f"{changed}/{d.name}/*.tfrecord")
        result["splits"][d.name] = {
            "ours": per_feature(d),
            "theirs": per_feature(theirs.datasets[0]),
            "anomalies": {k: v.description for k, v in
                          tfdv.validate_statistics(theirs, schema).anomaly_info.items()},
            "changed": {k: v.short_description for k, v in
                        tfdv.validate_statistics(new, schema).anomaly_info.items()},
            "inferred": {f.name: [f.type, f.HasField("shape"), f.presence.min_fraction,
                                  f.domain, list(f.shape.dim and [x.size for x in f.shape.dim])]
                         for f in inferred.feature},
            "schema": {f.name: [f.type, f.HasField("shape"), f.presence.min_fraction, f.domain,
                                list(f.shape.dim and [x.size for x in f.shape.dim])]
                       for f in schema.feature},
        }
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
