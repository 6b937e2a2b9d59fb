"""The paper's training runs composed with the pinned verl's own Hydra config (CPU, no Ray).

Checks the settings of METHOD §5 in the composed config, that verl's own
validation and typed configs accept it, that verl resolves our reward function
and manager from it, and that the launch scripts' ``--dry-run`` prints it.
"""
from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="needs the pinned verl (pip install -e .[train])")

from omegaconf import OmegaConf  # noqa: E402

from cobalt.verl_plugin.runs import RUNS, RunSettings, build_overrides, compose_config  # noqa: E402

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"

# METHOD §5, key by key in verl 0.9.1's config.
PAPER_COMMON = {
    "algorithm.adv_estimator": "grpo",
    "algorithm.use_kl_in_reward": False,
    "actor_rollout_ref.rollout.n": 16,
    "data.train_batch_size": 128,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 64,
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.optim.clip_grad": 1.0,
    "actor_rollout_ref.actor.grad_clip": 1.0,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.4,
    "actor_rollout_ref.actor.use_kl_loss": True,
    "actor_rollout_ref.actor.kl_loss_type": "mse",
    "actor_rollout_ref.actor.kl_loss_coef": 1e-4,
    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "actor_rollout_ref.actor.strategy": "fsdp",
    "actor_rollout_ref.model.enable_gradient_checkpointing": True,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.temperature": 1.0,
    "actor_rollout_ref.rollout.top_p": 1.0,
    "actor_rollout_ref.rollout.val_kwargs.temperature": 0.6,
    "actor_rollout_ref.rollout.val_kwargs.top_p": 0.95,
    "actor_rollout_ref.rollout.val_kwargs.do_sample": True,
    "data.max_response_length": 6144,
    "actor_rollout_ref.rollout.response_length": 6144,
    "trainer.n_gpus_per_node": 4,
    "trainer.nnodes": 1,
    "trainer.save_freq": 10,
    "trainer.test_freq": 10,
    "reward.custom_reward_function.path": "pkg://cobalt.verl_plugin.reward",
    "reward.custom_reward_function.name": "compute_score",
    "ray_kwargs.ray_init.runtime_env.env_vars.COBALT_EVALUATOR": "ray",
    # both original scripts (scripts/train_grpo_single_turn.sh, train_grpo_multi_turn.sh) pass
    # data.truncation="right" and do not touch filter_overlong_prompts (verl's default: off)
    "data.truncation": "right",
    "data.filter_overlong_prompts": False,
}
PAPER_PER_RUN = {
    "single-turn": {"data.max_prompt_length": 2048, "trainer.total_epochs": 4},
    "cobalt": {"data.max_prompt_length": 10240, "trainer.total_epochs": 2},
    "cobalt-perturbed": {"data.max_prompt_length": 10240, "trainer.total_epochs": 2},
    # the multi-turn baselines: the problem as prompt, a trajectory budget of 3 x 6144 + 2 x 1024 tokens
    **{run: {"data.max_prompt_length": 2048, "trainer.total_epochs": 2, "data.max_response_length": 20480,
             "actor_rollout_ref.rollout.response_length": 20480} for run in ("grpo-mt", "verpo-mt")},
}


@pytest.fixture(scope="module")
def composed() -> dict:
    """Each run composed once with default settings."""
    return {run: compose_config(build_overrides(run)) for run in RUNS}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_paper_settings_in_composed_config(composed, run):
    cfg = composed[run]
    expected = {**PAPER_COMMON, **PAPER_PER_RUN[run]}
    actual = {key: OmegaConf.select(cfg, key) for key in expected}
    assert actual == expected
    assert cfg.actor_rollout_ref.rollout.prompt_length == PAPER_PER_RUN[run]["data.max_prompt_length"]


def test_cobalt_drops_over_long_prompts_instead_of_cutting_them():
    cfg = compose_config(build_overrides("cobalt", RunSettings(profile="cobalt")))
    assert (OmegaConf.select(cfg, "data.truncation"), OmegaConf.select(cfg, "data.filter_overlong_prompts")) == \
        ("error", True)


@pytest.mark.parametrize("run", sorted(RUNS))
def test_verl_accepts_the_config(composed, run):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    cfg = composed[run]
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert need_reference_policy(cfg), "the KL loss needs the reference policy"
    assert not need_critic(cfg), "GRPO trains no critic"
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert (actor.kl_loss_type, actor.clip_ratio_high, actor.optim.lr) == ("mse", 0.4, 1e-6)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    assert (rollout.n, rollout.val_kwargs.temperature, rollout.val_kwargs.top_p) == (16, 0.6, 0.95)


def test_verl_resolves_our_reward_function_and_manager(composed):
    """verl's own loaders (as its reward workers call them) find our code through pkg:// paths."""
    from verl.trainer.ppo.reward import get_custom_reward_fn, resolve_reward_manager_cls

    from cobalt.verl_plugin import reward
    from cobalt.verl_plugin.reward_manager import CobaltRewardManager

    cfg = composed["cobalt"]
    assert resolve_reward_manager_cls(cfg) is CobaltRewardManager
    fn = get_custom_reward_fn(cfg)
    assert fn is not None and fn.args[0] is reward.compute_score  # verl wraps it in a partial
    assert inspect.iscoroutinefunction(fn.func), "verl must await it, not run it in a thread"
    # paper profile by default: no explicit timeout, so the manager waits its profile's 300 s
    assert OmegaConf.to_container(cfg.reward.reward_kwargs) == {"max_concurrent": 8, "profile": "paper"}
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.COBALT_PROFILE == "paper"
    from transformers import AutoTokenizer

    manager = CobaltRewardManager(cfg, AutoTokenizer.from_pretrained(SHARED_DATA / "qwen3_tokenizer"))
    assert (manager.profile.value, manager.timeout_s) == ("paper", 300.0)  # the original waited 300 s


