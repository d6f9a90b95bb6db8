"""The distributions a user installs: sdist and wheel built with `python -m build`, the wheel
installed alone (no [tf] extra) into a fresh venv, and the export job run from that venv.

The build runs on a copy of the checkout's files (the ones git would commit: tracked plus
untracked-but-not-ignored), so setuptools' build/ and *.egg-info never land in the repo. The
fresh venv has no system site packages and nothing of the repo on its path: every tfspark
import there must come from the installed wheel. pip's cache is left on, so a re-run does not
download PySpark again. Needs PyPI (the isolated build env and the venv's dependencies) and
Java 17+ (local Spark).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(p.name for p in (ROOT / "tfspark").glob("*.py"))
# Shipped in the sdist next to the package (MANIFEST.in): spark-submit entry points, configs,
# the spec's JSON Schema, and what the sdist's own tests need.
SDIST_EXTRAS = ["README.md", "pyproject.toml", "PKG-INFO", "MANIFEST.in",
                "jobs/export_tfrecords.py", "jobs/train_keras.py", "conf/export.toml",
                "conf/spark-defaults.conf", "schemas/feature_spec.schema.json",
                "scripts/local_cluster.py", "tests/conftest.py"]
ROWS = 500


def _litter() -> set[str]:
    """What a build in the checkout would leave there: build/, dist/, *.egg-info."""
    return {str(p) for p in [ROOT / "build", ROOT / "dist", *ROOT.glob("*.egg-info")]
            if p.exists()}


def _copy_checkout(dest: Path) -> None:
    """The files git would commit, copied to dest (a plain copy minus junk without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "out", "warehouse", "bench",
            "__pycache__", ".*_cache", ".hypothesis", "spark-warehouse", "metastore_db"))
        return
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():  # a tracked file deleted in the work tree is skipped
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{"wheel": path, "sdist": path}, built by `python -m build` (sdist, then the wheel from
    the unpacked sdist, so the sdist is proven complete enough to build from)."""
    pytest.importorskip("build")
    base = tmp_path_factory.mktemp("dists")
    src, out = base / "src", base / "dist"
    _copy_checkout(src)
    before = _litter()
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert _litter() <= before, "the build left build/, dist/ or *.egg-info in the checkout"
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def test_sdist_contents(dists):
    sdist = dists["sdist"]
    prefix = sdist.name.removesuffix(".tar.gz")  # tfspark-<version>
    with tarfile.open(sdist) as tar:
        names = {n.removeprefix(prefix + "/") for n in tar.getnames()}
    missing = [f"tfspark/{s}" for s in SOURCES if f"tfspark/{s}" not in names]
    missing += [f for f in SDIST_EXTRAS if f not in names]
    assert not missing, f"not in {sdist.name}: {missing}"
    junk = [n for n in names if "__pycache__" in n or n.endswith(".pyc") or n.startswith(
        (".venv/", "out/", "warehouse/", "build/", "dist/"))]
    assert not junk, junk


def test_wheel_contents_and_metadata(dists):
    from packaging.requirements import Requirement

    wheel = dists["wheel"]
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    assert not [s for s in SOURCES if f"tfspark/{s}" not in names]
    # Only the package and its metadata: no tests, jobs, conf or schemas at the top level.
    assert {n.split("/")[0] for n in names} == {"tfspark", info}
    assert re.search(r"^\[console_scripts\]\s*^tfspark = tfspark\.cli:main$", entry_points,
                     re.M), entry_points

    # The [tf] extra, resolved by the same marker logic pip uses (nothing installed here).
    assert re.search(r"^Provides-Extra: tf$", metadata, re.M), metadata[:2000]
    reqs = [Requirement(line.removeprefix("Requires-Dist: "))
            for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    base = {r.name for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})}
    assert {"pyspark", "pyarrow", "numpy", "numba", "crc32c", "pandas"} <= base
    assert not {n for n in base if n.startswith("tensorflow")}, "TF must stay in the extra"
    with_tf = [r for r in reqs if r.marker is not None and r.marker.evaluate({"extra": "tf"})
               and not r.marker.evaluate({"extra": ""})]
    assert [r.name for r in with_tf if r.name.startswith("tensorflow")] in (
        ["tensorflow-cpu"], ["tensorflow"])  # exactly one TF build for this platform
    cpu = next(r for r in reqs if r.name == "tensorflow-cpu")
    assert 'extra == "tf"' in str(cpu.marker) and cpu.specifier, str(cpu)


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 900):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_fresh_venv_export_without_tensorflow(dists, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    py, cli = venv / "bin" / "python", venv / "bin" / "tfspark"
    # Nothing of the checkout or of the test venv leaks in; Spark's workers run the fresh venv.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME",
                        "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE")}
    env.update(PYSPARK_PYTHON=str(py), PYSPARK_DRIVER_PYTHON=str(py),
               SPARK_LOCAL_IP="127.0.0.1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    run = tmp_path / "run"
    run.mkdir()

    done = _run([str(py), "-m", "pip", "install", str(dists["wheel"])], run, env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    # The write side needs no TensorFlow, and tfspark comes from the venv's site-packages.
    done = _run([str(py), "-c", "import tensorflow"], run, env, timeout=120)
    assert done.returncode != 0 and "No module named 'tensorflow'" in done.stderr, done.stderr
    done = _run([str(py), "-c", "import sysconfig, tfspark; "
                 "print(sysconfig.get_paths()['purelib']); print(tfspark.__file__)"],
                run, env, timeout=120)
    assert done.returncode == 0, done.stderr
    purelib, where = (Path(line).resolve() for line in done.stdout.split())
    assert where == purelib / "tfspark" / "__init__.py" and venv.resolve() in purelib.parents
    assert ROOT not in where.parents

    out = run / "out"
    done = _run([str(cli), "export", "--sample-rows", str(ROWS), "--master", "local[2]",
                 "--output", str(out), "--warehouse", str(run / "warehouse"),
                 "--label-cols", "label", "--split", "train=0.8,test=0.2", "--split-key", "id",
                 "--compression", "gzip"], run, env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wrote = re.search(r"tfspark wrote ([\d,]+) rows to (\S+)", done.stdout)
    assert wrote and int(wrote.group(1).replace(",", "")) == ROWS, done.stdout
    assert f"rows: source {ROWS:,} = backup {ROWS:,} = tfrecords {ROWS:,}" in done.stdout
    assert (out / "_SUCCESS").is_file()
    manifest = json.loads((out / "_tfspark.json").read_text())
    assert manifest["records"] == ROWS == sum(f["records"] for f in manifest["files"])
    assert sorted(manifest["splits"]) == ["test", "train"]

    # The read-side tools that need neither Spark nor TensorFlow work from the wheel too.
    done = _run([str(cli), "verify", str(out)], run, env, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    done = _run([str(cli), "inspect", str(out), "--records", "1"], run, env, timeout=300)
    assert done.returncode == 0 and f"{ROWS:,} Example records" in done.stdout, done.stderr
