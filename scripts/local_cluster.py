"""A real Spark standalone cluster on loopback, started from the installed pyspark itself.

One master and N workers (default 2), each a separate JVM started with
`$SPARK_HOME/bin/spark-class` (SPARK_HOME = the pyspark package directory), every address
127.0.0.1. Each process gets its own process group, so stopping it also stops the executors
the worker launched. Readiness is polled from the master's JSON endpoint
(http://127.0.0.1:<webui port>/json/) with a bounded timeout.

Used by the tests/cluster fixture (`LocalCluster`) and by hand:

    python scripts/local_cluster.py start [--workdir DIR] [--workers 2]   # prints the master URL
    python scripts/local_cluster.py status [--workdir DIR]                # the master's JSON
    python scripts/local_cluster.py stop [--workdir DIR]

then e.g. `spark-submit --master spark://127.0.0.1:PORT --conf spark.cores.max=2 ...` or
`SparkSession.builder.master(url)` with `cluster_conf(...)` from this module. The state (pids,
ports) is kept in DIR/cluster.json; logs in DIR/logs. Also here: `connect_server()`, a Spark
Connect server on loopback as a child process, for the Connect tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ClusterError(RuntimeError):
    """The cluster (or Connect server) did not come up; the message has the log's tail."""


def spark_home() -> Path:
    """The installed pyspark package directory: it holds bin/, sbin/ and jars/."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def find_java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def free_port() -> int:
    """A port free on loopback now (released before use: a small race, retried by callers)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def daemon_env(workdir: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment of the JVMs: loopback only, the repo's quiet logging, this interpreter."""
    env = dict(os.environ)
    for var in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS",
                "SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_WORKER_INSTANCES"):
        env.pop(var, None)
    env.update({
        "SPARK_HOME": str(spark_home()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_HOSTNAME": HOST,
        "SPARK_PUBLIC_DNS": HOST,
        "SPARK_CONF_DIR": os.environ.get("SPARK_CONF_DIR", str(ROOT / "conf")),
        "SPARK_LOG_DIR": str(workdir / "logs"),
        "SPARK_LOCAL_DIRS": str(workdir / "local"),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                      if p),
        "SPARK_DAEMON_MEMORY": "512m",
        # No REST submission server: it would listen on the fixed port 6066.
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    })
    env.update(extra or {})
    return env


