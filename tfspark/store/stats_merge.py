"""The write tasks' statistics (stats_partial.py) merged on the driver at commit into the
layout of stats.compute: stats["features"] (all rows) and stats["splits"], with what is
estimated and how well recorded. Time and memory stay linear in the tasks: each feature's
count tables are summed CHUNK at a time and cut to the cap as a task cuts them."""

from __future__ import annotations

from typing import Any

from tfspark.spec import Feature, FeatureSpec
from tfspark.spec.kinds import json_float
from tfspark.store import stats_rules as rules
from tfspark.store.stats_partial import (  # datasketches through it: it says what is missing
    CAP_FACTOR,
    CHUNK,
    HLL_LG_K,
    cut,
    feed,
    hll_sketch,
    hll_union,
    kll_doubles_sketch,
    kll_k,
    sum_counts,
)


def merge(parts: list[dict[str, Any]], spec: FeatureSpec, top_k: int,
          split_column: str | None) -> dict[str, Any]:
    """The tasks' results as stats["features"] / stats["splits"] (the layout of
    stats.compute), with what is estimated and how well recorded."""
    accs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for part in parts:
        for label, feats in part.items():
            for group in ([label, rules.ALL] if label != rules.ALL else [rules.ALL]):
                into = accs.setdefault(group, {})
                for name, acc in feats.items():
                    into.setdefault(name, []).append(acc)
    cap = CAP_FACTOR * top_k
    merged = {label: {name: _merge(each, cap) for name, each in feats.items()}
              for label, feats in accs.items()}
    kinds = {f.name: f for f in spec.features}
    # ids (no top values) as the whole column says, in every split alike, as stats.compute
    ids = {name for name, acc in merged.get(rules.ALL, {}).items()
           if not rules.array(kinds[name]) and
           rules.id_like(_distinct(acc) or 0, acc["rows"] - acc["nulls"])}
    per = {label: {name: _final(kinds[name], acc, top_k, name in ids)
                   for name, acc in feats.items()}
           for label, feats in merged.items()}
    out: dict[str, Any] = {"features": per.get(rules.ALL, {}), "top_k": top_k,
                           "computed_by": "write tasks (sketches)",
                           "quantile_rank_error": round(
                               kll_doubles_sketch.get_normalized_rank_error(kll_k(spec), False),
                               4),
                           "distinct_relative_sd": round(1.04 / 2 ** (HLL_LG_K / 2), 4)}
    if split_column:
        out["splits"] = {k: v for k, v in sorted(per.items()) if k != rules.ALL}
    return out


# counters that merge by adding
_SUMMED = ("rows", "nulls", "count", "nan", "pos_inf", "neg_inf", "lengths", "lists", "error")


def _merge(accs: list[dict[str, Any]], cap: int) -> dict[str, Any]:
    """One feature's accumulators from the tasks (sketches as bytes) as one (sketches live,
    new objects: two groups never share one)."""
    out: dict[str, Any] = {}
    for b in accs:
        _fold(out, b)
    _merge_counts(out, accs, cap)
    return out


def _fold(out: dict[str, Any], b: dict[str, Any]) -> None:
    """b's counters, bounds, moments and deciles' sketch into out."""
    for key in _SUMMED:
        if key in b:
            out[key] = out.get(key, 0) + b[key]
    for key, pick in (("lmin", min), ("lmax", max), ("max_chars", max)):
        if key in b:
            out[key] = pick(out[key], b[key]) if key in out else b[key]
    if b.get("n"):
        out.update(_combine(out, b))
    if "elements" in b:
        e, be = out.get("elements") or {}, b["elements"]
        if not e:
            out["elements"] = dict(be)
        else:
            both = dict(e, **{k: e.get(k, 0) + be[k] for k in _SUMMED if k in be})
            if be.get("n"):
                both.update(_combine(e, be))
            out["elements"] = both
    if "kll" in b:
        sketch = kll_doubles_sketch.deserialize(b["kll"])
        live: Any = out.get("kll")
        if live is not None:
            live.merge(sketch)
        else:
            out["kll"] = sketch


