"""write_tfrecords' checks of a DataFrame's columns, before anything is written: names Spark
and the parquet backup cannot tell apart, partition, split and label columns, and the spec the
schema alone gives."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from tfspark.errors import OptionError
from tfspark.spark.write import PARTITION_TYPES, refuse_label_partitions
from tfspark.spec import FeatureSpec, infer_spec
from tfspark.store.options import WriteOptions


def check_columns(df: DataFrame, opts: WriteOptions) -> tuple[list[str], FeatureSpec]:
    """(data columns, spec from the schema alone): names Spark cannot tell apart, partition,
    split and label columns, and unsupported types, refused before anything is written."""
    check_names(df.columns, df.sparkSession.conf.get("spark.sql.caseSensitive", "false"))
    refuse_label_partitions(opts.partition_by, opts.label_cols, "partition_by", "label_cols")
    for col in opts.partition_by:
        if col not in df.columns:
            raise OptionError(f"partition_by column {col!r} is not in the DataFrame; columns "
                              f"are {df.columns}")
        tname = df.schema[col].dataType.simpleString()
        if tname not in PARTITION_TYPES:
            raise OptionError(f"cannot partition by column {col!r} of type {tname}; use a "
                              f"string, integer, boolean or date column")
    if opts.split_key is not None and opts.split_key not in df.columns:
        raise OptionError(f"split_key column {opts.split_key!r} is not in the DataFrame; "
                          f"columns are {df.columns}")
    data_cols = [c for c in df.columns if c not in opts.partition_by]
    spec = infer_spec(fields(df, data_cols),
                      label_cols=opts.label_cols, shapes=opts.shapes, defaults=opts.defaults,
                      decimal_as=opts.decimal_as,
                      record_type=opts.record_type)
    return data_cols, spec


def fields(df: DataFrame, names: list[str]) -> Any:
    """The schema of these columns of df (no Spark call per column: wide tables)."""
    from pyspark.sql.types import StructType

    schema = df.schema
    return StructType([schema[name] for name in names])


def check_names(columns: list[str], case_sensitive: str | None) -> None:
    """Columns the parquet backup and Spark's column lookups cannot tell apart."""
    seen: dict[str, str] = {}
    fold = str(case_sensitive).lower() != "true"
    for name in columns:
        key = name.lower() if fold else name
        if key in seen:
            same = seen[key] == name
            raise OptionError(
                f"the DataFrame has two columns named {name!r}; rename one (alias or "
                f"withColumnRenamed)" if same else
                f"columns {seen[key]!r} and {name!r} differ only in case, which Spark "
                f"(spark.sql.caseSensitive=false) and the parquet backup cannot tell apart; "
                f"rename one (alias or withColumnRenamed)")
        seen[key] = name
