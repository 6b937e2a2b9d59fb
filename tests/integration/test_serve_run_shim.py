"""The paper's command works from the repository root:
``serve run remote_reward_server:app --name evaluator --route-prefix /evaluator``,
on this module's private Ray cluster (``RAY_ADDRESS``), Serve's HTTP proxy on a free port."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from support.ray_cluster import RayCluster

pytest.importorskip("ray.serve")
REPO = Path(__file__).resolve().parents[2]


def _post(url: str, payload: dict) -> dict | None:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


def test_serve_run_of_the_root_shim(tmp_path):
    serve_bin = Path(sys.executable).with_name("serve")
    with RayCluster(tmp_path / "ray", num_cpus=2, serve=True) as cluster:
        # the profile of requests that name none comes from the environment, as for every command
        env = cluster.env(COBALT_EVAL_CPUS_PER_REPLICA="1", COBALT_EVAL_MEMORY_GB_PER_REPLICA="1", COBALT_PROFILE="cobalt")
        env.pop("COBALT_EVAL_PROFILE", None)
        log = open(tmp_path / "serve.log", "wb")
        proc = subprocess.Popen(
            [str(serve_bin), "run", "remote_reward_server:app", "--name", "evaluator", "--route-prefix", "/evaluator"],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        payload = {"code": "print(input()[::-1])", "test_cases": {"inputs": ["abc", "xy"], "outputs": ["cba", "xx"]}}
        try:
            result, deadline = None, time.monotonic() + 180
            while result is None and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(2)
                result = _post(f"{cluster.http_url}/evaluator", payload)
            tail = (tmp_path / "serve.log").read_text(errors="replace")[-2000:]
            assert result is not None, f"the app never answered on /evaluator:\n{tail}"
            assert result["passing"] == [True, False]
            assert result["status"] == ["passed", "wrong_answer"]
            assert result["feedback"][1] == "Input:\nxy\nYour output:\nyx\nExpected output:\nxx"
            paper = _post(f"{cluster.http_url}/evaluator", {**payload, "options": {"profile": "paper"}})
            assert paper["feedback"][1] == "Input:\nxy\nProgram's Output:\nyx\nExpected Output:\nxx"
        finally:
            try:  # serve run shuts its app down on SIGINT; the cluster itself goes with the `with`
                os.killpg(proc.pid, signal.SIGINT)
                proc.wait(timeout=60)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
