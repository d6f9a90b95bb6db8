"""Every public name of tfspark has a docstring: the names of `tfspark.__all__`, and each public
function, class and method (no leading underscore) defined in a tfspark module.

No tfspark module imports TensorFlow at import time; a module that ever does is skipped here
when TensorFlow is missing rather than failing the unit tests.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil
from types import ModuleType
from typing import Any

import pytest

import tfspark

MODULES = sorted(["tfspark"] + [m.name for m in pkgutil.walk_packages(tfspark.__path__, "tfspark.")
                                 if not m.name.endswith("__main__")])


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as e:  # pragma: no cover - only without an optional extra
        if (e.name or "").split(".")[0] in ("tensorflow", "keras", "pyspark"):
            pytest.skip(f"{name} needs {e.name} to import")
        raise


def _doc_of_function(obj: Any) -> str | None:
    func = getattr(obj, "py_func", obj)  # a numba dispatcher wraps the Python function
    return inspect.getdoc(func) if func.__doc__ else None


def _doc_of_class(cls: type) -> str | None:
    doc = cls.__dict__.get("__doc__")
    if not doc or not doc.strip():
        return None
    # dataclasses (and namedtuples) write "Name(field: type, ...)" when the class has none.
    auto = dataclasses.is_dataclass(cls) or issubclass(cls, tuple)
    if auto and doc.startswith(f"{cls.__name__}(") and "\n" not in doc.strip():
        return None
    return doc


def _is_function(obj: Any) -> bool:
    return inspect.isfunction(obj) or hasattr(obj, "py_func")


def _missing_in_class(cls: type, where: str) -> list[str]:
    missing = []
    for name, attr in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(attr, (staticmethod, classmethod)):
            attr = attr.__func__
        elif isinstance(attr, property):
            attr = attr.fget
        if attr is None or not _is_function(attr):
            continue
        if not _doc_of_function(attr):
            missing.append(f"{where}.{name}")
    return missing


def missing_docstrings(module: ModuleType) -> list[str]:
    """Public functions, classes and methods defined in `module` that have no docstring."""
    missing = []
    for name, obj in vars(module).items():
        if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
            continue  # private, or imported from elsewhere (checked in its own module)
        where = f"{module.__name__}.{name}"
        if inspect.isclass(obj):
            if not _doc_of_class(obj):
                missing.append(where)
            missing += _missing_in_class(obj, where)
        elif _is_function(obj) and not _doc_of_function(obj):
            missing.append(where)
    return missing


@pytest.mark.parametrize("name", MODULES)
def test_public_names_have_docstrings(name):
    module = _import(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"
    missing = missing_docstrings(module)
    assert not missing, f"public names without a docstring: {', '.join(missing)}"


def test_the_package_api_is_documented():
    missing = []
    for name in tfspark.__all__:
        try:
            obj = getattr(tfspark, name)
        except tfspark.MissingExtraError:  # its extra is not installed here (the no-TF lane)
            continue
        doc = _doc_of_class(obj) if inspect.isclass(obj) else _doc_of_function(obj)
        if not doc:
            missing.append(name)
    assert not missing, f"tfspark.__all__ names without a docstring: {missing}"


def test_the_check_finds_a_missing_docstring():
    module = ModuleType("tfspark_fake")
    source = '''
import dataclasses

def documented():
    """Yes."""

def bare():
    pass

@dataclasses.dataclass
class Record:
    x: int

    def method(self):
        pass

    @property
    def prop(self):
        return 1

class Fine:
    """Yes."""

    def ok(self):
        """Yes."""

    def _private(self):
        pass
'''
    exec(compile(source, "tfspark_fake.py", "exec", dont_inherit=True), module.__dict__)
    assert sorted(missing_docstrings(module)) == [
        "tfspark_fake.Record", "tfspark_fake.Record.method", "tfspark_fake.Record.prop",
        "tfspark_fake.bare"]


def test_the_top_level_is_the_verbs_types_and_errors():
    errors = {n for n in tfspark.__all__ if n.endswith("Error")}
    rest = set(tfspark.__all__) - errors
    assert rest == {
        "register", "write_tfrecords", "write_dataset", "infer_spec", "WriteResult",
        "read_manifest", "Manifest", "verify", "VerifyReport", "FeatureSpec", "Feature",
        "make_dataset", "read_batches", "Ragged", "torch_dataset", "grain_dataset",
        "make_converter", "Converter", "keras_inputs", "keras_preprocessing", "train_on_spark",
        "tfdv_statistics", "tfmd_schema", "validate", "dali_index"}
    assert errors == set(tfspark.errors.__all__) - {"StateMismatch"}


@pytest.mark.parametrize("old,new", [
    ("encode_batch", "tfspark.arrow.encode_batch"), ("Report", "tfspark.VerifyReport"),
    ("manifest", "tfspark.read_manifest"), ("ReadOptions", "keyword arguments of the readers"),
    ("parsing_spec", "tfspark.tf.parsing_spec"), ("resumable_fit", "tfspark.keras.resumable_fit"),
    ("spark_filesystem", "tfspark.spark.spark_filesystem")])
def test_names_of_earlier_releases_warn_naming_the_new_one(old, new):
    if old in ("parsing_spec", "resumable_fit"):
        pytest.importorskip("tensorflow" if old == "parsing_spec" else "keras")
    if old == "spark_filesystem":
        pytest.importorskip("pyspark")
    with pytest.warns(DeprecationWarning, match=f"tfspark.{old} is deprecated .*{new}"):
        assert getattr(tfspark, old) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        tfspark.nope  # noqa: B018
