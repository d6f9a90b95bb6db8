"""FeatureSpec -> the tf.io parsing spec: {name: FixedLenFeature | VarLenFeature |
RaggedFeature}, what tf.io.parse_example takes (tfspark.tf.parsing_spec(spec)), and
for SequenceExamples the (context, sequence) pair tf.io.parse_sequence_example takes; and the
functions make_dataset parses its batches with (make_parser, make_block_parser)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tfspark.errors import SchemaError
from tfspark.quiet import quiet_import
from tfspark.spec.layout import ROWS_KEY, value_keys
from tfspark.spec.model import Feature, FeatureSpec

quiet_import("tensorflow")  # without its C++ side's start-up notices
import tensorflow as tf  # noqa: E402

DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


def parsing_spec(spec: FeatureSpec) -> dict[str, Any]:
    """{name: tf.io.FixedLenFeature | VarLenFeature | RaggedFeature} for tf.io.parse_example."""
    if spec.is_sequence:
        raise SchemaError("the spec is for tf.train.SequenceExample records, which "
                          "tf.io.parse_example cannot parse: use tfspark.tf."
                          "sequence_parsing_spec(spec) with tf.io.parse_sequence_example")
    return _features(spec.features)


def sequence_parsing_spec(spec: FeatureSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """(context_features, sequence_features) for tf.io.parse_sequence_example: each feature
    list is a RaggedFeature, parsed to a RaggedTensor [batch, steps, values]."""
    if not spec.is_sequence:
        raise SchemaError("the spec is for tf.train.Example records: use "
                          "tfspark.tf.parsing_spec(spec) with tf.io.parse_example")
    context = _features([f for f in spec.features if f.kind != "sequence"])
    sequence = {f.name: tf.io.RaggedFeature(DTYPES[f.dtype], row_splits_dtype=tf.int64)
                for f in spec.features if f.kind == "sequence"}
    return context, sequence


def _features(features: list[Feature] | tuple[Feature, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in features:
        dt = DTYPES[f.dtype]
        if f.kind == "fixed":
            if f.default is None:
                out[f.name] = tf.io.FixedLenFeature(f.shape, dt)
            else:
                fill = _default(f)
                default = [fill] * f.shape[0] if f.shape else fill
                out[f.name] = tf.io.FixedLenFeature(f.shape, dt, default_value=default)
        elif f.kind == "varlen":
            out[f.name] = tf.io.VarLenFeature(dt)
        else:
            values_key, lengths_key = f.keys
            out[f.name] = tf.io.RaggedFeature(
                dt, value_key=values_key,
                partitions=[tf.io.RaggedFeature.RowLengths(lengths_key)],
                row_splits_dtype=tf.int64)
    return out


def _default(f: Feature) -> Any:
    if f.dtype == "float32":
        # Not a Python float: TF caches eager constants of Python scalars by value, and
        # -0.0 == 0.0, so a -0.0 default could come back as 0.0 (or 0.0 as -0.0).
        return np.float32(f.default)
    return f.default.encode() if f.dtype == "string" else f.default


def block_parsing_spec(spec: FeatureSpec) -> dict[str, Any]:
    """{name: tf.io.RaggedFeature} that parses block records (rows_per_record > 1): each
    feature (and "__rows", the rows per block) comes out with the blocks as its outer
    dimension; block_rows() merges it away."""
    out: dict[str, Any] = {ROWS_KEY: tf.io.RaggedFeature(tf.int64, value_key=ROWS_KEY,
                                                        row_splits_dtype=tf.int64)}
    for f in spec.features:
        keys = value_keys(f)
        out[f.name] = tf.io.RaggedFeature(
            DTYPES[f.dtype], value_key=keys[0], row_splits_dtype=tf.int64,
            partitions=[tf.io.RaggedFeature.RowLengths(k) for k in keys[1:]])
    return out


def block_rows(parsed: dict[str, Any], spec: FeatureSpec) -> dict[str, Any]:
    """Parsed blocks -> the features of their rows, as make_dataset yields them: fixed
    features dense ([rows] or [rows, n]), varlen [rows, None] and 2-D [rows, None, None]
    ragged. Null rows of fixed features hold the spec's default already."""
    rows = tf.reduce_sum(parsed[ROWS_KEY].values)
    out: dict[str, Any] = {}
    for f in spec.features:
        value = parsed[f.name].values  # the block dimension merged away
        out[f.name] = tf.reshape(value, [rows, *f.shape]) if f.kind == "fixed" else value
    return out


