"""A private Ray cluster for one test module.

``ray start --head --block`` in its own process group, with its own temp dir
(so its session files and its ``ray_current_cluster`` address file stay out
of ``/tmp/ray``), a free port for every listener that would otherwise be fixed
(GCS, Ray Client server, dashboard, dashboard agent), and optionally Ray Serve
with its HTTP proxy on ``127.0.0.1`` and a free port instead of 8000. Several
such clusters (other modules, other checkouts on the same machine) run side by
side; :meth:`RayCluster.stop` ends only this cluster's process group and never
runs ``ray stop``.

Drivers reach it at :attr:`RayCluster.address` (``127.0.0.1:<port>``; Ray
itself advertises the machine's routable address for its nodes, whatever the
flags say). Token authentication is whatever the session's environment says:
``tests/conftest.py`` fixes ``RAY_AUTH_MODE`` and a session token before any
test imports Ray, and every process here (head, workers, ``serve`` CLI,
drivers) inherits that one setting.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
READY = "will now block forever"


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _HeadExited(RuntimeError):
    """``ray start --head`` exited before it came up."""


class RayCluster:
    """One single-node Ray cluster owned by the caller; use as a context manager."""

    def __init__(self, log_dir: Path, *, num_cpus: int = 2, serve: bool = False, start_timeout_s: float = 180) -> None:
        self.log_dir = Path(log_dir)
        self.num_cpus = num_cpus
        self.serve = serve
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.http_port: int | None = None
        self.temp_dir: str | None = None
        self._head: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        """The head's GCS address (``ray start --port``)."""
        return f"127.0.0.1:{self.port}"

    @property
    def http_url(self) -> str:
        """Base URL of Serve's HTTP proxy (``serve=True`` only)."""
        assert self.http_port is not None, "this cluster was started without Serve"
        return f"http://127.0.0.1:{self.http_port}"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a subprocess (``serve run``, a CLI) that must use this cluster."""
        return {**os.environ, "RAY_ADDRESS": self.address, **extra}

    def start(self, attempts: int = 3) -> "RayCluster":
        """Start the head (and Serve); raise with the head's log when it does not come up.

        A head that exits at once is started again on fresh ports (up to ``attempts``
        times): Ray draws some of its components' ports at random, and one of them can
        be a port chosen here ("... is used by other components").
        """
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, attempts + 1):
            try:
                self._start_head()
                break
            except _HeadExited:
                self.stop()
                if attempt == attempts:
                    raise
                self.port = free_port()
            except BaseException:
                self.stop()
                raise
        try:
            if self.serve:
                self._start_serve()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_head(self) -> None:
        # short: Ray's unix socket paths under the temp dir have a length limit
        self.temp_dir = tempfile.mkdtemp(prefix="cobalt-ray-", dir="/tmp")
        log_path = self.log_dir / "ray_head.log"
        with open(log_path, "wb") as log:
            self._head = subprocess.Popen(
                [str(BIN / "ray"), "start", "--head", "--block", f"--port={self.port}",
                 f"--num-cpus={self.num_cpus}", "--num-gpus=0", "--include-dashboard=false",
                 f"--dashboard-port={free_port()}", f"--dashboard-agent-listen-port={free_port()}",
                 f"--ray-client-server-port={free_port()}", f"--temp-dir={self.temp_dir}", "--disable-usage-stats"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
        deadline = time.monotonic() + self.start_timeout_s
        while READY not in log_path.read_text(errors="replace"):
            if self._head.poll() is not None:
                raise _HeadExited(f"ray start --head did not come up:\n{log_path.read_text(errors='replace')[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"ray start --head did not come up:\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)

    def _start_serve(self) -> None:
        self.http_port = free_port()
        proc = subprocess.run(
            [str(BIN / "serve"), "start", f"--address={self.address}", "--http-host=127.0.0.1",
             f"--http-port={self.http_port}"],
            capture_output=True, text=True, timeout=self.start_timeout_s, env=self.env())
        (self.log_dir / "serve_start.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise RuntimeError(f"serve start failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")

    def connect(self, **ray_init) -> None:
        """Connect this process as a driver (``ray.init`` on :attr:`address`)."""
        import ray

        ray.init(address=self.address, log_to_driver=False, **ray_init)

    def disconnect(self) -> None:
        """Drop this process's driver and its Serve client, if any (the cluster keeps running)."""
        import ray

        if not ray.is_initialized():
            return
        if "ray.serve" in sys.modules:  # forget this driver's Serve client (its controller goes with the cluster)
            from ray import serve

            serve.shutdown()
        ray.shutdown()

    def stop(self) -> None:
        """Disconnect, stop the head (which stops its GCS, raylet and workers), remove the temp dir."""
        if "ray" in sys.modules:
            self.disconnect()
        head, self._head = self._head, None
        if head is not None and head.poll() is None:
            head.send_signal(signal.SIGTERM)
            try:
                head.wait(timeout=90)
            except subprocess.TimeoutExpired:
                pass
        if head is not None:
            try:  # whatever of the head's own process group is left
                os.killpg(head.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            head.wait()
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None

    def __enter__(self) -> "RayCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
