"""The online multi-turn baselines (GRPO-MT, VeRPO-MT) as a verl 0.9.1 agent loop.

verl's agent-loop workers run one :class:`CobaltCodeAgentLoop` per trajectory
(``actor_rollout_ref.rollout.agent.agent_loop_config_path`` names the YAML file
that registers it; each data row picks it by its ``agent_name`` column). A
trajectory is one token sequence:

    prompt | response 1 | feedback 1 | response 2 | feedback 2 | ... | response K

1. The policy answers (at most ``max_tokens_per_turn`` new tokens, and never
   past ``data.max_response_length`` for the whole trajectory).
2. Its last fenced block runs on the problem's PUBLIC tests through
   :class:`cobalt.execution.client.EvaluatorClient`.
3. The trajectory stops when every public test passes, when the response holds
   no program, when it was cut off (no end-of-turn token), when the token
   budget is spent, or after ``actor_rollout_ref.rollout.multi_turn.max_assistant_turns``
   responses (T repair turns + 1). Otherwise the next user turn is the one of
   :mod:`cobalt.rollout.conversation` (the same step, template and rules as the
   multi-turn rollouts and the bandit prompts).

Only the policy's own tokens carry loss: ``response_mask`` is 1 on generated
tokens and 0 on feedback turns and on the chat-template tokens between turns
(verl's Continuous Token builder keeps the sequence exactly as generated).

The reward is computed here, once per trajectory, from the FINAL response's
program on ALL tests (hidden + public), and handed to verl as ``reward_score``
(verl then skips its reward workers for the row):

- ``reward: shaped`` (GRPO-MT): Cobalt's reward of METHOD §3 with previous best
  0 (:func:`cobalt.reward.compute_score`: correctness tiers and format terms;
  a final response without a program scores -1 in training);
- ``reward: verpo`` (VeRPO-MT): :func:`cobalt.verl_plugin.verpo.verpo_reward`
  with test weights from the trajectory's GRPO group (a shared store).

Validation rows (``extra_info.is_val``) score 1 when the final program passes
every test, else 0, for both.

One profile (``paper`` or ``cobalt``: the ``profile`` key of the loop's YAML,
else ``$COBALT_PROFILE``, which the training run sets for every worker, else
``paper``) rules the whole trajectory: program extraction, the executor that
judges every program (the evaluator client for that profile) and the reward.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Mapping
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from cobalt.training_data.verl_datasets import MULTITURN_AGENT_NAME
from cobalt.profile import resolve_profile
from cobalt.verl_plugin.reward import REWARD_INFO_KEYS, flatten_for_verl
from cobalt.verl_plugin.runs import DEFAULT_REPAIR_TURNS, MAX_RESPONSE_LENGTH
from cobalt.verl_plugin.verpo import (
    DEFAULT_DECAY,
    DEFAULT_GROUP_TIMEOUT_S,
    DEFAULT_LAMBDA,
    DEFAULT_PRIOR,
)

log = logging.getLogger(__name__)

AGENT_NAME = MULTITURN_AGENT_NAME
"""The ``agent_name`` of the multi-turn rows; each run's YAML maps it to a reward."""
REWARDS = ("shaped", "verpo")

# Stop reasons, in the logged ``mt_stop`` field.
STOP_PUBLIC_PASSED = "public_passed"
STOP_NO_CODE = "no_code"
STOP_TRUNCATED = "truncated"
STOP_BUDGET = "budget"
STOP_MAX_TURNS = "max_turns"
STOP_INFRA = "evaluator_failed"
"""The evaluator could not run the program: the trajectory ends there, and the failure is
never fed to the model as feedback (its reward row counts it as ``infra_failed``)."""

MT_INFO_KEYS = ("mt_programs", "mt_stop", "mt_public_pass_rate", "mt_first_public_pass_turn",
                "verpo_dense", "verpo_outcome", "verpo_group_members")
"""Keys added to the reward info of every row (after :data:`cobalt.verl_plugin.reward.REWARD_INFO_KEYS`)."""

_shared: dict[str, Any] = {}


def _default_store(decay: float, prior: float):
    key = ("store", decay, prior)
    if key not in _shared:
        from cobalt.verl_plugin.verpo import get_store

        _shared[key] = get_store(decay=decay, prior=prior)
    return _shared[key]


