"""Every example spec under schemas/ is valid: the JSON Schema accepts it and it loads."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import tfspark

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
EXAMPLES = sorted(p for p in SCHEMAS.glob("*.json") if not p.name.endswith(".schema.json"))


def test_there_are_examples():
    assert EXAMPLES, "schemas/ should hold at least one example spec"


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_spec_is_valid(path):
    schema = json.loads((SCHEMAS / "feature_spec.schema.json").read_text())
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, schema)
    spec = tfspark.FeatureSpec.from_json(path.read_text())
    assert json.loads(spec.to_json()) == doc
