"""Our reward, end to end through verl 0.9.1's own reward loop (CPU, no Ray).

The batch is built the way verl's trainer hands it to a reward worker: chat
prompts rendered with the Qwen3 chat template and tokenised with the Qwen3
tokenizer (left-padded), responses tokenised and right-padded, an attention
mask over both, and the row fields ``data_source``, ``reward_model.ground_truth``
and ``extra_info``. verl's ``RewardLoopWorker`` (the class behind each reward
worker actor) is built from the composed training config, so verl itself
loads our function and manager from their ``pkg://`` paths, decodes the
responses and calls us; programs run in the embedded bubblewrap evaluator on
real LeetCode problems.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the pinned verl (pip install -e .[train])")

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker  # noqa: E402

from cobalt.data.leetcode import LeetCodeProblem, load_leetcode  # noqa: E402
from cobalt.reward.scoring import reset_client  # noqa: E402
from cobalt.verl_plugin.reward import REWARD_INFO_KEYS  # noqa: E402
from cobalt.verl_plugin.reward_manager import CobaltRewardManager  # noqa: E402
from cobalt.verl_plugin.runs import RunSettings, build_overrides, compose_config  # noqa: E402

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
TOKENIZER = DATA / "qwen3_tokenizer"
N_TESTS = 4

THINK = (
    "<think>\nThe task asks for a single pass over the input. I first thought of sorting, but that is "
    "wrong for ties, so I keep a running best instead. Let me verify the examples by hand.\n</think>\n\n"
)
THINK_TOKENS = 43
"""o200k_base tokens of THINK before </think>, stripped, the <think> tag included (the paper
profile's T); pinned by hand and checked against tiktoken itself in test_think_tokens_by_hand."""
FAILING_SCORE = -0.1 + 0.075 * math.tanh(THINK_TOKENS / 1024) + 3 * 0.005
"""A well-formed answer that passes no test: -0.1, the think term, 0.005 for each of
"but", "wrong" and "verify" (each once)."""


def test_think_tokens_by_hand():
    import tiktoken

    before = THINK[: THINK.index("</think>")].strip()
    assert len(tiktoken.get_encoding("o200k_base").encode(before)) == THINK_TOKENS
    assert FAILING_SCORE == pytest.approx(-0.1 + 0.075 * 0.041968 + 0.015, abs=1e-6)  # tanh(43/1024) = 0.041968


@pytest.fixture(scope="module")
def problems() -> dict[str, LeetCodeProblem]:
    wanted = {"maximum-area-of-longest-diagonal-rectangle", "number-of-changing-keys"}
    found = {p.task_id: p for p in load_leetcode(DATA / "leetcode" / "leetcode_problems.jsonl.gz") if p.task_id in wanted}
    assert set(found) == wanted
    return found


@pytest.fixture
def reward_env(monkeypatch):
    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(DATA / "tiktoken"))
    reset_client()
    yield
    reset_client()


def call_ground_truth(problem: LeetCodeProblem, *, spoil_last: bool = False) -> str:
    """The first tests of ``problem`` as call-based test cases (JSON), optionally one with a wrong answer."""
    tests = problem.call_tests()
    outputs = list(tests.outputs[:N_TESTS])
    if spoil_last:
        outputs[-1] = json.dumps("not the answer")
    return json.dumps({"inputs": list(tests.inputs[:N_TESTS]), "outputs": outputs, "fn_name": tests.fn_name})


def stdin_ground_truth(problem: LeetCodeProblem) -> str:
    """The first tests of ``problem`` as stdin/stdout test cases (JSON)."""
    tests = problem.stdin_tests()
    return json.dumps({"inputs": list(tests.inputs[:N_TESTS]), "outputs": list(tests.outputs[:N_TESTS])})


def answer(code: str) -> str:
    """A response in the paper's format: think, one python block, a short explanation."""
    return f"{THINK}Here is the program.\n```python\n{code.strip()}\n```\nIt runs in linear time.\n"


def wrong_program(problem: LeetCodeProblem) -> str:
    return problem.reference + "\n\nclass Solution(Solution):\n" \
        f"    def {problem.fn_name}(self, *args):\n        return -12345\n"


