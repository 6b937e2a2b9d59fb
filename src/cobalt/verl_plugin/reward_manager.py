"""Cobalt's reward manager for verl 0.9.1's reward loop.

Loaded by verl through its public ``importlib`` source (nothing is registered
at import time)::

    reward.reward_manager.source=importlib
    reward.reward_manager.name=CobaltRewardManager
    reward.reward_manager.module.path=pkg://cobalt.verl_plugin.reward_manager

What it adds to verl's ``naive`` manager, which it otherwise mirrors (decode the
valid response tokens, pass ``data_source``, ``ground_truth`` and ``extra_info``
to the reward function, keep the result's keys as extra info):

- a bound on the evaluations in flight in one reward worker
  (``reward.reward_kwargs.max_concurrent``, default 8: with verl's 8 reward
  workers that is the paper's 64 at a time), built inside the running loop;
- a timeout per row (``reward.reward_kwargs.timeout_s``, default 120 s: the
  evaluator's own 30 s per program plus queueing);
- a row whose scoring raised or timed out scores -1 in training and 0 in
  validation (``extra_info["is_val"]``), with ``reward_failed=1`` in its extra
  info, so one row can never fail the batch;
- the same extra-info keys on every row (:data:`cobalt.verl_plugin.reward.REWARD_INFO_KEYS`),
  which verl needs to stack a batch, whatever the reward function returned.

verl 0.9.1 sends each finished rollout to a reward worker on its own (streaming
reward, overlapped with generation), so there is no batch to group evaluator
requests by here; the bound above is what keeps the evaluator busy but not flooded.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from cobalt.verl_plugin.reward import flatten_for_verl

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_TIMEOUT_S = 120.0
TRAIN_FAILURE_SCORE = -1.0
VAL_FAILURE_SCORE = 0.0


class CobaltRewardManager(RewardManagerBase):
    """Scores single rows with an async reward function, bounded, timed out, never raising."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **_: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        if compute_score is None:
            from cobalt.verl_plugin.reward import compute_score as cobalt_compute_score

            compute_score = cobalt_compute_score
        self.compute_score = compute_score
        self.is_async = inspect.iscoroutinefunction(compute_score)
        settings = _reward_kwargs(config)
        self.max_concurrent = int(settings.get("max_concurrent", DEFAULT_MAX_CONCURRENT))
        self.timeout_s = float(settings.get("timeout_s", DEFAULT_TIMEOUT_S))
        if self.max_concurrent < 1 or self.timeout_s <= 0:
            raise ValueError(
                f"reward.reward_kwargs: max_concurrent must be >= 1 and timeout_s > 0, "
                f"got {self.max_concurrent} and {self.timeout_s}"
            )
        self._semaphore: asyncio.Semaphore | None = None
        self._semaphore_loop: asyncio.AbstractEventLoop | None = None

    def _bound(self) -> asyncio.Semaphore:
        """The per-worker semaphore, made in (and for) the running event loop."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._semaphore_loop is not loop:
            self._semaphore = asyncio.Semaphore(self.max_concurrent)
            self._semaphore_loop = loop
        return self._semaphore

    async def run_single(self, data: DataProto) -> dict:
        """Score the last sequence of ``data``; returns ``{"reward_score", "reward_extra_info"}``."""
        item = data[-1:][0]
        response_ids = item.batch["responses"]
        valid_length = int(item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        valid_ids = response_ids[:valid_length]
        response = await asyncio.to_thread(self.tokenizer.decode, valid_ids, skip_special_tokens=True)

        data_source = item.non_tensor_batch["data_source"]
        ground_truth = item.non_tensor_batch["reward_model"]["ground_truth"]
        extra_info = dict(item.non_tensor_batch.get("extra_info") or {})
        is_val = bool(extra_info.get("is_val", False))

        async with self._bound():
            try:
                result = await asyncio.wait_for(
                    self._call(data_source, response, ground_truth, extra_info), timeout=self.timeout_s
                )
            except Exception as exc:  # noqa: BLE001 - any failure of one row must not fail the batch
                reason = "timeout" if isinstance(exc, asyncio.TimeoutError) else f"{type(exc).__name__}: {exc}"
                log.warning("reward failed for a row of %s (%s); scoring it as failed", data_source, reason)
                score = VAL_FAILURE_SCORE if is_val else TRAIN_FAILURE_SCORE
                extra = flatten_for_verl({"score": score, "is_val": is_val, "reason": reason}, failed=True)
                return {"reward_score": score, "reward_extra_info": extra}
        extra = flatten_for_verl(result)
        return {"reward_score": extra["score"], "reward_extra_info": extra}

    async def _call(self, data_source: Any, response: str, ground_truth: Any, extra_info: dict) -> Any:
        kwargs = dict(data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra_info)
        if self.is_async:
            return await self.compute_score(**kwargs)
        return await asyncio.to_thread(self.compute_score, **kwargs)


def _reward_kwargs(config: Any) -> dict:
    """``config.reward.reward_kwargs`` as a plain dict (empty when absent)."""
    reward_cfg = config.get("reward") if hasattr(config, "get") else None
    found = reward_cfg.get("reward_kwargs") if reward_cfg is not None else None
    return dict(found or {})
