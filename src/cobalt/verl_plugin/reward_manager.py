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
- a timeout per row (``reward.reward_kwargs.timeout_s``; default 300 s in the
  ``paper`` profile, as the original's manager, 120 s in ``cobalt``: the
  evaluator's own budget per program plus queueing, so that a hung row holds
  up a training step for two minutes, not five);
- a row whose reward function raised or ran past that timeout scores -1, in
  ``paper`` also in validation (the original), in ``cobalt`` 0 in validation
  (``extra_info["is_val"]``), with ``reward_failed=1`` in its extra info, so
  one row can never fail the batch. (A failed *evaluation* is not such a row:
  the reward function scores it with pass rate 0, see :mod:`cobalt.reward.scoring`.)
- the profile (``reward.reward_kwargs.profile``, else ``$COBALT_PROFILE``, else
  ``paper``), passed on to the reward function when it takes a ``profile``
  keyword (ours does);
- the same extra-info keys on every row (:data:`cobalt.verl_plugin.reward.REWARD_INFO_KEYS`),
  which verl needs to stack a batch, whatever the reward function returned;
- a log line every ``reward.reward_kwargs.log_every`` training rows (default 64;
  0: none) with how many responses this worker judged and the means of the
  score and its components since the last line
  (:class:`cobalt.verl_plugin.reward.RewardTally`): verl 0.9.1 reports the
  components of validation rows only. Printed, so Ray forwards it to the
  trainer's console log. The line counts the rows whose evaluation could not run
  (``infra_failed``: the evaluator or the sandbox failed; such a row keeps the
  original's score, a timeout of the program's own tests is not one);
- a stop when the evaluator keeps failing: when more than
  ``reward.reward_kwargs.max_infra_share`` (default 5%, :data:`DEFAULT_MAX_INFRA_SHARE`)
  of a window of ``log_every`` training rows (64 when logging is off) could not
  be evaluated, :class:`cobalt.health.InfrastructureError` is raised with one
  line, which stops the training run instead of training on rewards that
  measure a broken sandbox;

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

from cobalt.health import InfrastructureError
from cobalt.defaults import REWARD_MANAGER_TIMEOUT_S
from cobalt.profile import resolve_profile
from cobalt.reward.scoring import failure_score
from cobalt.verl_plugin.reward import RewardTally, flatten_for_verl

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT = 8
DEFAULT_LOG_EVERY = 64
"""Training rows per reward-component log line of one reward worker (``reward.reward_kwargs.log_every``)."""
DEFAULT_MAX_INFRA_SHARE = 0.05
"""Largest share of a window of training rows whose evaluation may fail to run before the run stops."""
DEFAULT_TIMEOUT_S = REWARD_MANAGER_TIMEOUT_S
"""Per-row timeout by profile when ``reward.reward_kwargs.timeout_s`` is not set."""


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
        self.profile = resolve_profile(settings.get("profile"))
        self.max_concurrent = int(settings.get("max_concurrent", DEFAULT_MAX_CONCURRENT))
        timeout_s = settings.get("timeout_s")
        self.timeout_s = float(DEFAULT_TIMEOUT_S[self.profile.value] if timeout_s is None else timeout_s)
        self.passes_profile = _accepts_keyword(compute_score, "profile")
        self.log_every = int(settings.get("log_every", DEFAULT_LOG_EVERY))
        self.max_infra_share = float(settings.get("max_infra_share", DEFAULT_MAX_INFRA_SHARE))
        if self.max_concurrent < 1 or self.timeout_s <= 0 or self.log_every < 0:
            raise ValueError(
                f"reward.reward_kwargs: max_concurrent must be >= 1, timeout_s > 0 and log_every >= 0, "
                f"got {self.max_concurrent}, {self.timeout_s} and {self.log_every}"
            )
        if not 0.0 <= self.max_infra_share < 1.0:
            raise ValueError(f"reward.reward_kwargs.max_infra_share must be in [0, 1), got {self.max_infra_share}")
        self.tally = RewardTally()
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
                score = failure_score(is_val, self.profile)
                extra = flatten_for_verl({"score": score, "is_val": is_val, "reason": reason}, failed=True)
                self._count(extra)
                return {"reward_score": score, "reward_extra_info": extra}
        extra = flatten_for_verl(result)
        self._count(extra)
        return {"reward_score": extra["score"], "reward_extra_info": extra}

    def _count(self, extra: dict) -> None:
        """Add a row to the tally; every ``log_every`` training rows print and restart it.

        Raises :class:`~cobalt.health.InfrastructureError` when more than
        ``max_infra_share`` of the window's rows could not be evaluated.
        """
        self.tally.add(extra)
        window = self.log_every or DEFAULT_LOG_EVERY
        if self.tally.rows < window:
            return
        tally, self.tally = self.tally, RewardTally()
        if self.log_every:
            print(tally.line(), flush=True)
        if tally.infra_failed > self.max_infra_share * tally.rows:
            raise InfrastructureError(
                f"cobalt reward: stopped: {tally.infra_failed} of the last {tally.rows} training responses could not "
                f"be evaluated (more than {self.max_infra_share:.0%}: the evaluator or the sandbox is failing); fix "
                "it and resume from the last checkpoint")

    async def _call(self, data_source: Any, response: str, ground_truth: Any, extra_info: dict) -> Any:
        kwargs = dict(data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra_info)
        if self.passes_profile:
            kwargs["profile"] = self.profile.value
        if self.is_async:
            return await self.compute_score(**kwargs)
        return await asyncio.to_thread(self.compute_score, **kwargs)


def _accepts_keyword(fn: Any, name: str) -> bool:
    """Whether ``fn`` takes keyword ``name`` (by name or through ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD or p.name == name for p in params)


def _reward_kwargs(config: Any) -> dict:
    """``config.reward.reward_kwargs`` as a plain dict (empty when absent)."""
    reward_cfg = config.get("reward") if hasattr(config, "get") else None
    found = reward_cfg.get("reward_kwargs") if reward_cfg is not None else None
    return dict(found or {})
