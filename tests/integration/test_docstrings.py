"""The API reference runs: every example in the docstrings of the public names (tfspark, and
its keras and tf namespaces) passes as doctest runs it, in an empty directory; the ones that
need Spark get the test session as `spark`. Every verb of the top level has an example, and
every public callable documents its arguments in one style (Google's Args / Returns /
Raises sections, as the docs site renders them)."""

from __future__ import annotations

import doctest
import inspect

import pytest

import tfspark

SPARK = {"write_tfrecords", "make_converter", "register", "train_on_spark"}
TF = {"make_dataset"}
VERBS = [n for n in tfspark.__all__ if callable(getattr(tfspark, n))
         and not inspect.isclass(getattr(tfspark, n))]


def _examples(name: str) -> doctest.DocTest:
    doc = inspect.getdoc(getattr(tfspark, name)) or ""
    return doctest.DocTestParser().get_doctest(doc, {"tfspark": tfspark}, name, name, 0)


def test_every_verb_has_an_example_and_documents_its_arguments():
    assert len(VERBS) >= 14
    for name in VERBS:
        fn = getattr(tfspark, name)
        doc = inspect.getdoc(fn) or ""
        assert _examples(name).examples, f"{name}: no example"
        assert "\nArgs:\n" in doc and "\nReturns:\n" in doc, f"{name}: no Args / Returns"
        documented = {line.split(":")[0].strip().lstrip("*")
                      for line in doc.split("\nArgs:\n")[1].split("\n\n")[0].splitlines()
                      if line.startswith("    ") and not line.startswith("        ")}
        params = set(inspect.signature(fn).parameters) - {"self"}
        assert params <= documented, f"{name}: arguments not in Args: {params - documented}"


def _marks(name: str) -> list[pytest.MarkDecorator]:
    return ([pytest.mark.spark] if name in SPARK else []) + \
        ([pytest.mark.training] if name == "train_on_spark" else []) + \
        ([pytest.mark.tf] if name in TF else [])


@pytest.mark.parametrize("name", [pytest.param(n, marks=_marks(n)) for n in VERBS])
def test_the_examples_of_the_docstring_run(name, request, tmp_path, monkeypatch):
    if name in TF:
        request.getfixturevalue("tf")
    test = _examples(name)
    if name in SPARK:
        test.globs["spark"] = request.getfixturevalue("spark")
    monkeypatch.chdir(tmp_path)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
