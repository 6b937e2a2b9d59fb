"""The GRPO-MT / VeRPO-MT agent loop, turn by turn, with real tokenization and real execution (CPU).

The agent loop is built exactly as verl's ``AgentLoopWorker`` builds it: from
the training config composed with verl 0.9.1's own Hydra files (run
``grpo-mt``), the Qwen3 tokenizer and chat template, verl's Continuous Token
builder for Qwen3. Programs run in the embedded bubblewrap evaluator on a real
LeetCode problem (stdin variant: 4 public tests, the rest hidden).

Generation comes from stand-ins for verl's LLM server client (the same
``generate(request_id, *, prompt_ids, sampling_params, ...) -> TokenOutput``):

- :class:`ScriptedServer` answers with the token ids of given texts (a wrong
  program, the reference program, a response without code), as a model would;
- :class:`TinyQwen3Server` samples from a tiny randomly initialised Qwen3 model.

Expected values are computed independently of the loop: the evaluator is called
directly on the same programs, the feedback text comes from
``cobalt.rollout.conversation.next_user_message``, the reward from ``cobalt.reward``.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the pinned verl (pip install -e .[train])")

import torch  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

from cobalt.data.leetcode import load_leetcode  # noqa: E402
from cobalt.execution.base import TestCases  # noqa: E402
from cobalt.execution.client import EvaluatorClient  # noqa: E402
from cobalt.prompts import problem_prompt, system_prompt  # noqa: E402
from cobalt.reward import shaped_reward  # noqa: E402
from cobalt.rollout.conversation import next_user_message  # noqa: E402
from cobalt.verl_plugin.runs import RunSettings, build_overrides, compose_config  # noqa: E402

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
TOKENIZER = DATA / "qwen3_tokenizer"
N_PUBLIC = 4
THINK = "<think>\nCount the positions where the lower-cased key differs from the previous one. But verify.\n</think>\n\n"


def response_with(program: str) -> str:
    return f"{THINK}```python\n{program}\n```\nThe program reads the arguments and prints the answer."


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(TOKENIZER))


@pytest.fixture(scope="module")
def problem():
    found = [p for p in load_leetcode(DATA / "leetcode" / "leetcode_problems.jsonl.gz")
             if p.task_id == "number-of-changing-keys"]
    assert len(found) == 1
    p = found[0]
    tests = p.stdin_tests()
    public = TestCases(tests.inputs[:N_PUBLIC], tests.outputs[:N_PUBLIC])
    wrong = p.stdin_program(f"class Solution:\n    def {p.fn_name}(self, *args):\n        return 0\n")
    return {
        "problem": p, "all": tests, "public": public,
        "right": response_with(p.stdin_program()), "wrong": response_with(wrong),
        "no_code": THINK + "I am not sure how to solve this, so I give no program.",
    }


@pytest.fixture
def client():
    return EvaluatorClient.embedded(max_concurrency=2)


def make_config(tmp_path, *extra: str):
    settings = RunSettings(model=str(TOKENIZER), train_files=str(tmp_path / "t.parquet"),
                           val_files=str(tmp_path / "v.parquet"))
    return compose_config(build_overrides("grpo-mt", settings) + [
        "data.max_prompt_length=4096", "actor_rollout_ref.rollout.n=4", *extra])


def make_loop(config, tokenizer, server, client, **kwargs):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from cobalt.verl_plugin.agent_loop import CobaltCodeAgentLoop

    return CobaltCodeAgentLoop(
        trainer_config=DictConfigWrap(config), server_manager=server, tokenizer=tokenizer, processor=None,
        dataset_cls=RLHFDataset, data_config=DictConfigWrap(config.data), hf_model_type="qwen3",
        evaluator_client=client, **kwargs,
    )


def row(problem, *, uid="group-1", is_val=False) -> dict:
    p = problem["problem"]
    return {
        "raw_prompt": [{"role": "system", "content": system_prompt()},
                       {"role": "user", "content": problem_prompt(p.question)}],
        "data_source": "leetcode",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(problem["all"].to_dict())},
        "extra_info": {"index": 0, "problem_id": p.task_id, "is_val": is_val,
                       "public_test_cases": json.dumps(problem["public"].to_dict())},
        "uid": uid, "agent_name": "cobalt_multiturn", "index": 0,
    }


SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


class ScriptedServer:
    """verl's ``generate`` interface answering with the tokens of scripted texts (each ends its turn).

    Like verl's server manager, each answer reports the weight version that generated it
    (``global_steps``, with ``min_``/``max_global_steps`` set to it); ``steps`` gives it per call.
    """

    def __init__(self, tokenizer, texts, steps=None):
        self.tokenizer = tokenizer
        self.texts = list(texts)
        self.steps = list(steps) if steps is not None else [1] * len(self.texts)
        self.calls: list[tuple[list[int], dict]] = []
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        self.calls.append((list(prompt_ids), dict(sampling_params)))
        text = self.texts[len(self.calls) - 1]
        ids = self.tokenizer.encode(text, add_special_tokens=False) + [self.end]
        ids = ids[: sampling_params["max_tokens"]]
        step = self.steps[len(self.calls) - 1]
        return TokenOutput(token_ids=ids, log_probs=[-0.25] * len(ids), stop_reason="completed",
                           extra_fields={"global_steps": step, "min_global_steps": step, "max_global_steps": step})

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False) + [self.end]


class TinyQwen3Server:
    """verl's ``generate`` interface over a tiny randomly initialised Qwen3 model (sampling on CPU)."""

    def __init__(self, tokenizer, seed: int = 0):
        from transformers import Qwen3Config, Qwen3ForCausalLM

        torch.manual_seed(seed)
        config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=8, tie_word_embeddings=True)
        self.model = Qwen3ForCausalLM(config).eval()
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.calls = 0

    async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput:
        self.calls += 1
        ids, out, logps = list(prompt_ids), [], []
        with torch.no_grad():
            for _ in range(sampling_params["max_tokens"]):
                logits = self.model(torch.tensor([ids])).logits[0, -1].float()
                logp = torch.log_softmax(logits / max(sampling_params["temperature"], 1e-5), dim=-1)
                token = int(torch.multinomial(logp.exp(), 1))
                out.append(token)
                logps.append(float(logp[token]))
                ids.append(token)
                if token == self.end:
                    break
        return TokenOutput(token_ids=out, log_probs=logps, stop_reason="completed")


