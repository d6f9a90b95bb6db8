"""Where a data set may be written: never inside another tfspark data set (a split directory
or any directory below one), nor around one (an overwrite of the parent would sweep it).

Both would leave the other data set's manifest naming files that are gone or adding files it
does not name; refused before anything is written, naming the other data set.
"""

from __future__ import annotations

import posixpath

from tfspark.errors import OptionError, TfsparkError
from tfspark.store import manifest as mf
from tfspark.store.fs import Location
from tfspark.store.uris import failed_request


def check_placement(loc: Location, mode: str) -> None:
    """OptionError when `loc` is inside another data set, or (unless it is empty) holds one
    that is not its own split; also when the store cannot be asked (a write's first request:
    it says what to check)."""
    try:
        _check_placement(loc, mode)
    except OSError as e:
        raise OptionError(f"cannot look at {loc.uri!r} before writing there: "
                          f"{failed_request(e, 'check the path and the credentials')}") from None


def _check_placement(loc: Location, mode: str) -> None:
    outer = enclosing_data_set(loc)
    if outer is not None:
        where, split = outer
        what = f" (its split {split!r})" if split else ""
        raise OptionError(f"{loc.uri!r} is inside the tfspark data set at {where!r}{what}; writing "
                          f"there would break that data set (its manifest names its files): "
                          f"write to a path outside it")
    if mode in ("errorifexists", "ignore"):
        return  # an empty directory holds nothing; a non-empty one is refused or skipped
    inner = nested_data_set(loc)
    if inner is not None:
        raise OptionError(f"{loc.uri!r} holds the tfspark data set {inner!r}; writing there "
                          f"in mode {mode!r} would sweep its files: write to another path (or "
                          f"remove that data set first)")


def enclosing_data_set(loc: Location) -> tuple[str, str | None] | None:
    """(where, split name or None) of the outermost directory above `loc` holding a manifest
    (a split directory's manifest is its data set's, above it), or None."""
    chain = [loc]  # loc and every directory above it, up to the bucket or root
    while (up := chain[-1].parent()) is not None:
        chain.append(up)
    held = loc.at_once(lambda d: d.present(mf.NAME), chain[1:])  # (on a store at once)
    for i in reversed(range(1, len(chain))):  # the outermost first
        if held[i - 1]:
            parent, name = chain[i], posixpath.basename(chain[i - 1].base)
            return parent.uri, (name if name in _splits(parent) else None)
    return None


def nested_data_set(loc: Location) -> str | None:
    """The first data set below `loc` that is not one of its own splits (a split manifest
    names its split), or None."""
    if not loc.is_dir():
        return None
    own = _splits(loc)
    for rel in loc.list_files():
        if not rel.endswith("/" + mf.NAME):
            continue
        top = rel.split("/")[0]
        if rel == f"{top}/{mf.NAME}" and (top in own or _is_split_manifest(loc, rel, top)):
            continue
        return loc.child_uri(posixpath.dirname(rel))
    return None


def _splits(loc: Location) -> tuple[str, ...]:
    try:
        return mf.read_manifest(loc).splits
    except TfsparkError:  # none, or damaged: no splits known
        return ()


def _is_split_manifest(loc: Location, rel: str, split: str) -> bool:
    try:
        return mf.read_manifest(loc.child(split)).split == split
    except TfsparkError:
        return False
