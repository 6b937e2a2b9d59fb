"""VeRPO's dense verifiable reward for the VeRPO-MT baseline, and the store of its test statistics.

VeRPO (Wang et al. 2026, arXiv 2601.03525) weighs each unit test by a
difficulty estimated online from how often rollouts pass it, rewards the
weighted sum of passed tests, and combines that with the pass/fail outcome.
The paper's exact formula could not be read on this project's machines; the
one implemented here (docs/BASELINES.md says why and where it may differ):

For a problem ``k`` and a GRPO group of ``N`` trajectories whose final programs
ran on the problem's ``J`` tests, ``c_j`` of them passing test ``j``:

    M   <- decay * M   + N             (trials seen, decayed per group)
    C_j <- decay * C_j + c_j           (passes of test j, decayed per group)
    rho_j = (C_j + prior) / (M + 2 * prior)       smoothed pass rate of test j
    d_j   = 1 - rho_j                             difficulty, in (0, 1)
    w_j   = d_j / sum_i d_i                       weights, sum 1

    dense   D = sum_j w_j * passed_j              in [0, 1], 1 iff every test passes
    outcome G = 1 if every test passes else 0
    reward  R = (1 - lam) * G + lam * D           (lam = 0.5: 1 for a full pass, < 0.5 otherwise)

``decay = 0`` uses the current group only (the group of rollouts the paper
estimates from); ``decay > 0`` carries statistics across training steps.

verl scores one trajectory at a time, in several agent-loop workers (Ray
actors), while the other members of its group are still generating. The group's
statistics therefore live in a shared store: :class:`VerpoGroupStore`, run as a
named Ray actor (:func:`get_store` inside a Ray job) or in-process
(:class:`LocalStoreClient`, tests and single processes). Each trajectory
submits its pass vector and waits until its whole group has reported (or a
timeout passes); then every member gets the same weights.
"""
from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Sequence

log = logging.getLogger(__name__)

DEFAULT_LAMBDA = 0.5
"""Share of the dense term in the reward (the rest is the pass/fail outcome)."""
DEFAULT_DECAY = 0.0
"""Weight of earlier steps' statistics per group (0: the current group only)."""
DEFAULT_PRIOR = 1.0
"""Pseudo-count of the smoothed pass rate (1: Laplace's rule)."""
DEFAULT_GROUP_TIMEOUT_S = 3600.0
"""How long a trajectory waits for the rest of its group before taking the statistics at hand."""
STORE_ACTOR_NAME = "cobalt_verpo_store"
STORE_NAMESPACE = "cobalt"
STORE_ENV = "COBALT_VERPO_STORE"
"""'ray' (the named actor; default inside a Ray job) or 'local' (this process)."""
FINISHED_GROUPS_KEPT = 100_000

__all__ = [
    "DEFAULT_DECAY",
    "DEFAULT_GROUP_TIMEOUT_S",
    "DEFAULT_LAMBDA",
    "DEFAULT_PRIOR",
    "LocalStoreClient",
    "RayStoreClient",
    "PassStatistics",
    "VerpoGroupStore",
    "dense_reward",
    "get_store",
    "difficulty_weights",
    "verpo_reward",
]


def difficulty_weights(passes: Sequence[float], trials: float, prior: float = DEFAULT_PRIOR) -> list[float]:
    """Difficulty weights of tests passed ``passes[j]`` times out of ``trials`` (decayed counts allowed).

    >>> [round(w, 4) for w in difficulty_weights([4, 2, 0], 4)]     # rho = 5/6, 3/6, 1/6
    [0.1111, 0.3333, 0.5556]
    >>> difficulty_weights([0, 0], 0)                               # no data: uniform
    [0.5, 0.5]
    """
    if prior <= 0:
        raise ValueError(f"prior must be > 0, got {prior}")
    if trials < 0 or any(p < 0 or p > trials + 1e-9 for p in passes):
        raise ValueError(f"passes must lie in [0, trials={trials}], got {list(passes)}")
    if not passes:
        return []
    difficulty = [1.0 - (p + prior) / (trials + 2.0 * prior) for p in passes]
    total = sum(difficulty)
    return [d / total for d in difficulty]