def _launch(args: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, env=dict(env), cwd=str(log.parent),
                                start_new_session=True)  # its own process group


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# ---- processes: children, command lines, stopping


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def _children() -> dict[int, list[int]]:
    """{ppid: [pids]} for every process visible in /proc."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids.setdefault(ppid, []).append(int(entry))
    return kids


def descendants(pid: int) -> list[int]:
    """Every live descendant of `pid` (children, grandchildren, ...), parents first."""
    kids = _children()
    out: list[int] = []
    todo = list(kids.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def ancestor(pid: int, marker: str) -> int | None:
    """The nearest ancestor of `pid` (itself included) whose command line contains `marker`."""
    p: int | None = pid
    while p and p > 1:
        if marker in _cmdline(p):
            return p
        p = parent_pid(p)
    return None


def open_files(pid: int) -> list[str]:
    """Paths of the regular files `pid` has open (empty if it is gone or not ours)."""
    out = []
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("/"):
                    out.append(target)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_tree(pid: int, timeout: float = 15.0) -> None:
    """Stop `pid`, its process group and every descendant it started (only those).

    SIGTERM first (Spark daemons shut down cleanly), SIGKILL after `timeout` seconds.
    Python daemons under an executor run in their own process group; they are found as
    descendants before anything is signalled.
    """
    family = [pid, *descendants(pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)
        for p in family:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, sig)
        deadline = time.monotonic() + (timeout if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline and any(alive(p) for p in family):
            time.sleep(0.1)
        if not any(alive(p) for p in family):
            return


def _reap(proc: subprocess.Popen | None) -> None:
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)


# ---- the standalone cluster


@dataclass
class Daemon:
    role: str  # "master" | "worker-1" ...
    pid: int
    log: str
    webui_port: int
    proc: subprocess.Popen | None = field(default=None, repr=False, compare=False)


@dataclass
class LocalCluster:
    """Master + `workers` workers on 127.0.0.1, each worker with `cores` cores and `memory`.

    gpus: resource "gpu" addresses each worker offers (a discovery script per worker: worker 1
    has "0".., worker 2 the next ones), so Spark's GPU scheduling (spark.task.resource.gpu.amount,
    TaskContext.resources()) can be exercised without GPUs; apps that ask for none ignore them.
    """

    workdir: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    gpus: int = 0
    master_port: int = 0
    webui_port: int = 0
    daemons: list[Daemon] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def webui_url(self) -> str:
        return f"http://{HOST}:{self.webui_port}"

    def start(self, timeout: float = 180.0) -> LocalCluster:
        """Start master and workers; return when all workers are ALIVE at the master."""
        if find_java() is None:
            raise ClusterError("java was not found (JAVA_HOME or PATH); Spark needs Java 17+")
        self.workdir = Path(self.workdir).resolve()
        for sub in ("logs", "local", "work"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        env = daemon_env(self.workdir)
        spark_class = str(spark_home() / "bin" / "spark-class")
        deadline = time.monotonic() + timeout
        try:
            for attempt in range(3):  # free_port() can race with another process
                self.master_port, self.webui_port = free_port(), free_port()
                log = self.workdir / "logs" / f"master-{attempt}.log"
                proc = _launch([spark_class, MASTER_CLASS, "--host", HOST,
                                "--port", str(self.master_port),
                                "--webui-port", str(self.webui_port)], log, env)
                master = Daemon("master", proc.pid, str(log), self.webui_port, proc)
                self.daemons.append(master)
                if self._wait(lambda s: s.get("status") == "ALIVE", deadline, proc, log,
                              give_up_on_exit=attempt < 2):
                    break
                self.daemons.remove(master)
                stop_tree(proc.pid)
                _reap(proc)
            for i in range(1, self.workers + 1):
                log = self.workdir / "logs" / f"worker-{i}.log"
                wport = free_port()
                work = self.workdir / "work" / f"worker-{i}"
                work.mkdir(parents=True, exist_ok=True)
                proc = _launch([spark_class, WORKER_CLASS, self.master_url, "--host", HOST,
                                "--port", "0", "--webui-port", str(wport),
                                "--cores", str(self.cores), "--memory", self.memory,
                                "--work-dir", str(work)], log, self._worker_env(env, i))
                self.daemons.append(Daemon(f"worker-{i}", proc.pid, str(log), wport, proc))
            n = self.workers
            self._wait(lambda s: s.get("aliveworkers", 0) >= n, deadline, None,
                       self.workdir / "logs" / "worker-1.log")
        except BaseException:
            self.stop()
            raise
        self.save()
        return self

    def _worker_env(self, env: dict[str, str], i: int) -> dict[str, str]:
        """Worker i's environment: with gpus, its own discovery script of fake addresses."""
        if not self.gpus:
            return env
        addresses = [str((i - 1) * self.gpus + k) for k in range(self.gpus)]
        script = self.workdir / f"gpus-worker-{i}.sh"
        script.write_text("#!/bin/sh\necho '" + json.dumps({"name": "gpu",
                                                             "addresses": addresses}) + "'\n")
        script.chmod(0o755)
        return {**env, "SPARK_WORKER_OPTS": f"-Dspark.worker.resource.gpu.amount={self.gpus} "
                f"-Dspark.worker.resource.gpu.discoveryScript={script}"}

    def _wait(self, ready: Any, deadline: float, proc: subprocess.Popen | None, log: Path,
              give_up_on_exit: bool = False) -> bool:
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                if give_up_on_exit:
                    return False
                raise ClusterError(f"{log.name} exited with {proc.returncode}:\n{_tail(log)}")
            dead = [d for d in self.daemons if not alive(d.pid)]
            if dead:
                raise ClusterError(f"{dead[0].role} exited:\n{_tail(Path(dead[0].log))}")
            with contextlib.suppress(OSError, ValueError):
                if ready(self.state(timeout=2)):
                    return True
            time.sleep(0.5)
        raise ClusterError(f"the cluster did not come up in time; {log.name}:\n{_tail(log)}")

    def state(self, timeout: float = 5) -> dict[str, Any]:
        """The master's /json/ view: workers, cores, alive workers, running applications."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=timeout) as r:
            return json.loads(r.read())

    def worker_pids(self) -> list[int]:
        return [d.pid for d in self.daemons if d.role.startswith("worker") and alive(d.pid)]

    def executor_pids(self) -> list[int]:
        """Executor JVMs the workers launched (children of the worker JVMs)."""
        kids = _children()
        return sorted(p for w in self.worker_pids() for p in kids.get(w, [])
                      if EXECUTOR_CLASS in _cmdline(p) and alive(p))

    def python_workers(self) -> list[int]:
        """Python processes under the executors (pyspark.daemon and the workers it forks)."""
        out = []
        for e in self.executor_pids():
            out.extend(p for p in descendants(e) if "python" in _cmdline(p).split(" ")[0]
                       and alive(p))
        return sorted(out)

    def stop(self) -> None:
        for d in reversed(self.daemons):
            stop_tree(d.pid)
            _reap(d.proc)
        self.daemons.clear()
        with contextlib.suppress(OSError):
            (self.workdir / "cluster.json").unlink()

    def save(self) -> None:
        doc = {"master_url": self.master_url, "webui_url": self.webui_url,
               "master_port": self.master_port, "webui_port": self.webui_port,
               "workdir": str(self.workdir),
               "daemons": [{"role": d.role, "pid": d.pid, "log": d.log,
                            "webui_port": d.webui_port} for d in self.daemons]}
        (self.workdir / "cluster.json").write_text(json.dumps(doc, indent=1) + "\n")

    @classmethod
    def load(cls, workdir: Path) -> LocalCluster:
        doc = json.loads((Path(workdir) / "cluster.json").read_text())
        c = cls(Path(doc["workdir"]), master_port=doc["master_port"],
                webui_port=doc["webui_port"])
        for d in doc["daemons"]:  # only pids that still run the class we started
            wanted = MASTER_CLASS if d["role"] == "master" else WORKER_CLASS
            if alive(d["pid"]) and wanted in _cmdline(d["pid"]):
                c.daemons.append(Daemon(d["role"], d["pid"], d["log"], d["webui_port"]))
        c.workers = sum(d.role.startswith("worker") for d in c.daemons)
        return c


def wait_for_executors(spark: Any, n: int, timeout: float = 120.0) -> None:
    """Block until `n` executors (the driver not counted) are registered with the driver."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(tracker.getExecutorInfos()) - 1 >= n:
            return
        time.sleep(0.25)
    raise ClusterError(f"only {len(tracker.getExecutorInfos()) - 1} of {n} executors "
                       f"registered within {timeout:.0f}s")


