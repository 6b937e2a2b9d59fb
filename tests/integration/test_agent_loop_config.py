"""GRPO-MT / VeRPO-MT: composed with verl 0.9.1's Hydra config, the agent loop resolved as verl does, and the data."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the pinned verl (pip install -e .[train])")

from omegaconf import OmegaConf  # noqa: E402

from cobalt.cli import main  # noqa: E402
from cobalt.verl_plugin.runs import RUNS, build_overrides, compose_config  # noqa: E402

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"
PROBLEMS = REPO / "tests" / "fixtures" / "trajectories" / "problems.jsonl"


@pytest.mark.parametrize("run,reward", [("grpo-mt", "shaped"), ("verpo-mt", "verpo")])
def test_the_agent_loop_is_registered_and_built_as_verl_does(run, reward):
    import hydra
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.import_utils import resolve_config_path

    from cobalt.training_data.verl_datasets import MULTITURN_AGENT_NAME

    cfg = compose_config(build_overrides(run))
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert rollout.multi_turn.max_assistant_turns == 3 and rollout.n == 16
    # Same batch sizes, KL and clipping as Cobalt.
    cobalt = compose_config(build_overrides("cobalt"))
    for key in ("data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
                "actor_rollout_ref.actor.kl_loss_coef", "actor_rollout_ref.actor.kl_loss_type",
                "actor_rollout_ref.actor.clip_ratio_low", "actor_rollout_ref.actor.clip_ratio_high",
                "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.model.path", "trainer.n_gpus_per_node"):
        assert OmegaConf.select(cfg, key) == OmegaConf.select(cobalt, key), key
    # verl's AgentLoopWorker: load the YAML, register by name, instantiate the class from _target_.
    entries = OmegaConf.load(resolve_config_path(rollout.agent.agent_loop_config_path))
    assert [e.name for e in entries] == [MULTITURN_AGENT_NAME] and entries[0].reward == reward
    target = hydra.utils.get_class(entries[0]._target_)
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    assert issubclass(target, AgentLoopBase) and RUNS[run].agent_loop in rollout.agent.agent_loop_config_path


def test_multiturn_rows_load_in_verl(tmp_path):
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = tmp_path / "multiturn"
    assert main(["make-verl-data", "--kind", "multiturn", "--train", str(PROBLEMS), "--val", str(PROBLEMS),
                 "--out-dir", str(out), "--tokenizer", str(DATA / "qwen3_tokenizer"), "--no-progress"]) == 0
    cfg = compose_config(build_overrides("grpo-mt"))
    dataset = RLHFDataset(data_files=[str(out / "train.parquet")],
                          tokenizer=AutoTokenizer.from_pretrained(str(DATA / "qwen3_tokenizer")), config=cfg.data)
    records = [json.loads(line) for line in PROBLEMS.read_text().splitlines()]
    assert len(dataset) == len(records)
    item = dataset[0]
    assert item["agent_name"] == "cobalt_multiturn"
    public = json.loads(item["extra_info"]["public_test_cases"])
    truth = json.loads(item["reward_model"]["ground_truth"])
    source_public = json.loads(records[0]["public_test_cases"])
    source_hidden = json.loads(records[0]["hidden_test_cases"])
    assert public["inputs"] == source_public["inputs"]
    assert truth["inputs"] == source_public["inputs"] + source_hidden["inputs"]
    assert item["raw_prompt"][-1]["role"] == "user"