def dense_reward(passing: Sequence[bool], weights: Sequence[float]) -> float:
    """The weighted share of passed tests, ``sum_j w_j * passed_j``.

    >>> dense_reward([True, False, True], [0.2, 0.3, 0.5])
    0.7
    """
    if len(passing) != len(weights):
        raise ValueError(f"{len(passing)} verdicts for {len(weights)} weights")
    return float(sum(w for ok, w in zip(passing, weights) if ok))


def verpo_reward(passing: Sequence[bool], weights: Sequence[float], lam: float = DEFAULT_LAMBDA) -> dict[str, float]:
    """``{"score", "dense", "outcome"}`` of one final program: ``(1 - lam) * outcome + lam * dense``.

    >>> verpo_reward([True, True], [0.5, 0.5])["score"]
    1.0
    >>> verpo_reward([True, False], [0.25, 0.75])["score"]
    0.125
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1], got {lam}")
    dense = dense_reward(passing, weights)
    outcome = 1.0 if passing and all(passing) else 0.0
    return {"score": (1.0 - lam) * outcome + lam * dense, "dense": dense, "outcome": outcome}


@dataclass
class PassStatistics:
    """Decayed pass counts of one problem's tests."""

    trials: float = 0.0
    passes: list[float] = field(default_factory=list)

    def fold(self, group: Sequence[Sequence[bool]], decay: float) -> None:
        """Add a group's pass vectors, after scaling the earlier counts by ``decay``."""
        n_tests = len(group[0]) if group else len(self.passes)
        if any(len(row) != n_tests for row in group):
            raise ValueError("every pass vector of a group must have the same length")
        if self.passes and len(self.passes) != n_tests:
            log.warning("test count changed from %d to %d: statistics restarted", len(self.passes), n_tests)
            self.trials, self.passes = 0.0, []
        if not self.passes:
            self.passes = [0.0] * n_tests
        self.trials = decay * self.trials + len(group)
        self.passes = [decay * p + sum(bool(row[j]) for row in group) for j, p in enumerate(self.passes)]


class VerpoGroupStore:
    """Per-problem test statistics and the per-group meeting point of its trajectories.

    Runs in-process or as a Ray async actor (its methods are coroutines, so a
    waiting member does not block the others). State is built on first use.
    """

    def __init__(self, decay: float = DEFAULT_DECAY, prior: float = DEFAULT_PRIOR) -> None:
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"decay must be in [0, 1], got {decay}")
        self.decay = decay
        self.prior = prior
        self._stats: dict[str, PassStatistics] = {}
        self._open: dict[str, dict[str, Any]] = {}
        self._finished: OrderedDict[str, list[float]] = OrderedDict()

    def _finalize(self, group_id: str) -> list[float]:
        group = self._open.pop(group_id)
        stats = self._stats.setdefault(group["key"], PassStatistics())
        stats.fold(group["results"], self.decay)
        weights = difficulty_weights(stats.passes, stats.trials, self.prior)
        self._finished[group_id] = weights
        while len(self._finished) > FINISHED_GROUPS_KEPT:
            self._finished.popitem(last=False)
        group["weights"] = weights
        group["event"].set()
        return weights

    async def submit(
        self,
        key: str,
        group_id: str,
        passing: Sequence[bool],
        group_size: int,
        timeout_s: float = DEFAULT_GROUP_TIMEOUT_S,
    ) -> dict[str, Any]:
        """Report one trajectory's pass vector; return its group's weights once the group is complete.

        ``key`` names the problem (statistics across steps), ``group_id`` the
        GRPO group (verl's ``uid``), ``group_size`` how many members to wait
        for. After ``timeout_s`` the group is closed with the members at hand.
        A member arriving after its group closed gets the group's weights and
        is not counted. Returns ``{"weights", "group_members", "late"}``.
        """
        if group_id in self._finished:
            return {"weights": list(self._finished[group_id]), "group_members": 0, "late": True}
        group = self._open.get(group_id)
        if group is None:
            group = {"key": key, "results": [], "event": asyncio.Event(), "weights": None}
            self._open[group_id] = group
        group["results"].append([bool(x) for x in passing])
        members = len(group["results"])
        if members >= group_size:
            weights = self._finalize(group_id)
            return {"weights": list(weights), "group_members": members, "late": False}
        try:
            await asyncio.wait_for(group["event"].wait(), timeout=timeout_s)
        except asyncio.TimeoutError:
            if group_id in self._open:
                log.warning("VeRPO group %s of %s: %d of %d members after %.0f s; closing it",
                            group_id, key, len(group["results"]), group_size, timeout_s)
                self._finalize(group_id)
        return {"weights": list(group["weights"]), "group_members": len(group["results"]), "late": False}

    async def statistics(self, key: str) -> dict[str, Any]:
        """``{"trials", "passes"}`` of problem ``key`` (empty when unseen)."""
        stats = self._stats.get(key)
        return {"trials": stats.trials, "passes": list(stats.passes)} if stats else {"trials": 0.0, "passes": []}