async def public_result(client, problem, text):
    from cobalt.text import extract_code

    return await client.evaluate(extract_code(text), problem["public"])


async def test_repair_turn_then_stop_when_public_tests_pass(tmp_path, tokenizer, problem, client):
    server = ScriptedServer(tokenizer, [problem["wrong"], problem["right"]], steps=[5, 6])
    loop = make_loop(make_config(tmp_path), tokenizer, server, client)
    out = await loop.run(dict(SAMPLING), **row(problem))

    assert len(server.calls) == 2
    # The weight versions verl's trainer reads per trajectory: first and last turn's.
    assert (out.extra_fields["min_global_steps"], out.extra_fields["max_global_steps"]) == (5, 6)
    info = out.extra_fields["reward_extra_info"]
    assert (info["mt_programs"], info["mt_stop"], info["mt_first_public_pass_turn"]) == (2, "public_passed", 1)

    first, second = server.ids(problem["wrong"]), server.ids(problem["right"])
    response = out.response_ids
    assert response[: len(first)] == first and response[-len(second):] == second
    # Loss only on the policy's own tokens: the two responses; feedback and template tokens are masked.
    assert len(out.response_mask) == len(response) == len(out.response_logprobs)
    assert out.response_mask[: len(first)] == [1] * len(first)
    assert out.response_mask[-len(second):] == [1] * len(second)
    middle = response[len(first): len(response) - len(second)]
    assert middle and out.response_mask[len(first): len(response) - len(second)] == [0] * len(middle)
    assert sum(out.response_mask) == len(first) + len(second)
    # The masked part is the feedback turn, rendered by the chat template, with the rollout's repair message.
    expected_feedback = next_user_message(await public_result(client, problem, problem["wrong"]),
                                          fn_name=problem["public"].fn_name)
    assert ("the judge calls" in expected_feedback) is bool(problem["public"].fn_name)  # stdin tests here
    assert not (await public_result(client, problem, problem["wrong"])).all_passed
    feedback_text = tokenizer.decode(middle)
    assert feedback_text.startswith("\n<|im_start|>user\n") and feedback_text.endswith("<|im_start|>assistant\n")
    assert expected_feedback.strip() in feedback_text
    # The second turn continued the exact token sequence of the first.
    assert server.calls[1][0] == out.prompt_ids + response[: len(response) - len(second)]
    assert server.calls[0][0] == out.prompt_ids
    # Reward: METHOD §3 with previous best 0, of the final response on all tests.
    all_result = await client.evaluate(problem["problem"].stdin_program(), problem["all"])
    assert all_result.all_passed
    assert out.reward_score == pytest.approx(shaped_reward(problem["right"], all_result.pass_rate, 0.0))
    assert out.extra_fields["turn_scores"][-1] == 1.0


