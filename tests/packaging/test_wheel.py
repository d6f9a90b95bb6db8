"""The distributions a user installs: sdist and wheel built with `python -m build`, and the
wheel installed three ways into fresh venvs, each shown doing what it is for:

  base     (a Databricks/Dataproc runtime brings its own pyspark): inspect and verify a data set;
           the Spark and TensorFlow parts say in one line which extra they need.
  [spark]  the export job end to end (no TensorFlow installed).
  [tf]     make_dataset on the exported data set (no pyspark installed).

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
SOURCES = sorted(str(p.relative_to(ROOT / "tfspark")) for p in (ROOT / "tfspark").rglob("*.py"))
# Shipped in the sdist next to the package (MANIFEST.in): spark-submit entry points, configs,
# the spec's JSON Schema, and what the sdist's own tests need.
SDIST_EXTRAS = ["README.md", "pyproject.toml", "pyspark_tfspark.py", "PKG-INFO", "MANIFEST.in",
                "jobs/export_tfrecords.py", "jobs/train_keras.py", "tfspark/cli/export.toml",
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
    assert "tfspark/cli/log4j2.properties" in names  # the CLI's quiet Spark logging
    # Only the package, the module Spark 4 finds the data source by, and the metadata: no
    # tests, jobs, conf or schemas at the top level.
    assert {n.split("/")[0] for n in names} == {"tfspark", "pyspark_tfspark.py", info}
    assert re.search(r"^\[console_scripts\]\s*^tfspark = tfspark\.cli\.main:main$", entry_points,
                     re.M), entry_points

    # The extras, resolved by the same marker logic pip uses (nothing installed here).
    for extra in ("spark", "tf", "plot", "all", "dev"):
        assert re.search(rf"^Provides-Extra: {extra}$", metadata, re.M), metadata[:2000]
    reqs = [Requirement(line.removeprefix("Requires-Dist: "))
            for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]

    def names(extra: str) -> set[str]:
        return {r.name for r in reqs if r.marker is None or r.marker.evaluate({"extra": extra})}

    base = names("")
    assert {"pyarrow", "numpy", "numba", "crc32c"} <= base
    assert not {n for n in base if n.startswith(("tensorflow", "pyspark", "pandas"))}, base
    assert names("spark") - base == {"pyspark", "pandas"}
    # [tf] is the TensorFlow that uses GPUs where there are some, on every platform.
    assert names("tf") - base == {"tensorflow"}
    assert names("plot") - base == {"matplotlib"}
    assert names("torch") - base == {"torch"}
    assert names("jax") - base == {"keras", "jax"}
    assert {"pyspark-tfrecord"} <= names("all") - base  # pyspark-tfrecord[spark,tf,plot]
    dev = names("dev") - base
    assert "pyspark" not in dev and {n for n in dev if n.startswith("tensorflow")}


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 900):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


class Venv:
    """A fresh venv (no system site packages, nothing of the checkout on its path) with the
    wheel installed as `wheel[extras]`; run() runs its python, cli() its tfspark command."""

    def __init__(self, base: Path, wheel: Path, extras: str = ""):
        self.dir, self.run_dir = base / "venv", base / "run"
        subprocess.run([sys.executable, "-m", "venv", str(self.dir)], check=True, timeout=300)
        assert "include-system-site-packages = false" in (self.dir / "pyvenv.cfg").read_text()
        self.py = self.dir / "bin" / "python"
        # Nothing of the checkout or of the test venv leaks in; Spark's workers run this venv.
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME",
                            "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE")}
        env.update(PYSPARK_PYTHON=str(self.py), PYSPARK_DRIVER_PYTHON=str(self.py),
                   SPARK_LOCAL_IP="127.0.0.1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   TF_CPP_MIN_LOG_LEVEL="2",
                   PATH=f"{self.dir / 'bin'}{os.pathsep}{env.get('PATH', '')}")
        self.env = env
        self.run_dir.mkdir()
        # --no-compile: Python compiles what it imports; compiling all of PySpark and
        # TensorFlow up front cost 11-14 s of CPU per venv (pip install, measured).
        done = _run([str(self.py), "-m", "pip", "install", "--no-compile", f"{wheel}{extras}"],
                    self.run_dir,
                    env, timeout=1200)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    def run(self, code: str, timeout: int = 300) -> subprocess.CompletedProcess:
        return _run([str(self.py), "-c", code], self.run_dir, self.env, timeout)

    def cli(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        return _run([str(self.dir / "bin" / "tfspark"), *args], self.run_dir, self.env, timeout)

    def lacks(self, module: str) -> None:
        done = self.run(f"import {module}", timeout=120)
        assert done.returncode != 0 and f"No module named '{module}'" in done.stderr, done.stderr

    def tfspark_from_venv(self) -> None:
        done = self.run("import sysconfig, tfspark; "
                        "print(sysconfig.get_paths()['purelib']); print(tfspark.__file__)")
        assert done.returncode == 0, done.stderr
        purelib, where = (Path(line).resolve() for line in done.stdout.split())
        assert where == purelib / "tfspark" / "__init__.py" and self.dir.resolve() in \
            purelib.parents
        assert ROOT not in where.parents


@pytest.fixture(scope="module")
def spark_venv(dists, tmp_path_factory) -> Venv:
    """A fresh venv with wheel[spark] (no TensorFlow)."""
    return Venv(tmp_path_factory.mktemp("spark_venv"), dists["wheel"], "[spark]")


@pytest.fixture(scope="module")
def exported(spark_venv) -> Path:
    """The export job run from a fresh venv with wheel[spark] (no TensorFlow); its output."""
    venv = spark_venv
    venv.lacks("tensorflow")  # the write side needs no TensorFlow
    venv.tfspark_from_venv()
    out = venv.run_dir / "out"
    done = venv.cli("export", "--sample-rows", str(ROWS), "--master", "local[2]",
                    "--output", str(out), "--warehouse", str(venv.run_dir / "warehouse"),
                    "--label-cols", "label", "--split", "train=0.8,test=0.2", "--split-key",
                    "id", "--compression", "gzip")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    wrote = re.search(r"tfspark wrote ([\d,]+) rows to (\S+)", done.stdout)
    assert wrote and int(wrote.group(1).replace(",", "")) == ROWS, done.stdout
    assert f"rows: source {ROWS:,} = backup {ROWS:,} = tfrecords {ROWS:,}" in done.stdout
    return out


def test_fresh_venv_export_without_tensorflow(exported, spark_venv):
    out = exported
    assert (out / "_SUCCESS").is_file()
    manifest = json.loads((out / "_tfspark.json").read_text())
    assert manifest["records"] == ROWS == sum(f["records"] for f in manifest["files"])
    assert sorted(manifest["splits"]) == ["test", "train"]
    # Spark finds the installed source by itself (pyspark_tfspark): no import of tfspark, no
    # register(), and from a thread other than the session's.
    code = ("import sys, threading; from pyspark.sql import SparkSession\n"
            "spark = SparkSession.builder.master('local[1]').getOrCreate()\n"
            "def read(split):\n"
            f"    print(split, spark.read.format('tfspark').option('split', split).load("
            f"{str(out)!r}).count())\n"
            "read('train'); t = threading.Thread(target=read, args=('test',)); t.start(); "
            "t.join()\n"
            "print('tfspark imported:', 'tfspark' in sys.modules)\n"
            "import tfspark; print(tfspark.register(spark))")  # and register() as before
    done = spark_venv.run(code, timeout=300)
    counts = dict(re.findall(r"^(train|test) (\d+)$", done.stdout, re.MULTILINE))
    assert done.returncode == 0 and sum(map(int, counts.values())) == ROWS and \
        len(counts) == 2, done.stdout[-2000:] + done.stderr[-4000:]
    assert "tfspark imported: False" in done.stdout and "['tfspark', 'tfrecord']" in done.stdout
    # register() keeps the source Spark found (replacing it, Spark warned in every session)
    assert "replaced a statically registered" not in done.stderr, done.stderr[-2000:]


def test_base_install_reads_without_spark_or_tensorflow(dists, exported, tmp_path):
    venv = Venv(tmp_path, dists["wheel"])
    venv.lacks("pyspark")
    venv.lacks("tensorflow")
    venv.tfspark_from_venv()
    # The read-side tools that need neither Spark nor TensorFlow work from the base install.
    done = venv.cli("verify", str(exported), timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    done = venv.cli("inspect", str(exported), "--records", "1", timeout=300)
    assert done.returncode == 0 and f"{ROWS:,} Example records" in done.stdout, done.stderr
    # The NumPy reader too: every row of both splits, from the base install alone.
    code = ("import tfspark\n"
            f"n = sum(len(y) for s in ('train', 'test') for _, y in tfspark.read_batches("
            f"{str(exported)!r}, 64, split=s))\n"
            "print('ROWS', n)")
    done = venv.run(code, timeout=300)
    assert done.returncode == 0 and f"ROWS {ROWS}" in done.stdout, done.stderr[-4000:]
    # The parts that need an extra say which, in one line.
    done = venv.cli("export", "--sample-rows", "10", "--output", str(tmp_path / "x"))
    assert done.returncode == 2 and "pip install 'pyspark-tfrecord[spark]'" in done.stderr, \
        done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) <= 2
    for name, extra in (("register", "spark"), ("write_tfrecords", "spark"),
                        ("make_dataset", "tf"), ("keras_inputs", "keras")):
        done = venv.run(f"import tfspark; tfspark.{name}")
        last = done.stderr.strip().splitlines()[-1]
        assert done.returncode != 0 and "MissingExtraError" in last and \
            f"pip install 'pyspark-tfrecord[{extra}]'" in last, done.stderr
    done = venv.run(f"import tfspark; tfspark.torch_dataset({str(exported)!r}, 4)")
    last = done.stderr.strip().splitlines()[-1]
    assert "MissingExtraError" in last and "pip install 'pyspark-tfrecord[torch]'" in last, \
        done.stderr
    done = venv.run(f"import tfspark; tfspark.tfdv_statistics({str(exported)!r})")
    last = done.stderr.strip().splitlines()[-1]
    assert "MissingExtraError" in last and "pip install 'pyspark-tfrecord[tfx]'" in last, \
        done.stderr
    done = venv.cli("stats", str(exported), "--format", "tfdv", "--out", str(tmp_path / "t"))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: tfspark's TFX support (TFDV statistics, TFMD schemas, validate) needs "
        "tensorflow_metadata, which is not installed: pip install 'pyspark-tfrecord[tfx]'"], \
        done.stderr
    assert not (tmp_path / "t").exists()


def test_tf_install_reads_with_make_dataset_without_spark(dists, exported, tmp_path):
    venv = Venv(tmp_path, dists["wheel"], "[tf]")
    venv.lacks("pyspark")
    venv.tfspark_from_venv()
    code = ("import tfspark; n = 0\n"
            f"for x, y in tfspark.make_dataset({str(exported)!r}, 64, split='train'):\n"
            "    n += int(y.shape[0])\n"
            f"t = sum(int(y.shape[0]) for _, y in tfspark.make_dataset({str(exported)!r}, 64, "
            "split='test'))\n"
            "print('ROWS', n + t)")
    done = venv.run(code, timeout=600)
    assert done.returncode == 0 and f"ROWS {ROWS}" in done.stdout, done.stderr[-4000:]
