"""Rollout, hidden evaluation and report end to end against a real OpenAI-compatible server
on 127.0.0.1 that answers with known programs, judged by the real sandbox.

Every answer is fixed in advance (per sample and turn), so every public and hidden
pass rate and every Pass@1 below follows from the data, not from the code under test:

=========  ==========================  ============================  ==================
sample     turn 0                      turn 1                        turn 2
=========  ==========================  ============================  ==================
0          reference                   reference                     reference
1          wrong (sentinel)            memorises public answers      reference
2          no code                     wrong (sentinel)              no code
3          think + 6,500-char answer,  think + reference             reference,
           reference block at its end                                no </think>
=========  ==========================  ============================  ==================
"""
from __future__ import annotations

import asyncio
import json
import re

import pytest

pytest.importorskip("openai")

from support.openai_server import OpenAIServer  # noqa: E402

from cobalt.cli import main as cobalt_main  # noqa: E402
from cobalt.prompts import feedback_all_public_passed, problem_prompt, repair_prompt, system_prompt  # noqa: E402
from cobalt.rollout.leetcode import problem_record  # noqa: E402
from cobalt.rollout.turns import PAPER_NO_CODE_FEEDBACK as NO_CODE_FEEDBACK  # noqa: E402  (the default profile's text)

SENTINEL = "wrong-answer-sentinel"
PAD = ("filler " * 1000)[:6500]  # pushes the code block past the 6,000-character history cut


def _block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def _programs(problem, record) -> dict[str, str]:
    public = json.loads(record["public_test_cases"])
    table = {tuple(json.loads(line) for line in i.splitlines() if line.strip()).__repr__(): json.loads(o)
             for i, o in zip(public["inputs"], public["outputs"])}
    memoriser = (
        "class Solution:\n"
        f"    def {problem.fn_name}(self, *args):\n"
        f"        answers = {table!r}\n"
        "        key = repr(tuple(args))\n"
        f"        return answers.get(key, {SENTINEL!r})\n"
    )
    wrong = f"class Solution:\n    def {problem.fn_name}(self, *args):\n        return {SENTINEL!r}\n"
    return {"reference": problem.reference, "wrong": wrong, "memoriser": memoriser}


def _scripted(programs: dict[str, str]):
    ref, wrong, memo = (_block(programs[k]) for k in ("reference", "wrong", "memoriser"))
    script = {
        (0, 0): f"sample 0 turn 0\n{ref}",
        (0, 1): f"sample 0 turn 1\n{ref}",
        (0, 2): f"sample 0 turn 2\n{ref}",
        (1, 0): f"sample 1 turn 0\n{wrong}",
        (1, 1): f"sample 1 turn 1\n{memo}",
        (1, 2): f"sample 1 turn 2\n{ref}",
        (2, 0): "sample 2 turn 0: I would rather describe the idea in words.",
        (2, 1): f"sample 2 turn 1\n{wrong}",
        (2, 2): "sample 2 turn 2: still no program.",
        (3, 0): f"<think>maybe this?\n{wrong}\n</think>\nsample 3 turn 0\n{PAD}\n{ref}",
        (3, 1): f"<think>again\n</think>\nsample 3 turn 1\n{ref}",
        (3, 2): f"sample 3 turn 2 without a think tag\n{ref}",
    }

    def responder(messages, index):
        assistants = [m["content"] for m in messages if m["role"] == "assistant"]
        turn = len(assistants)
        sample = index if turn == 0 else int(re.search(r"sample (\d) turn", assistants[0]).group(1))
        return script[(sample, turn)]

    return script, responder


@pytest.fixture(scope="module")
def setup(tmp_path_factory, leetcode_problems):
    problem = leetcode_problems[0]
    record = problem_record(problem)
    work = tmp_path_factory.mktemp("rollout")
    problems = work / "problems.jsonl"
    problems.write_text(json.dumps(record) + "\n")
    programs = _programs(problem, record)
    script, responder = _scripted(programs)
    with OpenAIServer(responder=responder) as server:
        rc = cobalt_main([
            "rollout", "--engine", "openai", "--model", "test-model", "--base-url", server.base_url,
            "--input", str(problems), "--output", str(work / "rollout.jsonl"), "--samples", "4", "--turns", "2",
            "--max-tokens", "100000", "--enable-thinking", "--no-progress", "--eval-concurrency", "2",
        ])
        requests = [r.body for r in server.chat_requests()]
    assert rc == 0
    out = [json.loads(line) for line in (work / "rollout.jsonl").read_text().splitlines()]
    return dict(problem=problem, record=record, work=work, script=script, out=out, requests=requests,
                programs=programs)