def cluster_conf(cluster: LocalCluster, tmp: Path, *, cores_max: int | None = None,
                 executor_cores: int = 1, executor_memory: str = "1g") -> dict[str, str]:
    """SparkSession settings for a driver (this process) on the cluster: one executor per
    worker, Python workers running this interpreter and importing tfspark from this checkout.
    """
    tmp = Path(tmp)
    (tmp / "local").mkdir(parents=True, exist_ok=True)
    (tmp / "derby").mkdir(parents=True, exist_ok=True)
    pythonpath = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {
        "spark.master": cluster.master_url,
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.executor.cores": str(executor_cores),
        "spark.cores.max": str(cores_max or cluster.workers * cluster.cores),
        "spark.executor.memory": executor_memory,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": pythonpath,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executorEnv.SPARK_LOCAL_IP": HOST,
        "spark.local.dir": str(tmp / "local"),
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={tmp / 'derby'}",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.shuffle.partitions": "4",
        "spark.task.maxFailures": "4",
        "spark.speculation": "false",
        "spark.dynamicAllocation.enabled": "false",
        # the executors get the JVM options this machine's drivers get (the tests' lean JVM)
        **({"spark.executor.extraJavaOptions": java} if (java := os.environ.get(
            "SPARK_SUBMIT_OPTS")) else {}),
    }


def id_source(spark: Any, start: int, end: int, partitions: int = 4) -> Any:
    """10 columns, each a function of id (so every value can be checked), float values exact
    in float32 (so the Spark reader's round trip compares equal)."""
    from pyspark.sql import functions as F

    i = F.col("id")
    return spark.range(start, end, numPartitions=partitions).select(
        "id",
        (i % 1000).cast("int").alias("i"),
        (i * 0.25).alias("x"),
        ((i % 4096) / 8).cast("float").alias("f"),
        F.concat(F.lit("r"), i.cast("string")).alias("s"),
        (i % 3 == 0).alias("flag"),
        F.date_add(F.lit("2020-01-01").cast("date"), (i % 365).cast("int")).alias("day"),
        F.array((i % 7).cast("double"), F.lit(1.5), (i % 11).cast("double")).alias("arr"),
        F.when(i % 10 == 0, F.lit(None)).otherwise(i * 2).alias("maybe"),
        (i % 2).cast("int").alias("y"),
    )


