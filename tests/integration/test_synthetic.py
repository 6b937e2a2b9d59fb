"""The learning experiment's generated task family (cobalt.data.synthetic): sizes, the split by
constant, every reference against its own tests, and the shared bug judged by the real sandbox."""
from __future__ import annotations

import asyncio
import contextlib
import io
import json

import pytest

from cobalt.cli import main
from cobalt.data.problems import iter_problems
from cobalt.data.synthetic import DEFAULT_SEED, TEMPLATES, generate
from cobalt.execution.client import EvaluatorClient


@pytest.fixture(scope="module")
def family():
    return generate(DEFAULT_SEED)


def _run_in_process(program: str, stdin: str) -> str:
    """The generator's own (trusted) program on one input, without a sandbox: the fast check of all 800."""
    lines = iter(stdin.splitlines())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(program, {"input": lambda: next(lines)})
    return out.getvalue()


def test_sizes_and_split_by_constant(family):
    train, held = family
    assert len(TEMPLATES) == 20 and len(train) == 600 and len(held) == 200
    for template in TEMPLATES:
        train_ks = {r["k"] for r in train if r["template"] == template.name}
        held_ks = {r["k"] for r in held if r["template"] == template.name}
        assert len(train_ks) == 30 and len(held_ks) == 10 and not train_ks & held_ks
    assert len({r["id"] for r in train + held}) == 800
    for record in held:
        assert f" {record['k']}" in record["question"] and f"k = {record['k']}\n" in record["reference"]


def test_same_seed_same_family_other_seed_other_split(family):
    assert generate(DEFAULT_SEED) == family
    other_train, _ = generate(DEFAULT_SEED + 1)
    assert {r["id"] for r in other_train} != {r["id"] for r in family[0]}


def test_every_reference_matches_its_tests_and_the_bug_does_not(family):
    for record in family[0] + family[1]:
        public, hidden = json.loads(record["public_test_cases"]), json.loads(record["hidden_test_cases"])
        assert len(public["inputs"]) == 3 and len(hidden["inputs"]) == 10
        for tests in (public, hidden):
            got = [_run_in_process(record["reference"], i) for i in tests["inputs"]]
            assert got == tests["outputs"], record["id"]
            bug = [_run_in_process(record["buggy"], i) for i in tests["inputs"]]
            assert bug != tests["outputs"], record["id"]


def test_real_sandbox_one_held_out_instance_per_template(family, tmp_path):
    assert main(["make-synthetic", "--out-dir", str(tmp_path)]) == 0
    problems = [p for _, p in iter_problems(tmp_path / "heldout.jsonl")]
    assert len(problems) == 200
    firsts = {}
    for problem in problems:
        firsts.setdefault(problem.extra["template"], problem)
    client = EvaluatorClient.embedded()

    async def judge():
        jobs = []
        for p in firsts.values():
            jobs += [(p.extra["reference"], p.tests), (p.extra["buggy"], p.public), (p.extra["buggy"], p.hidden)]
        return await client.evaluate_many(jobs)

    results = asyncio.run(judge())
    for i, name in enumerate(firsts):
        ref, bug_public, bug_hidden = results[3 * i: 3 * i + 3]
        assert len(ref.passing) == 13 and all(ref.passing), (name, ref.feedback)
        assert not all(bug_public.passing) and not all(bug_hidden.passing), name
