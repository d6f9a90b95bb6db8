"""What `tfspark train` does with each feature, decided from the statistics write_tfrecords
stored (spark.stats), and the Keras layers that do it: no adapt() pass, no sample.

    numbers (int, float, bool, date...)      Normalization(mean, variance) of the split
    strings, and the ints in `categorical`   lookup of the top values (at most max_vocab, the
                                             rest out of vocabulary): one-hot when there are
                                             at most one_hot_max of them, else an Embedding
    strings with nearly a value per row      left out: an id, not a category
    integers with a value per row            left out: a row id, not a number
    fixed [n] number arrays                  Normalization of their elements
    string / integer arrays (variable,       lookup of the top elements -> PooledEmbedding
      2-D ragged, feature lists, fixed [n])  (the mean of the ids' embeddings)
    variable number arrays                   PooledMean (mean of the normalized values, and
                                             how many there were)
    binary strings, text, ml Vectors         left out, with the reason printed
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from tfspark.errors import OptionError, SchemaError
from tfspark.keras.preprocessing import normalization
from tfspark.spec import Feature, FeatureSpec
from tfspark.store.stats import rules
from tfspark.store.vocabulary import vocabulary

ID_SHARE = 0.5  # a string with more distinct values than this share of its rows is an id


@dataclass
class Plan:
    """The features used, how, and those left out (with why)."""

    numeric: list[tuple[Feature, dict[str, Any]]] = field(default_factory=list)
    categorical: list[tuple[Feature, list[Any], str]] = field(default_factory=list)  # onehot|embed
    arrays: list[tuple[Feature, dict[str, Any]]] = field(default_factory=list)  # statistics
    ignored: dict[str, str] = field(default_factory=dict)

    @property
    def used(self) -> list[Feature]:
        """The features the model takes, in the order of its parts."""
        return ([f for f, _ in self.numeric] + [f for f, _, _ in self.categorical]
                + [f for f, _ in self.arrays])


def plan(features: list[Feature], stats: dict[str, Any], cfg: Any) -> Plan:
    """Each feature's treatment (module docstring) from its statistics."""
    out = Plan()
    wanted = set(cfg.categorical)
    for f in features:
        s = stats.get(f.name)
        if s is None:
            out.ignored[f.name] = "no statistics for it (written before they existed?)"
        elif f.encoding == "vector":
            out.ignored[f.name] = "ml Vector (not used by this job)"
        elif f.kind == "fixed" and not f.shape:
            _scalar(f, s, cfg, f.name in wanted, out)
        else:
            _array(f, s, out)
    return out


def _no_top(f: Feature, s: dict[str, Any]) -> str:
    """Why a string or integer feature's statistics keep no top values."""
    distinct, rows = s.get("distinct_approx", 0), s.get("rows", 0)
    if f.dtype == "string" and s.get("max_chars", 0) > 256:
        return "values of more than 256 characters: text, not a category"
    if rules.id_like(distinct, rows - s.get("nulls", 0)):
        return (f"about {distinct:,} distinct values in {rows:,} rows: an id or free text, not a "
                f"category")
    return "more distinct values than the statistics' top_k"


def _scalar(f: Feature, s: dict[str, Any], cfg: Any, categorical: bool, out: Plan) -> None:
    if f.dtype == "string" or categorical:
        if f.source_type == "binary":
            out.ignored[f.name] = "binary values, not text (not used by this job)"
            return
        top = s.get("top")
        if not top:
            out.ignored[f.name] = _no_top(f, s)
            return
        rows, distinct = s.get("rows", 0), s.get("distinct_approx", len(top))
        if f.dtype == "string" and distinct > cfg.max_vocab and distinct > ID_SHARE * rows:
            out.ignored[f.name] = (f"about {distinct:,} distinct values in {rows:,} rows: an id "
                                   f"or free text, not a category")
            return
        vocab = vocabulary(f, s, cfg.max_vocab)
        out.categorical.append((f, vocab, "onehot" if len(vocab) <= cfg.one_hot_max
                                else "embed"))
    elif _row_id(f, s):
        out.ignored[f.name] = (f"looks like a row id: about {s.get('distinct_approx', 0):,} "
                               f"distinct values in {s.get('rows', 0):,} rows (name it in "
                               f"categorical, or exclude it, to say otherwise)")
    elif normalization(s) is not None:
        out.numeric.append((f, s))
    else:
        out.ignored[f.name] = "no finite values"


ROW_ID_SHARE = 0.95  # an integer with a distinct value in this share of its rows is a row id


def _row_id(f: Feature, s: dict[str, Any]) -> bool:
    """An integer scalar with a distinct value in (nearly: the count is approximate) every
    present row: a key, not a quantity to normalize."""
    present = s.get("rows", 0) - s.get("nulls", 0)
    return f.encoding == "int" and present >= 100 and \
        s.get("distinct_approx", 0) >= ROW_ID_SHARE * present


def _array(f: Feature, s: dict[str, Any], out: Plan) -> None:
    if s.get("top") or (s.get("elements") and normalization(s["elements"]) is not None):
        out.arrays.append((f, s))
    else:
        out.ignored[f.name] = f"{f.kind} {f.dtype} array without finite element statistics"


