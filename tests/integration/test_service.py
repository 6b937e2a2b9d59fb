"""The Ray Serve evaluator on a real local Ray, deployed by ``cobalt serve --profile cobalt``:
concurrency, batches, HTTP, the request schema's refusals, and identical results to the
embedded mode under both profiles."""
from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlparse

import pytest

from cobalt.execution.base import ExecOptions
from cobalt.execution.client import EvaluatorClient, RequestRejected
from support.ray_cluster import RayCluster

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """This module's private Ray cluster (2 CPUs) with Serve on a free port of 127.0.0.1."""
    with RayCluster(tmp_path_factory.mktemp("ray"), num_cpus=2, serve=True) as c:
        yield c


@pytest.fixture(scope="module")
def served(cluster, tmp_path_factory):
    """The evaluator app, deployed by the command line with a non-default profile; this process
    then joins the cluster as a driver."""
    from cobalt.execution.service import APP_NAME

    proc = subprocess.run(
        [sys.executable, "-m", "cobalt", "serve", "--address", cluster.address, "--detach", "--profile", "cobalt",
         "--replicas", "1", "--cpus-per-replica", "2", "--memory-gb-per-replica", "1", "--max-ongoing-requests", "32"],
        capture_output=True, text=True, timeout=300, env=cluster.env())
    (tmp_path_factory.mktemp("serve") / "serve.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "profile='cobalt'" in proc.stdout, proc.stdout
    cluster.connect()
    yield APP_NAME


def _post(cluster, payload, *, raw: bytes | None = None) -> tuple[int, dict]:
    body = raw if raw is not None else json.dumps(payload).encode()
    req = urllib.request.Request(f"{cluster.http_url}/evaluator", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _jobs(leetcode_problems, n=24):
    jobs = []
    for i, p in enumerate(leetcode_problems[:n]):
        code = p.reference if i % 3 else p.reference.replace("return", "return None or", 1)
        jobs.append((code, p.call_tests().to_dict()))
    jobs.append(("while True: pass", {"inputs": ["1"], "outputs": ["1"]}))
    jobs.append(("print(input())", {"inputs": ["a", "b"], "outputs": ["a", "c"]}))
    return jobs


CONFIGS = [("paper", ExecOptions()), ("cobalt", ExecOptions()),
           ("paper", ExecOptions(call_mode="lossy", compare="tolerant"))]


def test_served_and_embedded_results_are_identical_under_both_profiles(served, leetcode_problems):
    jobs = _jobs(leetcode_problems, n=12)
    got = []
    for profile, options in CONFIGS:
        ray_client = EvaluatorClient.ray(profile=profile, options=options, timeout_s=120)
        local_client = EvaluatorClient.embedded(profile=profile, options=options, timeout_s=120)
        served_results = asyncio.run(ray_client.evaluate_many(jobs))  # all in flight at once
        local_results = asyncio.run(local_client.evaluate_many(jobs))
        assert len(served_results) == len(jobs)
        for s, l in zip(served_results, local_results):
            # verdicts, feedback and statuses agree (timings differ)
            assert (s.passing, s.feedback, s.status) == (l.passing, l.feedback, l.status), (
                profile, options, s.status, l.status, s.feedback[:1], l.feedback[:1])
        assert served_results[-1].passing == (True, False)
        assert served_results[-2].status == ("timeout",)
        got.append(served_results)
    paper, cobalt, lossy = got
    assert paper[-1].feedback[1].startswith("Input:\nb\nProgram's Output:")  # the client's profile, not the service's
    assert cobalt[-1].feedback[1].startswith("Input:\nb\nYour output:")
    assert sum(r.all_passed for r in paper) >= 6
    assert [r.passing for r in lossy[:-2]] != [r.passing for r in paper[:-2]]  # the call mode reached the replica


def test_batch_payload_and_bad_payloads_through_the_handle(served):
    handle = serve.get_deployment_handle("Evaluator", app_name=served)
    good = {"code": "print(int(input()) * 2)", "test_cases": {"inputs": ["2", "5"], "outputs": ["4", "10"]}}
    out = handle.remote({"programs": [good, good]}).result(timeout_s=60)["results"]
    assert [r["passing"] for r in out] == [[True, True]] * 2
    bad = {"programs": [good, {"code": "print(1)", "test_cases": {"inputs": ["1"], "outputs": []}}]}
    assert handle.remote(bad).result(timeout_s=60) == {
        "error": "request.programs[1].test_cases: 1 inputs but 0 outputs", "status_code": 400}
    assert handle.remote({"programs": 5}).result(timeout_s=60)["status_code"] == 400


def test_the_serve_profile_is_the_default_of_requests_without_one(served, cluster):
    payload = {"code": "print(input())", "test_cases": {"inputs": ["a"], "outputs": ["b"]}}
    assert _post(cluster, payload)[1]["feedback"] == ["Input:\na\nYour output:\na\nExpected output:\nb"]
    paper = _post(cluster, {**payload, "options": {"profile": "paper"}})[1]
    assert paper["feedback"] == ["Input:\na\nProgram's Output:\na\nExpected Output:\nb"]


ATTACKS = [
    ({"programs": 5}, 400, "expected a list of programs, got int"),
    ({"code": "print(1.5)", "test_cases": {"inputs": [""], "outputs": ["2"]},
      "options": {"compare": "tolerant", "float_tol": float("inf")}}, 400, "float_tol: expected a finite number"),
    ({"code": "import sys\nprint(sys.path)", "test_cases": {"inputs": [""], "outputs": [""]},
      "options": {"allow_packages": True}}, 403, "does not expose the host's packages"),
    ({"code": "print(1)", "test_cases": {"inputs": [""], "outputs": ["1"]}, "options": {"profile": "fast"}}, 400,
     "request.options.profile: 'fast' is not one of"),
    ({"code": "print(1)", "test_cases": {"inputs": [""], "outputs": ["1"]}, "options": {"nope": 1}}, 400,
     "unknown option 'nope'"),
]


@pytest.mark.parametrize("payload, status, words", ATTACKS)
def test_attacks_on_the_payload_get_a_4xx_over_http(served, cluster, payload, status, words):
    body = json.dumps(payload).replace("Infinity", "1e999").encode()  # JSON has no inf; 1e999 parses as one
    got_status, reply = _post(cluster, None, raw=body)
    assert (got_status, reply["status_code"]) == (status, status), reply
    assert words in reply["error"] and "\n" not in reply["error"]


def test_bad_bodies_are_refused_before_parsing(served, cluster):
    assert _post(cluster, None, raw=b"{not json")[0] == 400
    url = urlparse(cluster.http_url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=60)
    conn.putrequest("POST", "/evaluator")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(1 << 40))  # announced, never sent
    conn.endheaders()
    resp = conn.getresponse()
    assert resp.status == 413 and "more than" in json.loads(resp.read())["error"]
    conn.close()


def test_a_huge_programs_string_does_not_slow_a_normal_request(served, cluster):
    normal = {"code": "print(input()[::-1])", "test_cases": {"inputs": ["abc"], "outputs": ["cba"]}}
    assert _post(cluster, normal)[1]["passing"] == [True]  # warm
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        attack = pool.submit(_post, cluster, {"programs": "x" * 300_000})
        time.sleep(0.05)
        started = time.perf_counter()
        status, reply = _post(cluster, normal)
        normal_s = time.perf_counter() - started
        assert attack.result()[0] == 400
    assert (status, reply["passing"]) == (200, [True])
    assert normal_s < 5.0, normal_s


def test_a_refused_request_raises_in_the_client(served):
    client = EvaluatorClient.ray(options=ExecOptions(allow_packages=True), timeout_s=60)
    with pytest.raises(RequestRejected, match="HTTP 403"):
        asyncio.run(client.evaluate("print(1)", {"inputs": [""], "outputs": ["1"]}))


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
