"""The spec a read parses with: one given to the reader (a FeatureSpec, its JSON or dict, a
spec file, a manifest or a data set's path) and the check that the records hold its keys (a
spec of other files would read rows of pure defaults). No TensorFlow, no pyspark.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from tfspark.errors import SchemaError, TfsparkError
from tfspark.spec.model import FeatureSpec
from tfspark.store import manifest as mf
from tfspark.store.fs import Location, locate

if TYPE_CHECKING:
    from tfspark.store.read_plan import ReadPlan


def load_spec(spec: Any, filesystem: Any = None) -> tuple[FeatureSpec, mf.Manifest | None]:
    """(FeatureSpec, the manifest it came from or None) from the forms `spec=` accepts."""
    if isinstance(spec, FeatureSpec):
        return spec, None
    if isinstance(spec, mf.Manifest):
        if spec.spec is None:
            raise SchemaError("the manifest given as spec has no spec (record_type "
                              f"{spec.record_type!r}): its records are not Examples")
        return spec.spec, spec
    if isinstance(spec, (str, os.PathLike)) and not str(spec).lstrip().startswith("{"):
        return _spec_from_path(locate(os.fspath(spec), filesystem))
    if isinstance(spec, (str, bytes)):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as e:
            raise SchemaError(f"spec is not valid JSON: {e}") from None
    if not isinstance(spec, dict):
        raise SchemaError(f"spec must be a FeatureSpec, JSON text, a dict or a path, got "
                          f"{type(spec).__name__}")
    if spec.get("format") == mf.FORMAT:
        return load_spec(mf.Manifest.from_dict(spec, "the manifest given as spec"))
    return FeatureSpec.from_dict(spec), None


def _spec_from_path(loc: Location) -> tuple[FeatureSpec, mf.Manifest | None]:
    path = loc.uri
    if loc.kind() != "file":
        manifest = mf.find_manifest(loc)  # (one read: None when there is none)
        if manifest is not None:
            return load_spec(manifest)
        raise SchemaError(f"spec path {path!r} is neither a JSON file nor a tfspark directory")
    with loc.open_stream() as f:
        text = f.read()
    try:
        return load_spec(json.loads(text))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SchemaError(f"spec file {path!r} is not valid JSON: {e}") from None


SPEC_CHECK_RECORDS = 100  # records looked at for the keys of a given spec


def check_spec_keys(plan: ReadPlan) -> None:
    """SchemaError when none of the spec's keys is in the first records of the data: such a
    spec would read rows of pure defaults (a spec of other files, or of other names)."""
    from tfspark.spec.layout import value_keys
    from tfspark.wire.example_py import record_keys

    features = plan.example_spec.features
    if plan.rows_per_record > 1:  # (every block has "__rows": not a key of the spec's)
        want = {k for f in features for k in value_keys(f)}
    else:
        want = {k for f in features for k in f.keys}
    seen: set[str] = set()
    looked = 0
    try:
        for data in _first_records(plan, SPEC_CHECK_RECORDS):
            seen |= record_keys(data)
            looked += 1
            if seen & want:
                return
    except (TfsparkError, OSError):  # damage or a wrong compression: the read will say so
        return
    if looked and not seen & want:
        shown = sorted(seen)[:20]
        raise SchemaError(f"the spec given names none of the keys in {plan.files[0]!r} (first "
                          f"{looked} records): the spec has {sorted(want)[:20]}, the records "
                          f"hold {shown}; give the spec these files were written with")


def _first_records(plan: ReadPlan, n: int) -> Any:
    """The data of the first n records of the plan's files, in order."""
    from tfspark.wire.stream import read_records

    for loc, comp in zip(plan.locations, plan.file_compressions()):
        with loc.open_stream() as f:
            for data in read_records(f, comp, path=loc.uri):
                yield data
                n -= 1
                if n <= 0:
                    return
