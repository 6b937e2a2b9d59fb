"""The Ray Serve evaluator on a real local Ray: concurrency, batches, HTTP, and
identical results to the embedded mode."""
from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from cobalt.execution.client import EvaluatorClient
from support.ray_cluster import RayCluster

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """This module's private Ray cluster (2 CPUs) with Serve on a free port of 127.0.0.1."""
    with RayCluster(tmp_path_factory.mktemp("ray"), num_cpus=2, serve=True) as c:
        yield c


@pytest.fixture(scope="module")
def served(cluster):
    from cobalt.execution.service import APP_NAME, ServiceConfig, deploy

    deploy(cluster.address, config=ServiceConfig(num_replicas=1, cpus_per_replica=2, memory_gb_per_replica=1,
                                                 max_ongoing_requests=32), log_to_driver=False)
    yield APP_NAME


def _jobs(leetcode_problems, n=24):
    jobs = []
    for i, p in enumerate(leetcode_problems[:n]):
        code = p.reference if i % 3 else p.reference.replace("return", "return None or", 1)
        jobs.append((code, p.call_tests().to_dict()))
    jobs.append(("while True: pass", {"inputs": ["1"], "outputs": ["1"]}))
    jobs.append(("print(input())", {"inputs": ["a", "b"], "outputs": ["a", "c"]}))
    return jobs


def test_served_and_embedded_results_are_identical(served, leetcode_problems):
    jobs = _jobs(leetcode_problems)
    ray_client = EvaluatorClient.ray(timeout_s=60)
    local_client = EvaluatorClient.embedded(timeout_s=60)
    served_results = asyncio.run(ray_client.evaluate_many(jobs))  # all in flight at once
    local_results = asyncio.run(local_client.evaluate_many(jobs))
    assert len(served_results) == len(jobs)
    for s, l in zip(served_results, local_results):
        # verdicts, feedback and statuses agree (timings differ)
        assert (s.passing, s.feedback, s.status) == (l.passing, l.feedback, l.status)
    assert served_results[-1].passing == (True, False)
    assert served_results[-2].status == ("timeout",)
    assert sum(r.all_passed for r in served_results) >= 10


def test_batch_payload_and_bad_payloads_through_the_handle(served):
    handle = serve.get_deployment_handle("Evaluator", app_name=served)
    batch = {"programs": [
        {"code": "print(int(input()) * 2)", "test_cases": {"inputs": ["2", "5"], "outputs": ["4", "10"]}},
        {"code": "print(1)", "test_cases": {"inputs": ["1"], "outputs": []}},
        {"code": 42, "test_cases": {"inputs": ["1"], "outputs": ["1"]}},
    ]}
    out = handle.remote(batch).result(timeout_s=60)["results"]
    assert out[0]["passing"] == [True, True]
    assert "1 inputs but 0 outputs" in out[1]["error"]
    assert "'code' must be a string" in out[2]["error"]


def test_http_route_prefix(served, cluster):
    body = json.dumps({"code": "print(input()[::-1])", "test_cases": {"inputs": ["abc"], "outputs": ["cba"]}}).encode()
    req = urllib.request.Request(f"{cluster.http_url}/evaluator", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert json.loads(resp.read())["passing"] == [True]


def test_unreachable_app_gives_a_failing_result_not_an_exception(served):
    client = EvaluatorClient.ray(app_name="no-such-app", timeout_s=5, retries=1)
    res = asyncio.run(client.evaluate("print(1)", {"inputs": ["", ""], "outputs": ["1", "1"]}))
    assert res.passing == (False, False)
    assert res.error and ("failed" in res.error or "timed out" in res.error)