def test_public_results_follow_the_programs(setup):
    (rec,) = setup["out"]
    n_public = len(json.loads(setup["record"]["public_test_cases"])["inputs"])
    rates = [[t["public_pass_rate"] for t in s["turns"]] for s in rec["samples"]]
    assert rates == [[1.0, 1.0, 1.0], [0.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    for sample in rec["samples"]:
        for turn in sample["turns"]:
            assert len(turn["public"]["passing"]) == n_public
    # responses are stored raw (thinking included); the program is the raw response's last block
    s3 = rec["samples"][3]["turns"][0]
    assert s3["response"] == setup["script"][(3, 0)]
    assert s3["code"].strip() == setup["programs"]["reference"].strip()
    no_code = rec["samples"][2]["turns"][0]
    assert no_code["code"] is None and set(no_code["public"]["feedback"]) == {NO_CODE_FEEDBACK}
    wrong = rec["samples"][1]["turns"][0]
    assert all(SENTINEL in f for f in wrong["public"]["feedback"])


def test_conversations_sent_to_the_model(setup):
    reqs = setup["requests"]
    # turn 0: one request with n = 4; then one request per sample and repair turn, no early stop
    assert sorted(r.get("n", 1) for r in reqs) == [1] * 8 + [4]
    first = next(r for r in reqs if r.get("n", 1) == 4)
    starter = setup["problem"].starter_code
    assert first["messages"] == [{"role": "system", "content": system_prompt()},
                                 {"role": "user", "content": problem_prompt(setup["problem"].question,
                                                                            fn_name=setup["problem"].fn_name,
                                                                            starter_code=starter)}]
    assert f"`Solution().{setup['problem'].fn_name}(...)`" in first["messages"][1]["content"]
    by_key = {}
    for r in reqs:
        msgs = r["messages"]
        turns = sum(m["role"] == "assistant" for m in msgs)
        if turns:
            sample = int(re.search(r"sample (\d) turn", msgs[2]["content"]).group(1))
            by_key[(sample, turns)] = msgs
    assert len(by_key) == 8
    rec = setup["out"][0]
    fn = setup["problem"].fn_name
    all_passed = repair_prompt(feedback_all_public_passed(), fn_name=fn)
    assert f"the judge calls `{fn}`" in all_passed and "reads standard input" not in all_passed
    # sample 0 passed every public test: the all-passed sentence inside the repair instruction, every turn
    assert by_key[(0, 1)][3]["content"] == all_passed and by_key[(0, 2)][5]["content"] == all_passed
    # sample 1: the first failing public test's feedback
    assert by_key[(1, 1)][3]["content"] == repair_prompt(rec["samples"][1]["turns"][0]["public"]["feedback"][0], fn_name=fn)
    assert by_key[(1, 2)][5]["content"] == all_passed  # the memoriser passes every public test
    # sample 2: no code
    assert by_key[(2, 1)][3]["content"] == repair_prompt(NO_CODE_FEEDBACK, fn_name=fn)
    # sample 3: the history keeps the text after the last </think>, stripped, cut to 6,000 characters
    answer = setup["script"][(3, 0)].split("</think>")[-1].strip()[:6000]
    assert by_key[(3, 1)][2] == {"role": "assistant", "content": answer}
    assert "```" not in answer  # the cut removed the block that was executed
    assert by_key[(3, 2)][4]["content"] == setup["script"][(3, 1)].split("</think>")[-1].strip()
    # the whole conversation of the last turn: system, user, then (assistant, user) pairs
    assert [m["role"] for m in by_key[(0, 2)]] == ["system", "user", "assistant", "user", "assistant", "user"]


def _sent_by_sample_and_turn(requests) -> dict:
    by_key = {}
    for r in requests:
        msgs = r["messages"]
        turns = sum(m["role"] == "assistant" for m in msgs)
        if turns:
            by_key[(int(re.search(r"sample (\d) turn", msgs[2]["content"]).group(1)), turns)] = msgs
    return by_key


def test_replaying_the_records_gives_the_messages_sent(setup):
    """One conversation: the rollout's records, replayed by the bandit-prompt builder and by the
    agent loop's step (``conversation.extend`` over ``conversation.environment_step``'s result),
    give exactly the messages the rollout sent to the model."""
    from cobalt.data.records import TrajectoryRecord
    from cobalt.training_data.trajectories import BuildConfig, history_messages
    from cobalt.execution.client import EvaluatorClient
    from cobalt.rollout.conversation import environment_step, extend, first_turn_messages

    (rec,) = setup["out"]
    # the builder reads evaluated records; hidden rates do not enter the messages
    evaluated = {**rec, "samples": [{"turns": [{**t, "hidden_pass_rate": 0.0} for t in s["turns"]]}
                                    for s in rec["samples"]]}
    parsed = TrajectoryRecord.from_dict(evaluated, path="rollout.jsonl", line=1)
    sent = _sent_by_sample_and_turn(setup["requests"])
    client = EvaluatorClient.embedded(max_concurrency=2)
    config = BuildConfig(enable_thinking=True)
    for i, sample in enumerate(rec["samples"]):
        agent = first_turn_messages(parsed.problem)
        for t in (1, 2):
            turn = sample["turns"][t - 1]
            step = asyncio.run(environment_step(turn["response"], parsed.problem.public, client))
            assert step.program == turn["code"] and step.public == turn["public"]
            agent = extend(agent, turn["response"], step.public, no_code=step.no_code, enable_thinking=True,
                           fn_name=parsed.problem.public.fn_name, profile="paper")  # the rollout's profile
            built = history_messages(parsed.problem, parsed.samples[i], t, config)
            assert sent[(i, t)] == built == agent, (i, t)


def _hidden_rate(setup, program: str) -> float:
    """Hidden pass rate of the memoriser: hidden tests whose input is also a public input (with its answer)."""
    public = json.loads(setup["record"]["public_test_cases"])
    hidden = json.loads(setup["record"]["hidden_test_cases"])
    seen = dict(zip(public["inputs"], public["outputs"]))
    hits = sum(1 for i, o in zip(hidden["inputs"], hidden["outputs"]) if seen.get(i) == o)
    return hits / len(hidden["inputs"])


@pytest.mark.parametrize("profile", ["paper", "cobalt"])
def test_hidden_eval_and_pass_at_1(setup, profile):
    work = setup["work"]
    evaluated = work / f"eval-{profile}.jsonl"
    rc = cobalt_main(["eval", "--input", str(work / "rollout.jsonl"), "--output", str(evaluated), "--profile",
                      profile, "--no-progress", "--eval-concurrency", "2"])
    assert rc in (0,)
    (rec,) = [json.loads(line) for line in evaluated.read_text().splitlines()]
    memo = _hidden_rate(setup, setup["programs"]["memoriser"])
    s3_turn0 = 0.0 if profile == "paper" else 1.0  # paper: the history text lost the program
    hidden = [[t["hidden_pass_rate"] for t in s["turns"]] for s in rec["samples"]]
    assert hidden == [[1.0, 1.0, 1.0], [0.0, memo, 1.0], [0.0, 0.0, 0.0], [s3_turn0, 1.0, 1.0]]
    summary = json.loads((work / f"eval-{profile}.jsonl.summary.json").read_text())
    correct = [1 + int(s3_turn0 == 1.0), 2 + int(memo == 1.0), 3]
    n = 4  # the samples drawn for the problem, in both profiles
    assert summary["pass_at_1"] == pytest.approx([c / n for c in correct])
    assert summary["change_vs_turn0_percent"][2] == pytest.approx(round((3 - correct[0]) / correct[0] * 100, 2))
    # the evaluated records feed build-prompts unchanged (the inference-record schema)
    from cobalt.data.records import TrajectoryRecord

    parsed = TrajectoryRecord.from_dict(rec, path=str(evaluated), line=1)
    assert len(parsed.samples) == 4 and len(parsed.samples[0].turns) == 3


def test_report_of_two_runs(setup):
    from PIL import Image

    work = setup["work"]
    for profile in ("paper", "cobalt"):
        if not (work / f"eval-{profile}.jsonl").exists():
            pytest.skip("runs after the eval test")
    rc = cobalt_main(["report", str(work / "eval-paper.jsonl"), str(work / "eval-cobalt.jsonl"), "--labels",
                      "history-program", "response-program", "--out-dir", str(work / "report")])
    assert rc == 0
    csv_rows = (work / "report" / "pass_at_1.csv").read_text().splitlines()
    assert csv_rows[0].startswith("run,turn,pass_at_1_percent")
    assert len(csv_rows) == 1 + 2 * 3
    assert csv_rows[1].startswith("history-program,0,25.0000")  # only sample 0 correct at turn 0: 1/4
    assert csv_rows[4].startswith("response-program,0,50.0000")
    md = (work / "report" / "pass_at_1.md").read_text()
    assert "| 2 | 75.00 | +200.0% | 75.00 | +50.0% |" in md
    # each run states n and the profile its file was made with (not a flag of report)
    assert "history-program: 1 problems, n = 4 (samples per problem: min 4, max 4), profile paper" in md
    assert "response-program: 1 problems, n = 4 (samples per problem: min 4, max 4), profile cobalt" in md
    with Image.open(work / "report" / "pass_at_1.png") as img:
        assert img.size[0] > 300 and img.size[1] > 200
