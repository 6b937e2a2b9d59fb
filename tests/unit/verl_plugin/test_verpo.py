"""VeRPO's test weights, dense reward and group store on pass statistics computed by hand."""
from __future__ import annotations

import asyncio

import pytest

from cobalt.verl_plugin.verpo import (
    LocalStoreClient,
    PassStatistics,
    VerpoGroupStore,
    dense_reward,
    difficulty_weights,
    verpo_reward,
)


def test_weights_from_one_group():
    # 4 rollouts, 3 tests passed 4, 2 and 0 times; Laplace: rho = 5/6, 3/6, 1/6; d = 1/6, 3/6, 5/6; sum 9/6.
    assert difficulty_weights([4, 2, 0], 4) == pytest.approx([1 / 9, 3 / 9, 5 / 9])
    # harder tests weigh more, weights sum to 1
    assert sum(difficulty_weights([7, 1, 3, 3], 8)) == pytest.approx(1.0)


def test_weights_without_data_are_uniform_and_bad_counts_are_refused():
    assert difficulty_weights([0, 0, 0, 0], 0) == pytest.approx([0.25] * 4)
    with pytest.raises(ValueError):
        difficulty_weights([5], 4)
    with pytest.raises(ValueError):
        difficulty_weights([1], 4, prior=0)


def test_decayed_statistics_across_two_steps():
    stats = PassStatistics()
    stats.fold([[True, True, False], [True, False, False], [True, True, False], [True, False, False]], decay=0.5)
    assert (stats.trials, stats.passes) == (4, [4, 2, 0])
    stats.fold([[True, True, True], [False, False, False], [True, True, True], [False, False, False]], decay=0.5)
    # M = 0.5*4 + 4 = 6; C = [0.5*4+2, 0.5*2+2, 0+2] = [4, 3, 2]; rho = 5/8, 4/8, 3/8; d = 3/8, 4/8, 5/8
    assert (stats.trials, stats.passes) == (6, [4, 3, 2])
    assert difficulty_weights(stats.passes, stats.trials) == pytest.approx([3 / 12, 4 / 12, 5 / 12])


def test_dense_and_combined_reward():
    w = [1 / 9, 3 / 9, 5 / 9]
    assert dense_reward([True, True, False], w) == pytest.approx(4 / 9)
    parts = verpo_reward([True, True, False], w, lam=0.5)
    assert parts == pytest.approx({"score": 2 / 9, "dense": 4 / 9, "outcome": 0.0})
    assert verpo_reward([True, True, True], w)["score"] == pytest.approx(1.0)
    assert verpo_reward([False, False, False], w)["score"] == 0.0
    # passing only the hardest test beats passing only the easiest one
    assert verpo_reward([False, False, True], w)["score"] > verpo_reward([True, False, False], w)["score"]
    with pytest.raises(ValueError):
        dense_reward([True], w)


async def test_group_members_wait_for_each_other_and_get_the_same_weights():
    store = LocalStoreClient(VerpoGroupStore())
    vectors = [[True, True, False], [True, False, False], [True, True, False], [True, False, False]]
    results = await asyncio.gather(*(store.submit("p1", "uid-1", v, 4, 60.0) for v in vectors))
    for got in results:
        assert got["weights"] == pytest.approx([1 / 9, 3 / 9, 5 / 9]) and got["group_members"] == 4
    # decay 0 (default): the next group of the same problem is weighed on its own
    again = await asyncio.gather(*(store.submit("p1", "uid-2", [True, True, True], 2, 60.0) for _ in range(2)))
    assert again[0]["weights"] == pytest.approx([1 / 3] * 3)
    assert (await store.statistics("p1"))["trials"] == 2


async def test_incomplete_group_closes_after_its_timeout_and_late_members_are_not_counted():
    store = LocalStoreClient(VerpoGroupStore())
    first = await asyncio.gather(*(store.submit("p", "g", v, 3, 0.2) for v in ([True, False], [False, False])))
    # two of three members: rho = (1+1)/4, (0+1)/4 -> d = 1/2, 3/4 -> w = 2/5, 3/5
    assert first[0]["weights"] == pytest.approx([0.4, 0.6]) and first[0]["group_members"] == 2
    late = await store.submit("p", "g", [True, True], 3, 0.2)
    assert late["late"] and late["weights"] == pytest.approx([0.4, 0.6])
    assert (await store.statistics("p"))["trials"] == 2


def test_store_as_a_named_ray_actor_is_shared(tmp_path):
    pytest.importorskip("ray")
    from cobalt.verl_plugin.verpo import RayStoreClient
    from support.ray_cluster import RayCluster

    with RayCluster(tmp_path / "ray", num_cpus=1) as cluster:
        cluster.connect(namespace="cobalt-test")
        a = RayStoreClient.get_or_create(name="verpo_test_store")
        b = RayStoreClient.get_or_create(name="verpo_test_store")  # a second worker attaches to the same actor

        async def both():
            return await asyncio.gather(a.submit("p", "g", [True, False, False], 2, 60.0),
                                        b.submit("p", "g", [True, True, False], 2, 60.0))

        got = asyncio.run(both())
        # passes 2, 1, 0 of 2: rho = 3/4, 2/4, 1/4 -> d = 1/4, 2/4, 3/4 -> w = 1/6, 2/6, 3/6
        assert got[0]["weights"] == got[1]["weights"] == pytest.approx([1 / 6, 2 / 6, 3 / 6])