def build_batch(tokenizer, rows: list[dict]) -> DataProto:
    """The padded batch a reward worker receives: left-padded prompts, right-padded responses."""
    prompts, responses = [], []
    for row in rows:
        text = tokenizer.apply_chat_template(row["messages"], add_generation_prompt=True, tokenize=False)
        prompts.append(tokenizer(text, add_special_tokens=False)["input_ids"])
        responses.append(tokenizer(row["response"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id])
    p_len, r_len, pad = max(map(len, prompts)), max(map(len, responses)) + 3, tokenizer.pad_token_id
    prompt_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    response_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.tensor(
        [[0] * (p_len - len(p)) + [1] * len(p) + [1] * len(r) + [0] * (r_len - len(r)) for p, r in zip(prompts, responses)]
    )
    input_ids = torch.cat([prompt_ids, response_ids], dim=1)
    position_ids = torch.clamp(torch.cumsum(mask, dim=1) - 1, min=0)
    batch = TensorDict(
        {"prompts": prompt_ids, "responses": response_ids, "input_ids": input_ids,
         "attention_mask": mask, "position_ids": position_ids},
        batch_size=len(rows),
    )
    non_tensor = {
        "data_source": np.array([r["data_source"] for r in rows], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": r["ground_truth"]} for r in rows], dtype=object),
        "extra_info": np.array([r["extra_info"] for r in rows], dtype=object),
        "raw_prompt": np.array([r["messages"] for r in rows], dtype=object),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def worker_for(run: str, *extra: str) -> RewardLoopWorker:
    """verl's reward worker (the class its Ray actors run) from the composed training config."""
    settings = RunSettings(model=str(TOKENIZER), evaluator="embedded")
    return RewardLoopWorker(compose_config(build_overrides(run, settings) + list(extra)))


def row(problem: LeetCodeProblem, response: str, ground_truth: str, **extra_info) -> dict:
    messages = [{"role": "user", "content": problem.question}]
    return {"messages": messages, "response": response, "ground_truth": ground_truth,
            "data_source": "leetcode", "extra_info": {"index": problem.task_id, **extra_info}}


async def test_scores_through_verl_reward_loop(problems, reward_env, capsys):
    area, keys = problems["maximum-area-of-longest-diagonal-rectangle"], problems["number-of-changing-keys"]
    rows = [
        row(area, answer(area.reference), call_ground_truth(area), split="train"),
        row(keys, answer(keys.stdin_program()), stdin_ground_truth(keys), split="train"),
        row(area, answer(wrong_program(area)), call_ground_truth(area), split="train"),
        row(keys, THINK + "I could not find a working approach this time.\n", stdin_ground_truth(keys), split="train"),
        row(area, answer(area.reference), call_ground_truth(area, spoil_last=True), prev_best_pass_rate=0.5),
        row(area, answer(area.reference), call_ground_truth(area), is_val=True),
        row(keys, answer(wrong_program(keys)), call_ground_truth(keys), is_val=True),
    ]
    worker = worker_for("cobalt", "+reward.reward_kwargs.log_every=5")
    assert isinstance(worker.reward_manager, CobaltRewardManager)
    data = build_batch(worker.input_tokenizer, rows)

    outputs = await worker.compute_score_batch(data)

    scores = [out["reward_score"] for out in outputs]
    infos = [out["reward_extra_info"] for out in outputs]
    assert [info["reward_failed"] for info in infos] == [0] * len(rows), [info["reason"] for info in infos]
    assert scores[0] == 1.0 and scores[1] == 1.0, "correct programs in the paper's format"
    assert scores[2] < 0 and infos[2]["pass_rate"] == 0.0, "a wrong program"
    # p = 0: -0.1, plus 0.075 * tanh(43 / 1024) and 0.005 for each of "but", "wrong", "verify"
    assert scores[2] == pytest.approx(FAILING_SCORE, abs=1e-9)
    assert infos[2]["think_tokens"] == THINK_TOKENS
    assert scores[3] == -1.0 and infos[3]["has_code"] == 0, "no code block"
    # 3 of 4 tests after a best of 0.5: 0.2 + 0.1 * (0.75 - 0.5) / (1 - 0.5), no format penalty
    assert infos[4]["pass_rate"] == 0.75 and scores[4] == pytest.approx(0.25)
    assert scores[5:] == [1.0, 0.0], "validation rows score 1 or 0"
    assert [info["is_val"] for info in infos] == [0, 0, 0, 0, 0, 1, 1]

    # What verl does next: the score on each response's last valid token, and the
    # extra info stacked key by key with the first row's keys.
    rm_scores = CobaltRewardManager.assemble_rm_scores(data, scores)
    last = data.batch["attention_mask"][:, data.batch["prompts"].shape[1]:].sum(dim=1) - 1
    assert rm_scores.sum(dim=1).tolist() == pytest.approx(scores)
    assert rm_scores[torch.arange(len(rows)), last].tolist() == pytest.approx(scores)
    assert all(tuple(info) == REWARD_INFO_KEYS for info in infos)
    stacked = {key: np.array([info[key] for info in infos]) for key in infos[0]}
    assert stacked["acc"].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]

    # The manager's log line after the 5 training rows (validation rows are not counted):
    # 4 programs judged on 4 tests each, the no-code row has none.
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cobalt reward:")]
    mean_score = (1.0 + 1.0 + FAILING_SCORE - 1.0 + 0.25) / 5
    assert lines == [lines[0]] and lines[0].startswith(
        "cobalt reward: 5 training responses judged (4 with a program, 16 tests run, 0 failed, "
        "0 not evaluated: infrastructure); "
        f"means: score {mean_score:.3f}, correctness ")


async def test_paper_shim_with_verls_naive_manager(problems, reward_env):
    """``custom_reward_function.path=code_reward_func_think.py`` with verl's stock manager."""
    area = problems["maximum-area-of-longest-diagonal-rectangle"]
    worker = worker_for(
        "single-turn",
        f"reward.custom_reward_function.path={REPO / 'code_reward_func_think.py'}",
        "reward.reward_manager.source=register",
        "reward.reward_manager.name=naive",
    )
    rows = [
        row(area, answer(area.reference), call_ground_truth(area)),
        row(area, answer(wrong_program(area)), call_ground_truth(area), is_val=True),
    ]
    outputs = await worker.compute_score_batch(build_batch(worker.input_tokenizer, rows))
    assert [out["reward_score"] for out in outputs] == [1.0, 0.0]


@pytest.mark.parametrize("profile,val_score", [("paper", -1.0), ("cobalt", 0.0)])
async def test_timed_out_row_scores_as_failed(problems, reward_env, profile, val_score):
    """Past the manager's timeout the reward function itself has failed: -1 in training; in
    validation -1 in paper (the original's manager) and 0 in cobalt. The batch goes on."""
    area = problems["maximum-area-of-longest-diagonal-rectangle"]
    worker = worker_for("cobalt", "++reward.reward_kwargs.timeout_s=0.001", f"++reward.reward_kwargs.profile={profile}")
    slow = "import time\ntime.sleep(3)\n" + area.reference
    rows = [
        row(area, answer(slow), call_ground_truth(area)),
        row(area, answer(slow), call_ground_truth(area), is_val=True),
    ]
    outputs = await worker.compute_score_batch(build_batch(worker.input_tokenizer, rows))
    assert [out["reward_score"] for out in outputs] == [-1.0, val_score]
    assert [out["reward_extra_info"]["reward_failed"] for out in outputs] == [1, 1]
    assert all(out["reward_extra_info"]["reason"] == "timeout" for out in outputs)


async def test_timed_out_evaluation_is_shaped_as_pass_rate_zero(problems, reward_env, monkeypatch):
    """Regression: the evaluator gives up on a slow program inside the reward function; the row
    scores as pass rate 0 with the usual shaping (paper, METHOD §9), not -1; 0 in validation."""
    monkeypatch.setenv("COBALT_EVAL_TIMEOUT", "1")
    reset_client()
    area = problems["maximum-area-of-longest-diagonal-rectangle"]
    slow = "import time\ntime.sleep(3)\n" + area.reference
    rows = [
        row(area, answer(slow), call_ground_truth(area), split="train"),
        row(area, answer(slow), call_ground_truth(area), split="train", prev_best_pass_rate=0.5),
        row(area, answer(slow), call_ground_truth(area), is_val=True),
    ]
    worker = worker_for("cobalt")
    outputs = await worker.compute_score_batch(build_batch(worker.input_tokenizer, rows))
    scores = [out["reward_score"] for out in outputs]
    # b = 0.5, p = 0: the reward is replaced by -0.1 + 0.1 * (0 - 0.5) / 0.5 = -0.2, then the format term
    assert scores == pytest.approx([FAILING_SCORE, FAILING_SCORE - 0.1, 0.0], abs=1e-9)
    assert [out["reward_extra_info"]["pass_rate"] for out in outputs] == [0.0, 0.0, 0.0]
    assert all("timed out" in out["reward_extra_info"]["reason"] for out in outputs)
    # a timeout of the program is scored as the original scores it, never counted as an infrastructure error
    assert [out["reward_extra_info"]["infra_failed"] for out in outputs] == [0, 0, 0]


async def test_manager_stops_when_evaluations_cannot_run(problems, reward_env, monkeypatch, tmp_path, capsys):
    """No bubblewrap on PATH: every evaluation fails to run. The rows keep the original's score, the
    manager's log line counts them, and above the share (5% by default) the run stops with one line."""
    from cobalt.execution import local, sandbox
    from cobalt.health import InfrastructureError

    monkeypatch.setenv("PATH", str(tmp_path))
    sandbox.check_sandbox.cache_clear()
    monkeypatch.setattr(local, "_SANDBOX_VERSION", None)
    area = problems["maximum-area-of-longest-diagonal-rectangle"]
    worker = worker_for("cobalt", "+reward.reward_kwargs.log_every=4")
    rows = [row(area, answer(area.reference), call_ground_truth(area), split="train") for _ in range(4)]
    try:
        with pytest.raises(InfrastructureError) as caught:
            await worker.compute_score_batch(build_batch(worker.input_tokenizer, rows))
    finally:
        sandbox.check_sandbox.cache_clear()
    assert str(caught.value) == (
        "cobalt reward: stopped: 4 of the last 4 training responses could not be evaluated (more than 5%: the "
        "evaluator or the sandbox is failing); fix it and resume from the last checkpoint")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cobalt reward:")]
    assert len(lines) == 1 and "4 failed, 4 not evaluated: infrastructure" in lines[0]


async def test_manager_goes_on_at_or_below_the_share(problems, reward_env):
    """One window of good rows: nothing counted, no stop; a share of 0 would stop at the first failure."""
    area = problems["maximum-area-of-longest-diagonal-rectangle"]
    worker = worker_for("cobalt", "+reward.reward_kwargs.log_every=2", "+reward.reward_kwargs.max_infra_share=0.5")
    rows = [row(area, answer(area.reference), call_ground_truth(area), split="train") for _ in range(2)]
    outputs = await worker.compute_score_batch(build_batch(worker.input_tokenizer, rows))
    assert [out["reward_score"] for out in outputs] == [1.0, 1.0]
    assert [out["reward_extra_info"]["infra_failed"] for out in outputs] == [0, 0]


@pytest.mark.parametrize(
    "kwargs,profile,timeout_s",
    [
        ({}, "paper", 300.0),  # the original's manager waits 300 s per row
        ({"profile": "cobalt"}, "cobalt", 120.0),
        ({"profile": "paper", "timeout_s": 45}, "paper", 45.0),
    ],
)
def test_manager_defaults_by_profile(monkeypatch, kwargs, profile, timeout_s):
    from omegaconf import OmegaConf

    monkeypatch.delenv("COBALT_PROFILE", raising=False)
    manager = CobaltRewardManager(OmegaConf.create({"reward": {"reward_kwargs": kwargs}}), tokenizer=None)
    assert (manager.profile.value, manager.timeout_s, manager.passes_profile) == (profile, timeout_s, True)
    assert manager.log_every == 64