class LocalStoreClient:
    """The store in this process (tests, a single worker)."""

    def __init__(self, store: VerpoGroupStore | None = None, **kwargs: Any) -> None:
        self.store = store or VerpoGroupStore(**kwargs)

    async def submit(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`VerpoGroupStore.submit`."""
        return await self.store.submit(*args, **kwargs)

    async def statistics(self, key: str) -> dict[str, Any]:
        """See :meth:`VerpoGroupStore.statistics`."""
        return await self.store.statistics(key)


class RayStoreClient:
    """The store as a named Ray actor shared by every agent-loop worker of the job."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    @classmethod
    def get_or_create(cls, decay: float = DEFAULT_DECAY, prior: float = DEFAULT_PRIOR,
                      name: str = STORE_ACTOR_NAME) -> "RayStoreClient":
        """Attach to the job's store actor, creating it on first use (Ray must be initialised)."""
        import ray

        actor_cls = ray.remote(VerpoGroupStore)
        handle = actor_cls.options(
            name=name, namespace=STORE_NAMESPACE, get_if_exists=True, num_cpus=0, max_concurrency=100_000
        ).remote(decay=decay, prior=prior)
        return cls(handle)

    async def submit(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """See :meth:`VerpoGroupStore.submit`."""
        return await self.handle.submit.remote(*args, **kwargs)

    async def statistics(self, key: str) -> dict[str, Any]:
        """See :meth:`VerpoGroupStore.statistics`."""
        return await self.handle.statistics.remote(key)


_local: dict[str, LocalStoreClient] = {}


def get_store(decay: float = DEFAULT_DECAY, prior: float = DEFAULT_PRIOR) -> LocalStoreClient | RayStoreClient:
    """The store for this process: the named Ray actor inside a Ray job (``COBALT_VERPO_STORE=ray``,
    the default there), else one in-process store (``COBALT_VERPO_STORE=local`` or no Ray)."""
    mode = os.environ.get(STORE_ENV, "").strip().lower()
    if mode not in ("", "ray", "local"):
        raise ValueError(f"{STORE_ENV} must be 'ray' or 'local', got {mode!r}")
    if mode != "local":
        try:
            import ray

            ray_up = ray.is_initialized()
        except ImportError:
            ray_up = False
        if ray_up:
            return RayStoreClient.get_or_create(decay=decay, prior=prior)
        if mode == "ray":
            raise RuntimeError(f"{STORE_ENV}=ray but Ray is not initialised in this process")
    key = f"{decay}:{prior}"
    if key not in _local:
        _local[key] = LocalStoreClient(decay=decay, prior=prior)
    return _local[key]