def make_parser(spec: FeatureSpec, labels: Sequence[str] = ()) -> Any:
    """A function: batch of serialized Examples -> features (and labels), as make_dataset yields.
    SequenceExamples are parsed a batch at a time too (tf.io.parse_sequence_example)."""
    labels = tuple(labels)

    split = labeler(labels)
    if spec.is_sequence:
        context, sequence = sequence_parsing_spec(spec)

        def parse_records(serialized: Any) -> dict[str, Any]:
            ctx, steps, _ = tf.io.parse_sequence_example(
                serialized, context_features=context, sequence_features=sequence)
            return {**ctx, **steps}
    else:
        parsing = parsing_spec(spec)

        def parse_records(serialized: Any) -> dict[str, Any]:
            return dict(tf.io.parse_example(serialized, parsing))

    def parse(serialized: Any) -> Any:
        parsed = parse_records(serialized)
        for name, value in parsed.items():
            if isinstance(value, tf.SparseTensor):
                parsed[name] = tf.RaggedTensor.from_sparse(value)
        return split(parsed)

    return parse


def make_block_parser(spec: FeatureSpec) -> Any:
    """A function: batch of serialized block records -> {name: tensor} of all their rows, as
    make_dataset yields features (labels not split off yet)."""
    parsing = block_parsing_spec(spec)

    def parse(serialized: Any) -> Any:
        return block_rows(tf.io.parse_example(serialized, parsing), spec)

    return parse


def labeler(labels: Sequence[str]) -> Any:
    """{name: tensor} -> (features, labels) as make_dataset yields them (features alone when
    there are no labels)."""
    labels = tuple(labels)

    def split(parsed: Any) -> Any:
        if not labels:
            return parsed
        parsed = dict(parsed)
        ys = {name: parsed.pop(name) for name in labels}
        return parsed, (ys[labels[0]] if len(labels) == 1 else ys)

    return split


def required_check(spec: FeatureSpec, required: list[Feature], per_read: int) -> Any:
    """None without required features, else (file name, block index, block, (n, start)) ->
    block that fails naming the file, the record and the first required feature a record
    lacks."""
    if not required:
        return None
    lists = {f.name: tf.io.RaggedFeature(DTYPES[f.dtype], row_splits_dtype=tf.int64)
             for f in required}
    def check(name: Any, i: Any, block: Any, stride: Any) -> Any:
        if spec.is_sequence:
            parsed = tf.io.parse_sequence_example(block, context_features=lists)[0]
        else:
            parsed = tf.io.parse_example(block, lists)
        asserts = []
        for f in required:
            missing = tf.equal(parsed[f.name].row_lengths(), 0)
            rec = stride[1] + stride[0] * (i * per_read + tf.argmax(tf.cast(missing, tf.int64)))
            # (Assert quotes its data and escapes quotes: the feature name goes in bare.)
            problem = tf.strings.join([
                name, ": record ", tf.strings.as_string(rec), " has no required feature "
                f"{f.name} (the spec has it not nullable and without a default); give the spec "
                f"a default for it, or read without it"])
            asserts.append(tf.debugging.Assert(tf.logical_not(tf.reduce_any(missing)),
                                               [problem]))
        with tf.control_dependencies(asserts):
            return tf.identity(block)

    return check
