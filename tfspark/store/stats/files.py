"""Feature statistics beside the manifest, not in it: every reader parses the manifest, and the
statistics (top values, deciles, per split) were most of it (1.4 MB of each of the four
manifests of the 100,000-row sample, the same statistics in each). Only what needs statistics
(keras_preprocessing, tfspark stats and train, strings="ids") reads them.

    _tfspark_stats/<write id>/features.json       the statistics of all rows
    _tfspark_stats/<write id>/split-<name>.json   of one split, once

The manifest's "stats" keeps its small keys (row counts, nulls, top_k...) and says where the
rest went: "side": {"dir": "_tfspark_stats/<write id>", "features": true, "splits": [...]}. The
files are written before the manifest that names them (the commit), never changed, and a later
commit deletes those no manifest names. A manifest with the statistics inside (tfspark before
this) still reads."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tfspark.errors import ManifestError
from tfspark.store.fs import Location

DIR = "_tfspark_stats"
HEAVY = ("features", "splits")


def move_aside(loc: Location, stats: Mapping[str, Any], write_id: str) -> dict[str, Any]:
    """Write the heavy statistics of `stats` as files under loc (a data set's root); returns
    the small stats that name them. Stats without heavy keys come back as they are."""
    if not any(k in stats for k in HEAVY):
        return dict(stats)
    where = f"{DIR}/{write_id}"
    light = {k: v for k, v in stats.items() if k not in HEAVY}
    features = stats.get("features")
    splits = stats.get("splits") or {}
    files = ([("features.json", features)] if features is not None else []) + \
        [(f"split-{name}.json", per) for name, per in splits.items()]
    loc.at_once(lambda f: loc.write_bytes_atomic(f"{where}/{f[0]}", _compact(f[1])), files)
    light["side"] = {"dir": where, "features": features is not None, "splits": sorted(splits)}
    return light


def load(root: Location, side: Mapping[str, Any], split: str | None) -> dict[str, Any] | None:
    """The statistics of one split (None: of all rows) from the files `side` names; None when
    the write kept none of those."""
    if split is None and not side.get("features"):
        return None
    if split is not None and split not in (side.get("splits") or ()):
        return None
    rel = f"{side['dir']}/" + ("features.json" if split is None else f"split-{split}.json")
    try:
        found = json.loads(root.read_bytes(rel))
    except FileNotFoundError:
        raise ManifestError(f"{root.join(rel)}: the statistics the manifest names are missing "
                            f"(the directory was copied without {DIR}/?); copy them too, or "
                            f"rewrite the data set") from None
    except json.JSONDecodeError as e:
        raise ManifestError(f"{root.join(rel)} is not valid JSON ({e}); rewrite the data "
                            f"set") from None
    if not isinstance(found, dict):
        raise ManifestError(f"{root.join(rel)} holds no statistics object; rewrite the data set")
    return found


def sweep(loc: Location, keep: str | None) -> None:
    """Delete the statistics of writes no manifest names any more (`keep`: the one it names)."""
    for rel in loc.child(DIR).subdirectories():  # (none when there is no DIR: one request)
        if f"{DIR}/{rel}" != keep:
            loc.delete_dir(f"{DIR}/{rel}")


def _compact(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
