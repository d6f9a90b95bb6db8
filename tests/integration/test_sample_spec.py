"""schemas/sample_spec.json is what the embedded sample's schema maps to today: inferred afresh
from the sample table (label `label`, the 8-float embedding fixed, as the demo writes it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfspark.spark.sample import sample_dataframe
from tfspark.spec import infer_spec

pytestmark = pytest.mark.spark

SAMPLE_SPEC = Path(__file__).resolve().parents[2] / "schemas" / "sample_spec.json"


def test_sample_spec_matches_a_spec_inferred_from_the_sample(spark):
    schema = sample_dataframe(spark, rows=10).schema
    fresh = infer_spec(schema, label_cols=["label"], shapes={"embedding": [8]})
    assert fresh.to_dict() == json.loads(SAMPLE_SPEC.read_text()), (
        "schemas/sample_spec.json is stale: copy the spec of `make demo`'s manifest "
        "(out/sample_tfrecords/_tfspark.json) into it")