def merge_server_fields(kept: dict[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The rollout server's ``extra_fields`` over a trajectory's turns: the first turn's, with
    ``max_global_steps`` from the latest turn that reports one.

    verl's trainer reads ``min_global_steps`` and ``max_global_steps`` of every trajectory (the
    weight versions that generated it); its own multi-turn loop keeps them the same way.

    >>> merge_server_fields({}, {"min_global_steps": 3, "max_global_steps": 3})
    {'min_global_steps': 3, 'max_global_steps': 3}
    >>> merge_server_fields({"min_global_steps": 3, "max_global_steps": 3}, {"min_global_steps": 4, "max_global_steps": 4})
    {'min_global_steps': 3, 'max_global_steps': 4}
    """
    if not kept:
        return dict(new)
    merged = dict(kept)
    if new.get("max_global_steps") is not None:
        merged["max_global_steps"] = new["max_global_steps"]
    return merged


def _tests(obj: Any, where: str):
    from cobalt.execution.base import TestCases

    return TestCases.from_obj(obj, where=where)


class CobaltCodeAgentLoop(AgentLoopBase):
    """Generate, judge on the public tests, feed back; reward the final program on all tests."""

    def __init__(
        self,
        *args: Any,
        reward: str = "shaped",
        max_tokens_per_turn: int | None = None,
        template_dir: str | None = None,
        verpo_lambda: float = DEFAULT_LAMBDA,
        verpo_decay: float = DEFAULT_DECAY,
        verpo_prior: float = DEFAULT_PRIOR,
        verpo_group_timeout_s: float = DEFAULT_GROUP_TIMEOUT_S,
        evaluator_client: Any = None,
        verpo_store: Any = None,
        tools: Any = None,
        profile: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # An entry point: the YAML's ``profile``, else $COBALT_PROFILE (set by the run for every worker).
        self.profile = resolve_profile(profile)
        if reward not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward!r}")
        self.reward = reward
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)
        self.max_tokens_per_turn = int(max_tokens_per_turn or MAX_RESPONSE_LENGTH)
        max_turns = self.rollout_config.multi_turn.get("max_assistant_turns")
        self.max_programs = int(max_turns) if max_turns else DEFAULT_REPAIR_TURNS + 1
        if self.max_programs < 1 or self.max_tokens_per_turn < 1:
            raise ValueError("max_assistant_turns and max_tokens_per_turn must be >= 1")
        self.template_dir = template_dir
        self.verpo_lambda = float(verpo_lambda)
        self.verpo_decay = float(verpo_decay)
        self.verpo_prior = float(verpo_prior)
        self.verpo_group_timeout_s = float(verpo_group_timeout_s)
        self.group_size = int(self.rollout_config.n)
        self._client = evaluator_client
        self._store = verpo_store
        self.eos_ids = self._end_of_turn_ids()

    def _end_of_turn_ids(self) -> set[int]:
        ids = {self.tokenizer.eos_token_id}
        for token in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<｜end▁of▁sentence｜>"):
            token_id = self.tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id != self.tokenizer.unk_token_id:
                ids.add(token_id)
        return {i for i in ids if isinstance(i, int)}

    @property
    def client(self):
        """The evaluator client (given, or this process's one for the loop's profile, shared with the reward)."""
        from cobalt.reward.scoring import default_client

        return self._client if self._client is not None else default_client(self.profile)

    async def run(self, sampling_params: dict[str, Any], priority: int = 0, **kwargs: Any) -> AgentLoopOutput:
        """One trajectory: up to ``max_programs`` responses with public-test feedback between them."""
        from cobalt.reward.scoring import is_validation_row
        from cobalt.health import InfrastructureError
        from cobalt.rollout.conversation import environment_step, extend

        extra_info = dict(kwargs.get("extra_info") or {})
        where = f"row {extra_info.get('index')!r} of {kwargs.get('data_source')!r}"
        if "public_test_cases" not in extra_info:
            raise ValueError(f"{where}: extra_info.public_test_cases is missing (build the data with "
                             "`cobalt make-verl-data --kind multiturn`)")
        public = _tests(extra_info["public_test_cases"], f"{where} extra_info.public_test_cases")
        all_tests = _tests(kwargs["reward_model"]["ground_truth"], f"{where} reward_model.ground_truth")
        is_val = is_validation_row(extra_info)

        messages = [dict(m) for m in kwargs["raw_prompt"]]
        token_ids = await self.ct_build_initial_tokens(messages)
        mask: list[int] = []
        logprobs: list[float] | None = None
        request_id = uuid4().hex
        timing = {"generate": 0.0, "execute": 0.0}
        responses: list[str] = []
        public_rates: list[float] = []
        first_pass_turn = -1
        stop = STOP_MAX_TURNS
        server_fields: dict[str, Any] = {}

        for turn in range(self.max_programs):
            budget = self.response_length - len(mask)
            params = dict(sampling_params, max_tokens=min(self.max_tokens_per_turn, budget))
            started = time.perf_counter()
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=token_ids, sampling_params=params, priority=int(priority)
            )
            timing["generate"] += time.perf_counter() - started
            server_fields = merge_server_fields(server_fields, output.extra_fields or {})
            new_ids = list(output.token_ids)
            if turn == 0 and output.log_probs:
                logprobs = []  # the server reports log-probabilities: keep them aligned with the mask
            merged, mask, logprobs = await self.ct_merge_assistant_token(
                token_ids, new_ids, mask, logprobs,
                assistant_logprobs=list(output.log_probs) if logprobs is not None else None,
            )
            token_ids = merged.token_ids
            text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
            responses.append(text)

            started = time.perf_counter()
            try:
                step = await environment_step(text, public, self.client, profile=str(self.profile))
            except InfrastructureError:  # the evaluator could not run the program: never a verdict, never feedback
                timing["execute"] += time.perf_counter() - started
                public_rates.append(0.0)
                stop = STOP_INFRA
                break
            if step.no_code:
                stop = STOP_NO_CODE
                break
            timing["execute"] += time.perf_counter() - started
            rate = sum(step.public["passing"]) / len(step.public["passing"])
            public_rates.append(rate)
            if rate == 1.0:
                first_pass_turn, stop = turn, STOP_PUBLIC_PASSED
                break
            if not new_ids or new_ids[-1] not in self.eos_ids:
                stop = STOP_TRUNCATED
                break
            if turn + 1 >= self.max_programs:
                stop = STOP_MAX_TURNS
                break
            if len(mask) >= self.response_length:
                stop = STOP_BUDGET
                break
            # the token sequence holds the whole response, so the history does too (no thinking cut)
            updated = extend(messages, text, step.public, no_code=False, enable_thinking=False,
                             template_dir=self.template_dir, fn_name=public.fn_name, profile=str(self.profile))
            previous = updated[:-1]
            merged, new_mask, new_logprobs = await self.ct_merge_context_msg(previous, updated, token_ids, mask, logprobs)
            if len(new_mask) >= self.response_length:
                stop = STOP_BUDGET
                break
            messages, token_ids, mask, logprobs = updated, merged.token_ids, new_mask, new_logprobs

        started = time.perf_counter()
        score, info = await self._score(kwargs, extra_info, responses[-1], all_tests, is_val)
        score_s = time.perf_counter() - started
        info.update({
            "mt_programs": len(responses),
            "mt_stop": stop,
            "mt_public_pass_rate": public_rates[-1] if public_rates else 0.0,
            "mt_first_public_pass_turn": first_pass_turn,
        })
        info = {key: info.get(key) for key in INFO_KEYS}

        n_response = len(mask)
        prompt_ids = token_ids[: len(token_ids) - n_response]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=token_ids[len(prompt_ids):][: self.response_length],
            response_mask=mask[: self.response_length],
            response_logprobs=logprobs[: self.response_length] if logprobs else None,
            reward_score=score,
            num_turns=2 * len(responses),
            metrics=AgentLoopMetrics(generate_sequences=timing["generate"], tool_calls=timing["execute"],
                                     compute_score=score_s),
            extra_fields={**server_fields, "reward_extra_info": info, "turn_scores": public_rates, "tool_rewards": []},
        )

    async def _score(self, kwargs: Mapping[str, Any], extra_info: dict, final: str, all_tests, is_val: bool):
        """``(score, info)`` of the final response on all tests."""
        if self.reward == "shaped":
            from cobalt.reward import compute_score

            result = await compute_score(
                data_source=kwargs.get("data_source"), solution_str=final, ground_truth=all_tests.to_dict(),
                extra_info={**extra_info, "prev_best_pass_rate": 0.0}, client=self.client, profile=self.profile,
            )
            info = flatten_for_verl(result)
            return info["score"], info
        return await self._verpo_score(kwargs, extra_info, final, all_tests, is_val)

    async def _verpo_score(self, kwargs: Mapping[str, Any], extra_info: dict, final: str, all_tests, is_val: bool):
        from cobalt.text import extract_code
        from cobalt.verl_plugin.verpo import verpo_reward

        code = extract_code(final, self.profile)
        reason = ""
        if code is None:
            passing, reason = [False] * len(all_tests), "no code block"
        else:
            result = await self.client.evaluate(code, all_tests)
            passing = list(result.passing)
            if result.error is not None or len(passing) != len(all_tests):
                reason = f"evaluation failed: {result.error or 'wrong verdict count'}"
                passing = [False] * len(all_tests)
        pass_rate = sum(passing) / len(passing) if passing else 0.0
        row = {"pass_rate": pass_rate, "acc": 1.0 if pass_rate == 1.0 else 0.0, "has_code": code is not None,
               "is_val": is_val, "n_tests": len(all_tests), "prev_best_pass_rate": 0.0, "reason": reason}
        if is_val:
            info = flatten_for_verl({"score": row["acc"], **row})
            return info["score"], info
        store = self._store if self._store is not None else _default_store(self.verpo_decay, self.verpo_prior)
        key = str(extra_info.get("problem_id") or f"{kwargs.get('data_source')}:{extra_info.get('index')}")
        group_id = str(kwargs.get("uid") or key)
        met = await store.submit(key, group_id, passing, self.group_size, self.verpo_group_timeout_s)
        parts = verpo_reward(passing, met["weights"], self.verpo_lambda)
        info = flatten_for_verl({"score": parts["score"], "correctness": parts["outcome"], **row})
        info.update(verpo_dense=parts["dense"], verpo_outcome=parts["outcome"],
                    verpo_group_members=float(met["group_members"]))
        return info["score"], info


INFO_KEYS = (*REWARD_INFO_KEYS, *MT_INFO_KEYS)
"""Every row's reward info carries exactly these keys, in this order."""
