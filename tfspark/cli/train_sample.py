"""`tfspark train` without statistics (use_stats = false, or a data set written without them):
the features chosen and the preprocessing adapted on a sample of batches (TensorFlow only:
StringLookup, Normalization.adapt)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from tfspark.cli.train_features import head
from tfspark.errors import SchemaError
from tfspark.spec import Feature, FeatureSpec


def sample(ds: Any, n_batches: int) -> tuple[dict[str, Any], Any]:
    """A few batches as numpy: {feature: array}, labels."""
    import numpy as np

    xs: dict[str, list] = {}
    ys = []
    for x, y in ds.take(max(1, n_batches)):
        for k, v in x.items():
            xs.setdefault(k, []).append(v.numpy())
        ys.append(y.numpy())
    if not ys:
        raise SchemaError("the training data is empty")
    return {k: np.concatenate(v) for k, v in xs.items()}, np.concatenate(ys)


def choose_from_sample(features: list[Feature], sample: dict[str, Any], max_vocab: int
                       ) -> tuple[list[Feature], list[tuple[Feature, list[str]]], dict[str, str]]:
    """(numeric, categorical with their vocabularies, ignored with why) from the sample: the
    fixed numbers, and the strings with few enough distinct values to be categories."""
    numeric, categorical, ignored = [], [], {}
    for f in features:
        if f.kind != "fixed":
            ignored[f.name] = f"{f.kind} feature (not used by this job)"
        elif f.dtype != "string":
            numeric.append(f)
        elif f.shape:
            ignored[f.name] = "string array (not used by this job)"
        else:
            counts = Counter(sample[f.name].tolist())
            rows = len(sample[f.name])
            try:
                vocab = [v.decode("utf-8") for v, _ in counts.most_common()]
            except UnicodeDecodeError:  # StringLookup takes text only
                ignored[f.name] = "binary values, not text (not used by this job)"
                continue
            if len(counts) > max_vocab or len(counts) > max(20, rows // 2):
                ignored[f.name] = (f"{len(counts):,} distinct values in {rows:,} sampled rows: "
                                   f"free text or an id, not a category")
            else:
                categorical.append((f, vocab))
    return numeric, categorical, ignored


def build_model(spec: FeatureSpec, numeric: list[Feature],
                categorical: list[tuple[Feature, list[str]]], task: dict[str, Any],
                sample: dict[str, Any], cfg: Any) -> Any:
    """The compiled model: Normalization and StringLookup vocabularies adapted on the sample."""
    import keras
    import numpy as np

    from tfspark.keras.inputs import keras_inputs

    inputs = keras_inputs(spec, names=[f.name for f in numeric] + [f.name for f, _ in categorical])
    parts = []
    if numeric:
        cols = [keras.ops.reshape(keras.ops.cast(inputs[f.name], "float32"),
                                  (-1, int(np.prod(f.shape or (1,))))) for f in numeric]
        x = cols[0] if len(cols) == 1 else keras.layers.Concatenate()(cols)
        norm = keras.layers.Normalization(name="normalize")
        norm.adapt(np.concatenate([sample[f.name].reshape(len(sample[f.name]), -1)
                                   .astype("float32") for f in numeric], axis=1))
        parts.append(norm(x))
    for f, vocab in categorical:
        lookup = keras.layers.StringLookup(vocabulary=vocab, name=f"lookup_{len(parts)}")
        emb = keras.layers.Embedding(len(vocab) + 1, cfg.embedding_dim,
                                     name=f"embed_{len(parts)}")
        parts.append(emb(lookup(inputs[f.name])))
    return head(inputs, parts, task, cfg)
