"""examples/walkthrough.py run as a user runs it (a subprocess, small row count), and its
generated notebook kept in sync with it."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
ROWS = 3000


@pytest.mark.spark
@pytest.mark.tf
@pytest.mark.slow
def test_walkthrough_runs(tmp_path, tf):
    out = tmp_path / "walkthrough"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TFSPARK_WALKTHROUGH_OUT=str(out),
               TFSPARK_WALKTHROUGH_ROWS=str(ROWS), SPARK_MASTER="local[2]")
    done = subprocess.run([sys.executable, str(EXAMPLES / "walkthrough.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    text = done.stdout
    assert f"tfspark wrote {ROWS:,} rows" in text
    assert f"rows: source {ROWS:,} = backup {ROWS:,} = tfrecords {ROWS:,}" in text
    assert "Spark SQL on walkthrough.customers_backup:" in text
    engine = "DuckDB" if importlib.util.find_spec("duckdb") else "pandas"
    assert f"{engine} and Spark SQL agree: {ROWS:,} rows" in text
    # The two result tables list the same countries with the same counts.
    tables = re.findall(r"^\s*(US|IN|BR|DE|FR|JP|NG|MX)\s+(\d+)", text, re.M)
    assert tables and len(tables) % 2 == 0
    half = len(tables) // 2
    assert tables[:half] == tables[half:]
    metrics = re.search(r"^test metrics: loss=([\d.]+), accuracy=([\d.]+), auc=([\d.]+)$",
                        text, re.M)
    assert metrics, text[-3000:]
    loss, accuracy, auc = map(float, metrics.groups())
    assert 0 < loss < 5 and 0 <= accuracy <= 1 and 0 <= auc <= 1
    manifest = json.loads((out / "customers_tfrecords" / "_tfspark.json").read_text())
    assert manifest["records"] == ROWS and sorted(manifest["splits"]) == ["test", "train"]


def test_notebook_in_sync():
    """examples/walkthrough.ipynb is exactly what make_notebook.py makes of walkthrough.py."""
    spec = importlib.util.spec_from_file_location("make_notebook", EXAMPLES / "make_notebook.py")
    assert spec and spec.loader
    make_notebook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_notebook)
    expected = make_notebook.render(EXAMPLES / "walkthrough.py")
    nb = json.loads((EXAMPLES / "walkthrough.ipynb").read_text())
    assert make_notebook.dumps(make_notebook.without_outputs(nb)) == expected, \
        "run: python examples/make_notebook.py --execute"
    # stored from a real run, so it reads on GitHub: every code cell ran, in order, and the
    # training cell printed its test metrics
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code_cells] == list(range(1, len(code_cells) + 1))
    printed = "".join("".join(o["text"]) for c in code_cells for o in c["outputs"])
    assert "tfspark wrote" in printed and re.search(r"test metrics: loss=[\d.]+", printed)
    assert nb["nbformat"] == 4 and [c["cell_type"] for c in nb["cells"]][:2] == [
        "markdown", "code"]
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "tfspark.write_tfrecords(" in code and "tfspark.make_dataset(" in code
