"""The ``vllm_actor`` Ray Serve app on a real local Ray cluster, on CPU.

The paper's command ``serve run vllm_engine_actor:app --name vllm_actor
--route-prefix /vllm_actor`` is run from the repository root, unchanged, with
``COBALT_VLLM_BACKEND=transformers`` and the tiny random Qwen3 model (vLLM
needs a GPU); the app is then used through the ``vllm-serve`` engine built by
``create_engine`` (Ray handle) and through HTTP on its route.

The test owns its cluster (``tests/support/ray_cluster.py``): ``ray start
--head --block`` in its own process group and temp dir, Serve's HTTP proxy on a
free port of 127.0.0.1, and it ends only the process groups it started.
"""
from __future__ import annotations

import asyncio
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

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
pytest.importorskip("transformers")

from cobalt.engines import SamplingParams, create_engine  # noqa: E402
from support.ray_cluster import RayCluster  # noqa: E402

pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
HANG_GUARD_S = 300

CONVERSATIONS = [
    [{"role": "user", "content": "Write a function that reverses a string."}],
    [{"role": "system", "content": "You are a careful programmer."}, {"role": "user", "content": "Sum a list."}],
    [{"role": "user", "content": "What is 2 + 2?"}],
]


def _stop_group(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait: float = 60) -> None:
    try:
        os.killpg(proc.pid, sig)
        proc.wait(timeout=wait)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _post(url: str, payload: dict) -> dict | None:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())
    except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
        return None


@pytest.fixture
def cluster(tmp_path):
    """This test's private Ray cluster (2 CPUs), Serve's HTTP proxy on a free port; this process its driver."""
    with RayCluster(tmp_path / "ray", num_cpus=2, serve=True) as c:
        c.connect()
        yield c


def test_paper_serve_run_command_and_vllm_serve_engine(cluster, tiny_qwen3, tmp_path):
    from transformers import AutoTokenizer

    env = cluster.env(COBALT_VLLM_MODEL=str(tiny_qwen3), COBALT_VLLM_BACKEND="transformers",
                      COBALT_VLLM_CPUS_PER_REPLICA="1",
                      PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]))
    log = open(tmp_path / "serve_run.log", "wb")
    proc = subprocess.Popen(  # the paper's command, from the repository root, no file edited
        [str(BIN / "serve"), "run", "vllm_engine_actor:app", "--name", "vllm_actor", "--route-prefix", "/vllm_actor"],
        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = f"{cluster.http_url}/vllm_actor"
        payload = {"conversations": [CONVERSATIONS[2]], "params": {"n": 2, "max_new_tokens": 4, "seed": 1}}
        http_result, deadline = None, time.monotonic() + 300
        while http_result is None and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(3)
            http_result = _post(url, payload)
        tail = (tmp_path / "serve_run.log").read_text(errors="replace")[-3000:]
        assert http_result is not None, f"serve run never answered on /vllm_actor:\n{tail}"
        [http_samples] = http_result["completions"]
        assert len(http_samples) == 2 and all(1 <= s["completion_tokens"] <= 4 for s in http_samples)

        status = serve.status()
        assert "vllm_actor" in status.applications
        assert status.applications["vllm_actor"].status == "RUNNING"

        # the vllm-serve engine, as any pipeline stage builds it
        engine = create_engine("vllm-serve", str(tiny_qwen3), address=cluster.address)
        params = SamplingParams(n=3, max_new_tokens=6, temperature=1.0, seed=7, enable_thinking=False)
        outs = asyncio.run(_generate(engine, params))
        tokenizer = AutoTokenizer.from_pretrained(str(tiny_qwen3))
        assert [len(samples) for samples in outs] == [3, 3, 3]
        for conv, samples in zip(CONVERSATIONS, outs):
            prompt_ids = tokenizer.apply_chat_template(conv, add_generation_prompt=True, tokenize=True,
                                                       enable_thinking=False)
            if isinstance(prompt_ids, dict) or hasattr(prompt_ids, "keys"):
                prompt_ids = prompt_ids["input_ids"]
            for c in samples:
                assert c.prompt_tokens == len(prompt_ids)
                assert c.finish_reason in ("stop", "length")
                assert 1 <= c.completion_tokens <= 6
                if c.finish_reason == "length":
                    assert c.completion_tokens == 6
                assert isinstance(c.text, str)
    finally:
        _stop_group(proc, signal.SIGINT)


async def _generate(engine, params):
    try:  # the guard only turns a hang (e.g. replies that never reach this driver) into a failure
        return await asyncio.wait_for(engine.generate(CONVERSATIONS, params), timeout=HANG_GUARD_S)
    finally:
        await engine.aclose()