def _merge_counts(out: dict[str, Any], accs: list[dict[str, Any]], cap: int) -> None:
    """The tasks' value counts summed CHUNK tables at a time and cut to the cap as a task cuts
    them; their distinct values as one HLL sketch once any task or the sum went past the cap
    (every value counted exactly anywhere goes into it too)."""
    union: Any = None
    for b in accs:
        if "hll" in b:
            union = union or hll_union(HLL_LG_K)
            union.update(hll_sketch.deserialize(b["hll"]))
    tables = [b["counts"] for b in accs if b.get("counts") is not None]
    if any(b.get("too_many") for b in accs):  # counting stopped in a task: nowhere counted
        out["too_many"] = True
        union = union or hll_union(HLL_LG_K)
        for t in tables:
            feed(union, t.column("value"))
    else:
        out["pruned"] = any(b.get("pruned") for b in accs)
        for i in range(0, len(tables), CHUNK):
            chunk = tables[i:i + CHUNK]
            if union is not None:
                for t in chunk:
                    feed(union, t.column("value"))
            out["counts"] = sum_counts(([out["counts"]] if "counts" in out else []) + chunk)
            if out["counts"].num_rows > cap:
                if union is None:  # the first cut: every value summed so far goes in
                    union = hll_union(HLL_LG_K)
                    feed(union, out["counts"].column("value"))
                cut(out, cap)
    if union is not None:
        out["hll"] = union.get_result()


def _combine(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Moments of two accumulators together (Chan et al.)."""
    if not a.get("n"):
        return {k: b[k] for k in ("n", "mean", "m2", "min", "max")}
    n = a["n"] + b["n"]
    delta = b["mean"] - a["mean"]
    return {"n": n, "mean": a["mean"] + delta * b["n"] / n,
            "m2": a["m2"] + b["m2"] + delta * delta * a["n"] * b["n"] / n,
            "min": min(a["min"], b["min"]), "max": max(a["max"], b["max"])}


def _num(x: float) -> Any:
    return json_float(float(x))


def _distinct(acc: dict[str, Any]) -> int | None:
    """Distinct present values: counted while under the cap, else estimated."""
    table = acc.get("counts")
    known = table.num_rows if table is not None else None
    if acc.get("hll") is not None:  # past the cap somewhere
        return max(known or 0, round(acc["hll"].get_estimate()))
    return known


def _final(f: Feature, acc: dict[str, Any], top_k: int, ids: bool) -> dict[str, Any]:
    s: dict[str, Any] = {"rows": acc["rows"], "nulls": acc["nulls"]}
    if rules.numeric(f):
        s["count"] = acc.get("count", 0)
        s.update({k: acc.get(k, 0) for k in ("nan", "pos_inf", "neg_inf")
                  if rules.nonfinite(f)})
        finite = acc.get("n", 0)
        mean = variance = None
        if finite:
            mean, variance = acc["mean"], acc["m2"] / finite
            s.update(min=_num(acc["min"]), max=_num(acc["max"]), mean=_num(mean),
                     variance=_num(variance))
            s["quantiles"] = {"probabilities": rules.QUANTILES, "values": [
                _num(v) for v in acc["kll"].get_quantiles(rules.QUANTILES)]}
        model = rules.filled(f, finite, mean, variance, acc["nulls"])
        if model is not None:
            s["filled"] = {k: _num(v) for k, v in model.items()}
    if acc.get("lists"):
        s["length"] = {"min": acc["lmin"], "max": acc["lmax"],
                       "mean": acc["lengths"] / acc["lists"]}
    e = acc.get("elements")
    if e and e.get("count"):
        s["elements"] = {"count": e["count"]}
        s["elements"].update({k: e.get(k, 0) for k in ("nan", "pos_inf", "neg_inf")
                              if rules.nonfinite(f)})
        if e.get("n"):
            s["elements"].update(min=_num(e["min"]), max=_num(e["max"]),
                                 mean=_num(e["mean"]), variance=_num(e["m2"] / e["n"]))
    distinct = _distinct(acc)
    if distinct is not None:  # an estimate never above the values there are
        s["distinct_approx"] = distinct if rules.array(f) else \
            min(distinct, acc["rows"] - acc["nulls"])
    if "max_chars" in acc:
        s["max_chars"] = acc["max_chars"]
    table = acc.get("counts")
    if table is not None:
        counts = dict(zip(table.column("value").to_pylist(), table.column("n").to_pylist()))
        text_ok = acc.get("max_chars", 0) <= rules.MAX_TOKEN_CHARS
        ints_ok = f.dtype == "string" or rules.array(f) or (
            not acc.get("pruned") and len(counts) <= top_k)
        if text_ok and ints_ok and not ids:
            top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top_k]
            s["top"] = [[v, c] for v, c in top]
            if acc.get("error"):
                s["top_count_error"] = acc["error"]
    return s
