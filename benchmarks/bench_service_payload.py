"""What hostile payloads cost the Ray Serve evaluator, and a normal request sent beside them.

Starts a private local Ray cluster with Serve (tests/support/ray_cluster.py), deploys the
evaluator (1 replica, 2 CPUs), then over HTTP: a normal request alone; each hostile request
(a 300 KB ``programs`` string, ``{"programs": 5}``, ``float_tol=inf``, ``allow_packages=true``,
300 programs, a body announced at 1 TiB) and a valid batch of 256 programs, with its status and latency, and a normal request
sent 50 ms after it; the replica's RSS before and after.

    PYTHONPATH=src:tests .venv/bin/python benchmarks/bench_service_payload.py
"""
from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

NORMAL = {"code": "print(input()[::-1])", "test_cases": {"inputs": ["abc"], "outputs": ["cba"]}}
ONE = {"code": "print(1)", "test_cases": {"inputs": [""], "outputs": ["1"]}}
ATTACKS = {
    "programs: 300 KB string": {"programs": "x" * 300_000},
    "programs: 5": {"programs": 5},
    "float_tol: inf": {**ONE, "options": {"compare": "tolerant", "float_tol": float("inf")}},
    "allow_packages: true": {**ONE, "options": {"allow_packages": True}},
    "300 programs": {"programs": [ONE] * 300},
    "a valid batch of 256 programs": {"programs": [ONE] * 256},
}


def post(url: str, body: bytes, length: int | None = None) -> tuple[int, float]:
    """POST ``body`` (announcing ``length`` bytes when given); ``(status, seconds)``."""
    u = urlparse(url)
    started = time.perf_counter()
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    conn.putrequest("POST", u.path)
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(len(body) if length is None else length))
    conn.endheaders()
    if length is None:
        conn.send(body)
    resp = conn.getresponse()
    resp.read()
    conn.close()
    return resp.status, time.perf_counter() - started


def main() -> int:
    """Run the measurements and print one line per case."""
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    import soak_service
    from ray import serve

    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, build_app
    from support.ray_cluster import RayCluster

    with RayCluster(Path(tempfile.mkdtemp(prefix="bench-payload-")), num_cpus=2, serve=True) as cluster:
        cluster.connect()
        serve.run(build_app(ServiceConfig(num_replicas=1, cpus_per_replica=2, memory_gb_per_replica=1)),
                  name=APP_NAME, route_prefix=ROUTE_PREFIX)
        url = f"{cluster.http_url}{ROUTE_PREFIX}"
        replicas = soak_service.replica_processes()
        normal = json.dumps(NORMAL).encode()
        post(url, normal)
        alone = statistics.median(post(url, normal)[1] for _ in range(5))
        print(f"normal request alone: {alone:.3f} s (median of 5); replica RSS {soak_service.rss_mb(replicas):.0f} MiB")
        cases = [(name, json.dumps(p).encode(), None) for name, p in ATTACKS.items()]
        cases.append(("body announced at 1 TiB", b"", 1 << 40))
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            for name, body, length in cases:
                attack = pool.submit(post, url, body, length)
                time.sleep(0.05)
                status, beside = post(url, normal)
                a_status, a_s = attack.result()
                print(f"{name}: HTTP {a_status} in {a_s:.3f} s; normal request beside it: HTTP {status} in "
                      f"{beside:.3f} s; replica RSS {soak_service.rss_mb(replicas):.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