def model_parts(spec: FeatureSpec, p: Plan, cfg: Any, strings: str = "object"
                ) -> tuple[dict[str, Any], list[Any]]:
    """(keras inputs, one [batch, k] tensor per treatment) for the plan's features; strings:
    "ids" when the reader gives string features as ids (read_batches(strings="ids"), on any
    Keras backend: VocabularyIds for the string lookups, the plan without the others)."""
    import keras

    from tfspark.keras.inputs import keras_inputs
    from tfspark.keras.layers import PooledEmbedding, PooledMean, VocabularyIds
    from tfspark.keras.preprocessing import array_layer, lookup

    inputs = keras_inputs(spec, names=[f.name for f in p.used], strings=strings)
    parts = []
    if p.numeric:
        cols = [keras.ops.reshape(keras.ops.cast(inputs[f.name], "float32"), (-1, 1))
                for f, _ in p.numeric]
        x = cols[0] if len(cols) == 1 else keras.layers.Concatenate()(cols)
        moments = [normalization(s) or (0.0, 1.0) for _, s in p.numeric]  # plan: all finite
        parts.append(keras.layers.Normalization(
            mean=[m for m, _ in moments], variance=[v for _, v in moments],
            name="normalize")(x))
    for k, (f, vocab, how) in enumerate(p.categorical):
        if strings == "ids":
            ids = VocabularyIds(vocab, name=f"lookup_{k}")(inputs[f.name])
            if how == "onehot":
                ids = keras.layers.CategoryEncoding(len(vocab) + 1, "one_hot")(ids)
        else:
            ids = lookup(f, vocab, "one_hot" if how == "onehot" else "int", f"lookup_{k}")(
                inputs[f.name])
        parts.append(ids if how == "onehot" else keras.layers.Embedding(
            len(vocab) + 1, cfg.embedding_dim, name=f"embed_{k}")(ids))
    for k, (f, s) in enumerate(p.arrays):
        # keras_preprocessing's layer for the array, ids of a lookup then embedded and pooled
        layer = array_layer(f, s, cfg.max_vocab, "ids", f"array_{k}")
        x = inputs[f.name]
        if isinstance(layer, keras.layers.Normalization):
            parts.append(layer(keras.ops.cast(x, "float32")))
        elif isinstance(layer, PooledMean):
            parts.append(layer(x))
        else:
            parts.append(PooledEmbedding(layer.vocabulary_size(), cfg.embedding_dim,
                                         name=f"pooled_{k}")(layer(x)))
    return inputs, parts


def head(inputs: dict[str, Any], parts: list[Any], task: dict[str, Any], cfg: Any) -> Any:
    """The compiled model: the parts concatenated, the hidden layers, the task's output."""
    import keras

    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    for units in cfg.hidden_units:
        x = keras.layers.Dense(units, activation="relu")(x)
    opt = keras.optimizers.Adam(cfg.learning_rate)
    if task["kind"] == "binary":
        out = keras.layers.Dense(1, activation="sigmoid")(x)
        loss, metrics = "binary_crossentropy", ["accuracy", keras.metrics.AUC(name="auc")]
    elif task["kind"] == "multiclass":
        out = keras.layers.Dense(task["classes"], activation="softmax")(x)
        loss, metrics = "sparse_categorical_crossentropy", ["accuracy"]
    else:
        out = keras.layers.Dense(1)(x)
        loss, metrics = "mean_squared_error", ["mean_absolute_error"]
    with warnings.catch_warnings():  # a feature name Keras refuses (keras_inputs): keyed
        warnings.filterwarnings("ignore", "When providing `inputs` as a dict")  # right anyway
        model = keras.Model(inputs=inputs, outputs=out)
    model.compile(optimizer=opt, loss=loss, metrics=metrics)
    return model


def pick_label(spec: FeatureSpec, name: str | None) -> Feature:
    """The label to train on: `name`, else the spec's one label; a numeric scalar."""
    if name is None:
        labels = spec.label_names
        if len(labels) != 1:
            what = (f"has label columns {labels}" if labels
                    else "names no label column (written without label_cols)")
            raise OptionError(f"the data set's spec {what}: give --label NAME (label = "
                              f"\"NAME\" in the config) for the feature to train on")
        name = labels[0]
    if name not in spec.names:
        raise SchemaError(f"label {name!r} is not a feature; features are {spec.names}")
    f = spec[name]
    if f.kind != "fixed" or f.shape or f.dtype == "string":
        raise SchemaError(f"label {name!r} must be a numeric scalar, got {f.kind} {f.dtype} "
                          f"{list(f.shape)}; encode string labels as ints first")
    return f

def task_from_stats(label: Feature, s: dict[str, Any]) -> dict[str, Any]:
    """The task from the label's statistics: its distinct values when it has top values."""
    if label.dtype == "float32" or not s.get("top"):
        return {"kind": "regression"}
    return task_of(label, [int(v) for v, _ in s["top"]])

def task_of(label: Feature, y: list[Any]) -> dict[str, Any]:
    """The task from the label: regression for floats, else binary / multiclass by its values."""
    if label.dtype == "float32":
        return {"kind": "regression"}
    values = set(y)
    if values <= {0, 1}:
        return {"kind": "binary"}
    if min(values) >= 0:
        return {"kind": "multiclass", "classes": int(max(values)) + 1}
    return {"kind": "regression"}
