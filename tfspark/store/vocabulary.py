"""Vocabularies of string and integer features, from the statistics a write stored: the top
values, most frequent first, with the spec's default counted once per null (what the readers
give for a null). Keras lookups are built from them (tfspark.keras.preprocessing), and
read_batches(strings="ids") maps strings to ids with them in the reader: id k + 1 is
vocabulary[k] and 0 is out of vocabulary, as keras.layers.StringLookup numbers them, so ids
from the reader equal what a StringLookup of the same vocabulary gives. No Keras, no TF.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfspark.errors import OptionError
from tfspark.spec.model import Feature, FeatureSpec
from tfspark.store import manifest as mf


def vocabulary(f: Feature, s: Mapping[str, Any], max_tokens: int | None) -> list[Any]:
    """The values a lookup keeps, most frequent first, at most max_tokens: the top present
    values, and the spec's default counted once per null (what the readers give for them)."""
    top = [(v, n) for v, n in s.get("top") or []]
    nulls = s.get("nulls", 0) if f.kind == "fixed" and not f.shape else 0
    if nulls and f.default is not None:
        default = f.default if f.dtype == "string" else int(f.default)
        have = dict(top)
        have[default] = have.get(default, 0) + nulls
        top = sorted(have.items(), key=lambda vn: (-vn[1], str(vn[0])))
    if max_tokens is not None:
        top = top[:max_tokens]
    return [v for v, _ in top]


def string_vocabularies(spec: FeatureSpec, manifest: mf.Manifest | None,
                        given: str | Mapping[str, Any] | None) -> dict[str, list[bytes]]:
    """{string feature: its vocabulary as bytes} for every string feature of spec: from
    `given` ({feature: values}), else from the statistics of all rows (given None) or of the
    split `given` names. OptionError names the features that have none, and why."""
    strings = [f for f in spec.features if f.dtype == "string"]
    if isinstance(given, Mapping):
        unknown = sorted(set(given) - {f.name for f in strings})
        if unknown:
            raise OptionError(f"vocabulary: {unknown} are not string features being read; "
                              f"string features are {[f.name for f in strings]}")
        stats: Mapping[str, Any] = {}
        out = {name: [_bytes(v) for v in values] for name, values in given.items()}
    else:
        stats = (manifest.feature_stats(given) if manifest is not None else None) or {}
        if given is not None and not stats:
            splits = manifest.stats_splits() if manifest is not None else []
            raise OptionError(f"vocabulary={given!r}: the data set has no statistics of that "
                              f"split (splits with statistics: {splits})")
        out = {}
    missing: dict[str, str] = {}
    for f in strings:
        if f.name in out:
            continue
        s = stats.get(f.name)
        if s is None:
            missing[f.name] = "no statistics"
        elif not s.get("top"):
            missing[f.name] = "its statistics keep no top values (an id, text, or binary)"
        else:
            out[f.name] = [_bytes(v) for v in vocabulary(f, s, None)]
    if missing:
        raise OptionError(
            "strings='ids' needs a vocabulary for every string feature read, and "
            + "; ".join(f"{name!r} has none ({why})" for name, why in missing.items())
            + ": leave them out with columns=[...], or give vocabulary={name: [values]}")
    return out


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode()