def test_settings_and_later_overrides_win(tmp_path):
    settings = RunSettings(
        model=str(SHARED_DATA / "qwen3_tokenizer"),
        train_files=str(tmp_path / "t.parquet"),
        val_files=str(tmp_path / "v.parquet"),
        n_gpus_per_node=8,
        nnodes=2,
        logger=("console", "wandb"),
        output_dir=str(tmp_path / "out dir"),
        worker_env={"TIKTOKEN_CACHE_DIR": str(SHARED_DATA / "tiktoken")},
    )
    cfg = compose_config(build_overrides("cobalt", settings) + ["trainer.total_epochs=1"])
    assert cfg.trainer.total_epochs == 1
    assert (cfg.trainer.n_gpus_per_node, cfg.trainer.nnodes) == (8, 2)
    assert list(cfg.trainer.logger) == ["console", "wandb"]
    assert cfg.data.train_files == str(tmp_path / "t.parquet")
    assert cfg.trainer.default_local_dir == str(tmp_path / "out dir" / "checkpoints")
    assert cfg.trainer.experiment_name == "cobalt-qwen3_tokenizer"
    env = cfg.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.TIKTOKEN_CACHE_DIR == str(SHARED_DATA / "tiktoken")


def test_unknown_run_is_named():
    with pytest.raises(KeyError, match="single-turn"):
        build_overrides("multi-turn")


def _script_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MODEL", "TRAIN_FILE", "VAL_FILE"))}
    env["PYTHON"] = sys.executable
    env.update(extra)
    return env


def test_dry_run_prints_the_composed_config(tmp_path):
    """The launch script, run from elsewhere, prints the config without starting anything."""
    import yaml

    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_cobalt.sh"), "--dry-run", "trainer.save_freq=20"],
        cwd=tmp_path, env=_script_env(MODEL="/models/R1-Distill-Llama-8B", N_GPUS_PER_NODE="8"),
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    cfg = yaml.safe_load(result.stdout)
    assert cfg["actor_rollout_ref"]["model"]["path"] == "/models/R1-Distill-Llama-8B"
    assert cfg["trainer"]["n_gpus_per_node"] == 8
    assert cfg["trainer"]["save_freq"] == 20
    assert cfg["trainer"]["total_epochs"] == 2
    assert cfg["data"]["max_prompt_length"] == 10240
    assert cfg["data"]["train_files"] == str(REPO / "data" / "verl" / "cobalt" / "train.parquet")
    assert cfg["trainer"]["default_local_dir"] == str(REPO / "outputs" / "cobalt-R1-Distill-Llama-8B" / "checkpoints")
    assert not list(tmp_path.iterdir()), "a dry run writes nothing"


def test_dry_run_reports_a_bad_override(tmp_path):
    result = subprocess.run(
        ["bash", str(REPO / "scripts" / "train_grpo_single_turn.sh"), "--dry-run", "trainer.no_such_key=1"],
        cwd=tmp_path, env=_script_env(), capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2
    assert "no_such_key" in result.stderr


def _dry_run_gpus(tmp_path, **env):
    """n_gpus_per_node and the rollout's tensor parallel size of a dry run under ``env``."""
    import yaml

    base = _script_env(**env)
    for key in ("N_GPUS_PER_NODE", "ROLLOUT_TP", "CUDA_VISIBLE_DEVICES"):
        if key not in env:
            base.pop(key, None)
    result = subprocess.run(["bash", str(REPO / "scripts" / "train_cobalt.sh"), "--dry-run"], cwd=tmp_path,
                            env=base, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    cfg = yaml.safe_load(result.stdout)
    return cfg["trainer"]["n_gpus_per_node"], cfg["actor_rollout_ref"]["rollout"]["tensor_model_parallel_size"]


def test_gpu_count_comes_from_the_machine_when_unset(tmp_path):
    """Without N_GPUS_PER_NODE the launcher counts the GPUs this process may use."""
    assert _dry_run_gpus(tmp_path, CUDA_VISIBLE_DEVICES="0,1") == (2, 2)
    assert _dry_run_gpus(tmp_path, CUDA_VISIBLE_DEVICES="3") == (1, 1)
    assert _dry_run_gpus(tmp_path, CUDA_VISIBLE_DEVICES="0,1,2", N_GPUS_PER_NODE="8") == (8, 2)
    # The driver's own list, when CUDA_VISIBLE_DEVICES is unset (a stand-in nvidia-smi: no GPU here).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-a)'\necho 'GPU 1: NVIDIA H200 (UUID: GPU-b)'\n"
                    "echo 'GPU 2: NVIDIA H200 (UUID: GPU-c)'\n")
    fake.chmod(0o755)
    assert _dry_run_gpus(tmp_path, PATH=f"{bin_dir}:{os.environ['PATH']}") == (3, 2)


def test_no_gpu_is_an_error_before_anything_starts(tmp_path):
    env = _script_env(CUDA_VISIBLE_DEVICES="")
    env.pop("N_GPUS_PER_NODE", None)
    result = subprocess.run(["bash", str(REPO / "scripts" / "train_cobalt.sh")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "no GPU found" in result.stderr and "N_GPUS_PER_NODE" in result.stderr
    assert "ray" not in result.stdout.lower()
    # A dry run on a machine without GPUs composes the paper's 4-GPU node.
    assert _dry_run_gpus(tmp_path, CUDA_VISIBLE_DEVICES="") == (4, 2)