async def test_no_program_stops_at_once_and_scores_minus_one(tmp_path, tokenizer, problem, client):
    server = ScriptedServer(tokenizer, [problem["no_code"], problem["right"]])
    loop = make_loop(make_config(tmp_path), tokenizer, server, client)
    out = await loop.run(dict(SAMPLING), **row(problem))
    info = out.extra_fields["reward_extra_info"]
    assert len(server.calls) == 1 and (info["mt_programs"], info["mt_stop"]) == (1, "no_code")
    assert out.response_ids == server.ids(problem["no_code"]) and set(out.response_mask) == {1}
    assert out.reward_score == shaped_reward(problem["no_code"], None) == -1.0


async def test_runs_every_repair_turn_while_tests_fail(tmp_path, tokenizer, problem, client):
    server = ScriptedServer(tokenizer, [problem["wrong"]] * 5)
    config = make_config(tmp_path, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3")
    out = await make_loop(config, tokenizer, server, client).run(dict(SAMPLING), **row(problem))
    info = out.extra_fields["reward_extra_info"]
    assert len(server.calls) == 3 and (info["mt_programs"], info["mt_stop"]) == (3, "max_turns")
    one = server.ids(problem["wrong"])
    assert sum(out.response_mask) == 3 * len(one)
    # two feedback turns: two runs of masked tokens between three runs of policy tokens
    runs = [m for i, m in enumerate(out.response_mask) if i == 0 or m != out.response_mask[i - 1]]
    assert runs == [1, 0, 1, 0, 1]
    all_result = await client.evaluate(problem["problem"].stdin_program(
        f"class Solution:\n    def {problem['problem'].fn_name}(self, *args):\n        return 0\n"), problem["all"])
    assert out.reward_score == pytest.approx(shaped_reward(problem["wrong"], all_result.pass_rate, 0.0))
    assert info["pass_rate"] == pytest.approx(all_result.pass_rate) and all_result.pass_rate < 1.0


async def test_token_budget_ends_the_trajectory(tmp_path, tokenizer, problem, client):
    server = ScriptedServer(tokenizer, [problem["wrong"]] * 3)
    first = len(server.ids(problem["wrong"]))
    config = make_config(tmp_path, f"data.max_response_length={first + 20}")
    out = await make_loop(config, tokenizer, server, client).run(dict(SAMPLING), **row(problem))
    info = out.extra_fields["reward_extra_info"]
    # The feedback turn does not fit in the 20 tokens left: nothing is appended after the first response.
    assert len(server.calls) == 1 and info["mt_stop"] == "budget"
    assert len(out.response_ids) == first and set(out.response_mask) == {1}
    # A per-turn cap below the response: the server is asked for at most that many tokens; cut off, it stops.
    server = ScriptedServer(tokenizer, [problem["wrong"]] * 3)
    out = await make_loop(make_config(tmp_path), tokenizer, server, client, max_tokens_per_turn=first - 1).run(
        dict(SAMPLING), **row(problem))
    assert server.calls[0][1]["max_tokens"] == first - 1
    assert out.extra_fields["reward_extra_info"]["mt_stop"] in ("no_code", "truncated")


async def test_tiny_model_generates_and_every_generated_token_is_trained(tmp_path, tokenizer, problem, client):
    server = TinyQwen3Server(tokenizer)
    loop = make_loop(make_config(tmp_path), tokenizer, server, client, max_tokens_per_turn=12)
    out = await loop.run(dict(SAMPLING), **row(problem))
    info = out.extra_fields["reward_extra_info"]
    # Random tokens hold no fenced program: one turn, scored as no code.
    assert server.calls == 1 and info["mt_stop"] == "no_code" and out.reward_score == -1.0
    assert 1 <= len(out.response_ids) <= 12 and out.response_mask == [1] * len(out.response_ids)
    assert len(out.response_logprobs) == len(out.response_ids) and all(lp <= 0 for lp in out.response_logprobs)
    assert set(info) == set(__import__("cobalt.verl_plugin.agent_loop", fromlist=["INFO_KEYS"]).INFO_KEYS)


async def test_validation_rows_score_one_or_zero(tmp_path, tokenizer, problem, client):
    server = ScriptedServer(tokenizer, [problem["right"]])
    out = await make_loop(make_config(tmp_path), tokenizer, server, client).run(
        dict(SAMPLING), **row(problem, is_val=True))
    assert out.reward_score == 1.0 and out.extra_fields["reward_extra_info"]["is_val"] == 1


async def test_verpo_group_rewards_use_the_group_pass_statistics(tmp_path, tokenizer, problem, client):
    from cobalt.verl_plugin.verpo import LocalStoreClient

    store = LocalStoreClient()
    config = make_config(tmp_path, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=1")
    texts = [problem["right"], problem["wrong"], problem["wrong"], problem["no_code"]]
    loops = [make_loop(config, tokenizer, ScriptedServer(tokenizer, [t]), client, reward="verpo", verpo_store=store)
             for t in texts]
    outs = await asyncio.gather(*(loop.run(dict(SAMPLING), **row(problem, uid="g")) for loop in loops))

    # Hand computation from the verdicts, by the formula of docs/BASELINES.md (prior 1, lambda 0.5).
    wrong_code = problem["problem"].stdin_program(
        f"class Solution:\n    def {problem['problem'].fn_name}(self, *args):\n        return 0\n")
    right_v = [True] * len(problem["all"])
    wrong_v = list((await client.evaluate(wrong_code, problem["all"])).passing)
    none_v = [False] * len(problem["all"])
    vectors = [right_v, wrong_v, wrong_v, none_v]
    n = len(vectors)
    difficulty = [1 - (sum(v[j] for v in vectors) + 1) / (n + 2) for j in range(len(right_v))]
    weights = [d / sum(difficulty) for d in difficulty]
    for out, v in zip(outs, vectors):
        dense = sum(w for w, ok in zip(weights, v) if ok)
        expected = 0.5 * (1.0 if all(v) else 0.0) + 0.5 * dense
        assert out.reward_score == pytest.approx(expected)
        assert out.extra_fields["reward_extra_info"]["verpo_group_members"] == 4
    assert outs[0].reward_score == pytest.approx(1.0)
    assert 0 < outs[1].reward_score < 0.5 and outs[3].reward_score == 0.0
    assert (await store.statistics("number-of-changing-keys"))["trials"] == 4


# A program whose every line ends with an ideographic space: the paper's comparison strips it
# (str.strip), cobalt's does not, so the verdicts tell which profile the executor ran with.
IDEOGRAPHIC_END = "import builtins\n_print = builtins.print\nbuiltins.print = lambda *a, **k: _print(*a, end='\\u3000\\n')\n"


@pytest.mark.parametrize("how", ["argument", "environment"])
async def test_the_loops_profile_reaches_the_executor(tmp_path, tokenizer, problem, monkeypatch, how):
    from cobalt.reward.scoring import reset_client

    monkeypatch.setenv("COBALT_EVALUATOR", "embedded")
    text = response_with(IDEOGRAPHIC_END + problem["problem"].stdin_program())
    config = make_config(tmp_path, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=1")
    scores = {}
    for profile in ("paper", "cobalt"):
        reset_client()
        if how == "environment":
            monkeypatch.setenv("COBALT_PROFILE", profile)
        kwargs = {"profile": profile} if how == "argument" else {}
        loop = make_loop(config, tokenizer, ScriptedServer(tokenizer, [text]), None, **kwargs)  # its default client
        out = await loop.run(dict(SAMPLING), **row(problem, is_val=True))
        assert loop.client.options.profile == profile
        scores[profile] = (out.reward_score, out.extra_fields["reward_extra_info"]["mt_public_pass_rate"])
    reset_client()
    assert scores == {"paper": (1.0, 1.0), "cobalt": (0.0, 0.0)}