# ---- Spark Connect server (for tests/integration/test_connect.py)


@contextlib.contextmanager
def connect_server(workdir: Path, master: str = "local[2]", timeout: float = 120.0,
                   conf: Mapping[str, str] | None = None) -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1 as a child process; yields its sc:// URL.

    Runs `bin/spark-submit --class SparkConnectServer` in the foreground (not the daemonizing
    sbin script), so the process is ours to stop. Python workers run this interpreter with
    the repo root on PYTHONPATH.
    """
    if find_java() is None:
        raise ClusterError("java was not found (JAVA_HOME or PATH); Spark needs Java 17+")
    workdir = Path(workdir).resolve()
    for sub in ("logs", "local", "derby"):
        (workdir / sub).mkdir(parents=True, exist_ok=True)
    env = daemon_env(workdir)
    env.pop("SPARK_CONNECT_AUTHENTICATE_TOKEN", None)
    settings = {
        "spark.connect.grpc.binding.address": HOST,
        "spark.driver.host": HOST,
        "spark.driver.bindAddress": HOST,
        "spark.ui.enabled": "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": env["PYTHONPATH"],
        "spark.local.dir": str(workdir / "local"),
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={workdir / 'derby'}",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "4",
        **dict(conf or {}),
    }
    proc = None
    for attempt in range(3):
        port = free_port()
        log = workdir / "logs" / f"connect-{attempt}.log"
        args = [str(spark_home() / "bin" / "spark-submit"), "--master", master,
                "--class", CONNECT_CLASS, "--name", "tfspark-connect-tests"]
        for k, v in {**settings, "spark.connect.grpc.binding.port": str(port)}.items():
            args += ["--conf", f"{k}={v}"]
        proc = _launch(args, log, env)
        deadline = time.monotonic() + timeout
        up = False
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                if s.connect_ex((HOST, port)) == 0:
                    up = True
                    break
            time.sleep(0.5)
        if up:
            break
        exited = proc.poll() is not None  # e.g. the port was taken meanwhile: try another
        stop_tree(proc.pid)
        _reap(proc)
        if not exited or attempt == 2:
            raise ClusterError(f"the Spark Connect server did not come up on {HOST}:{port}:\n"
                               f"{_tail(log)}")
    assert proc is not None
    try:
        yield f"sc://{HOST}:{port}"
    finally:
        stop_tree(proc.pid)
        _reap(proc)


# ---- command line


def _default_workdir() -> Path:
    return Path(tempfile.gettempdir()) / f"tfspark-local-cluster-{os.getuid()}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("command", choices=["start", "stop", "status"])
    p.add_argument("--workdir", type=Path, default=_default_workdir(),
                   help="state, logs and worker dirs (default: %(default)s)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1, help="cores per worker")
    p.add_argument("--memory", default="1g", help="memory per worker")
    p.add_argument("--timeout", type=float, default=180.0)
    a = p.parse_args(argv)
    state = a.workdir / "cluster.json"
    if a.command == "start":
        if state.exists() and LocalCluster.load(a.workdir).daemons:
            print(f"a cluster is already running from {a.workdir}; stop it first",
                  file=sys.stderr)
            return 1
        c = LocalCluster(a.workdir, a.workers, a.cores, a.memory).start(timeout=a.timeout)
        print(c.master_url)
        print(f"# web UI {c.webui_url}; logs in {c.workdir / 'logs'}; stop with: "
              f"python {os.path.relpath(__file__)} stop --workdir {c.workdir}", file=sys.stderr)
        return 0
    if not state.exists():
        print(f"no cluster state in {a.workdir}", file=sys.stderr)
        return 1 if a.command == "status" else 0
    c = LocalCluster.load(a.workdir)
    if a.command == "status":
        print(json.dumps(c.state(), indent=1))
        return 0
    c.stop()
    print(f"stopped the cluster in {a.workdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
