"""The paper's training runs as Hydra overrides of the pinned verl's ``main_ppo``.

One place holds every setting of METHOD §5: the shell scripts in ``scripts/``
ask ``cobalt train-config RUN --print-overrides`` for the list and pass it to
``python -m verl.trainer.main_ppo``; tests compose the same list with verl's
own config files and check the values.

Five runs:

- ``single-turn``: single-turn GRPO fine-tuning (the paper's "FT" models),
  prompts of at most 2,048 tokens, 4 epochs;
- ``cobalt``: contextual bandit learning on partial-trajectory prompts of at
  most 10,240 tokens, 2 epochs;
- ``cobalt-perturbed``: Cobalt with perturbation-augmented trajectories in the
  training data; same settings, its own data files;
- ``grpo-mt`` / ``verpo-mt``: the online multi-turn baselines (docs/BASELINES.md):
  the same settings, prompts of at most 2,048 tokens (the problem), a
  trajectory budget of :data:`MULTITURN_RESPONSE_LENGTH` tokens, verl's agent
  loop ``cobalt.verl_plugin.agent_loop`` with T = 2 repair turns, 2 epochs.

Where the pinned verl's defaults differ from the paper's run (or could change
under it), the value is set here explicitly; docs/TRAINING.md lists them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from cobalt.defaults import DATA_DIR, DATA_DIR_ENV, TEMPERATURE, TOP_P

__all__ = [
    "RUNS",
    "RunSettings",
    "RunSpec",
    "build_overrides",
    "compose_config",
    "verl_config_dir",
]

REWARD_FN_PATH = "pkg://cobalt.verl_plugin.reward"
REWARD_MANAGER_PATH = "pkg://cobalt.verl_plugin.reward_manager"
REWARD_MANAGER_CLASS = "CobaltRewardManager"
MAX_RESPONSE_LENGTH = 6144
DEFAULT_REPAIR_TURNS = 2
"""T of the multi-turn baselines: repair turns after the first answer (3 programs, as the paper's training data)."""
FEEDBACK_TOKEN_ALLOWANCE = 1024
"""Tokens reserved per feedback turn in a multi-turn trajectory's response budget."""
MULTITURN_RESPONSE_LENGTH = (DEFAULT_REPAIR_TURNS + 1) * MAX_RESPONSE_LENGTH + DEFAULT_REPAIR_TURNS * FEEDBACK_TOKEN_ALLOWANCE
"""Whole-trajectory budget of GRPO-MT / VeRPO-MT: every response may use the per-turn cap of 6,144."""
AGENT_LOOPS_DIR = Path(__file__).resolve().parent / "agent_loops"


@dataclass(frozen=True)
class RunSpec:
    """What distinguishes one paper run from another."""

    name: str
    description: str
    max_prompt_length: int
    total_epochs: int
    data_subdir: str
    """Folder under the data directory with train.parquet and val.parquet."""
    max_response_length: int = MAX_RESPONSE_LENGTH
    """Response tokens per row (for a multi-turn trajectory: all responses and feedback turns)."""
    agent_loop: str | None = None
    """YAML file in ``agent_loops/`` registering the multi-turn agent loop (None: verl's single-turn loop)."""


RUNS: dict[str, RunSpec] = {
    spec.name: spec
    for spec in (
        RunSpec("single-turn", "single-turn GRPO fine-tuning (FT)", 2048, 4, "single_turn"),
        RunSpec("cobalt", "Cobalt: contextual bandit learning on partial trajectories", 10240, 2, "cobalt"),
        RunSpec(
            "cobalt-perturbed",
            "Cobalt with perturbation-augmented trajectories",
            10240,
            2,
            "cobalt_perturbed",
        ),
        RunSpec("grpo-mt", "GRPO-MT: online multi-turn GRPO (Cobalt's reward on the final program)", 2048, 2,
                "multiturn", MULTITURN_RESPONSE_LENGTH, "grpo_mt.yaml"),
        RunSpec("verpo-mt", "VeRPO-MT: online multi-turn GRPO with VeRPO's dense reward", 2048, 2,
                "multiturn", MULTITURN_RESPONSE_LENGTH, "verpo_mt.yaml"),
    )
}


def _default_data_dir() -> str:
    return os.environ.get(DATA_DIR_ENV) or str(Path(DATA_DIR).expanduser())


@dataclass
class RunSettings:
    """The machine- and user-specific part of a run (the paper's values are in :func:`build_overrides`)."""

    model: str = "Qwen/Qwen3-8B"
    """Hugging Face id or local folder of the policy (the paper: Qwen3-8B, DeepSeek-R1-Distill-Llama-8B, or their FT)."""
    data_dir: str = field(default_factory=_default_data_dir)
    """Folder holding <run>/train.parquet and <run>/val.parquet (from `cobalt make-verl-data`)."""
    train_files: str | None = None
    """Training parquet; default <data_dir>/<run data folder>/train.parquet."""
    val_files: str | None = None
    """Validation parquet (rows with extra_info.is_val); default <data_dir>/<run data folder>/val.parquet."""
    n_gpus_per_node: int = 4
    nnodes: int = 1
    logger: tuple[str, ...] = ("console",)
    """verl loggers, e.g. ('console', 'wandb') as in the paper."""
    output_dir: str | None = None
    """Checkpoints and validation generations; default ./outputs/<experiment> resolved to an absolute path."""
    project_name: str = "cobalt"
    experiment_name: str | None = None
    """Default: <run>-<model folder name>."""
    rollout_tp: int = 2
    """vLLM tensor parallel size per rollout replica."""
    reward_workers: int = 8
    reward_max_concurrent: int = 8
    """Evaluations in flight per reward worker (8 x 8 = the paper's 64 at a time)."""
    reward_timeout_s: float | None = None
    """Seconds before a row's reward counts as failed; None: the profile's default in the
    reward manager (300 s under ``paper``, as the original waited; 120 s under ``cobalt``)."""
    profile: str = "paper"
    """'paper' or 'cobalt' (docs/FIDELITY.md): given to the reward manager and the reward workers."""
    evaluator: str = "ray"
    """COBALT_EVALUATOR for the reward workers: 'ray' (the Serve app) or 'embedded'."""
    worker_env: dict[str, str] = field(default_factory=dict)
    """More environment variables for verl's Ray workers (e.g. TIKTOKEN_CACHE_DIR on offline nodes)."""


def _experiment_name(spec: RunSpec, settings: RunSettings) -> str:
    if settings.experiment_name:
        return settings.experiment_name
    model_name = Path(settings.model.rstrip("/")).name or "model"
    return f"{spec.name}-{model_name}"


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _hydra_list(items: Sequence[str]) -> str:
    return "[" + ",".join(f'"{item}"' for item in items) + "]"


def _hydra_value(value: str) -> str:
    """``value`` quoted for a Hydra override when it holds characters the grammar would read."""
    if value and all(ch.isalnum() or ch in "/._-:~@" for ch in value):
        return value
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _hydra_string(value: str) -> str:
    """``value`` as a quoted Hydra string (so that ``1`` or ``true`` stay strings)."""
    escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def build_overrides(run: str, settings: RunSettings | None = None) -> list[str]:
    """The Hydra overrides of ``verl.trainer.main_ppo`` for paper run ``run``, in order.

    Raises ``KeyError`` naming the known runs for an unknown ``run``.
    """
    if run not in RUNS:
        raise KeyError(f"unknown run {run!r}; choose from: {', '.join(RUNS)}")
    spec, s = RUNS[run], settings or RunSettings()
    data = Path(s.data_dir).expanduser() / spec.data_subdir
    train = _abs(s.train_files or str(data / "train.parquet"))
    val = _abs(s.val_files or str(data / "val.parquet"))
    experiment = _experiment_name(spec, s)
    output_dir = _abs(s.output_dir or str(Path("outputs") / experiment))
    seq_len = spec.max_prompt_length + spec.max_response_length
    token_budget = max(seq_len, 16384)
    return [*_common_overrides(spec, s, train, val, experiment, output_dir, token_budget), *_agent_overrides(spec)]


def _agent_overrides(spec: RunSpec) -> list[str]:
    """The multi-turn agent loop of GRPO-MT / VeRPO-MT (nothing for single-turn runs)."""
    if spec.agent_loop is None:
        return []
    return [
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={_hydra_value(str(AGENT_LOOPS_DIR / spec.agent_loop))}",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={DEFAULT_REPAIR_TURNS + 1}",
    ]


PROMPT_LENGTH_RULES = {
    # the original's scripts/train_grpo_*.sh: data.truncation="right", verl's default filter (off)
    "paper": ("data.filter_overlong_prompts=False", "data.truncation=right"),
    # an over-long prompt is dropped before training, never cut (a cut removes its end: the
    # latest feedback and the generation prompt); anything that slips through stops the run
    "cobalt": ("data.filter_overlong_prompts=True", "data.truncation=error"),
}
"""What happens to a prompt longer than ``data.max_prompt_length``, per profile."""


def _prompt_length_overrides(profile: str) -> tuple[str, ...]:
    from cobalt.profile import profile_name

    return PROMPT_LENGTH_RULES[profile_name(profile)]


def _common_overrides(spec: RunSpec, s: RunSettings, train: str, val: str, experiment: str, output_dir: str,
                      token_budget: int) -> list[str]:
    return [
        # algorithm: GRPO, no KL in the reward (the KL term is in the loss)
        "algorithm.adv_estimator=grpo",
        "algorithm.norm_adv_by_std_in_grpo=True",
        "algorithm.use_kl_in_reward=False",
        # data
        f"data.train_files={_hydra_value(train)}",
        f"data.val_files={_hydra_value(val)}",
        "data.prompt_key=prompt",
        "data.reward_fn_key=data_source",
        "data.train_batch_size=128",
        f"data.max_prompt_length={spec.max_prompt_length}",
        f"data.max_response_length={spec.max_response_length}",
        *_prompt_length_overrides(s.profile),
        "data.shuffle=True",
        # policy model
        f"actor_rollout_ref.model.path={_hydra_value(s.model)}",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        "actor_rollout_ref.model.use_remove_padding=True",
        # actor: FSDP, lr 1e-6, clip 1.0, asymmetric ratio clip, MSE KL loss
        "actor_rollout_ref.actor.strategy=fsdp",
        "actor_rollout_ref.actor.optim.lr=1e-6",
        "actor_rollout_ref.actor.optim.clip_grad=1.0",
        "actor_rollout_ref.actor.grad_clip=1.0",
        "actor_rollout_ref.actor.ppo_mini_batch_size=64",
        "actor_rollout_ref.actor.ppo_epochs=1",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={token_budget}",
        "actor_rollout_ref.actor.clip_ratio_low=0.2",
        "actor_rollout_ref.actor.clip_ratio_high=0.4",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_type=mse",
        "actor_rollout_ref.actor.kl_loss_coef=1e-4",
        "actor_rollout_ref.ref.fsdp_config.param_offload=True",
        # rollout: vLLM, 16 samples at temperature 1.0; validation at 0.6 / top-p 0.95
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.n=16",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.top_k=-1",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={s.rollout_tp}",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={token_budget}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=True",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={TEMPERATURE}",
        f"actor_rollout_ref.rollout.val_kwargs.top_p={TOP_P}",
        "actor_rollout_ref.rollout.val_kwargs.top_k=-1",
        "actor_rollout_ref.rollout.val_kwargs.n=1",
        # reward: our async function and manager, loaded from the installed package
        f"reward.custom_reward_function.path={REWARD_FN_PATH}",
        "reward.custom_reward_function.name=compute_score",
        "reward.reward_manager.source=importlib",
        f"reward.reward_manager.name={REWARD_MANAGER_CLASS}",
        f"reward.reward_manager.module.path={REWARD_MANAGER_PATH}",
        f"reward.num_workers={s.reward_workers}",
        f"+reward.reward_kwargs.max_concurrent={s.reward_max_concurrent}",
        f"+reward.reward_kwargs.profile={s.profile}",
        *([f"+reward.reward_kwargs.timeout_s={s.reward_timeout_s}"] if s.reward_timeout_s is not None else []),
        f"+ray_kwargs.ray_init.runtime_env.env_vars.COBALT_PROFILE={s.profile}",
        # verl's workers get their environment from Ray, not from this shell
        f"+ray_kwargs.ray_init.runtime_env.env_vars.COBALT_EVALUATOR={s.evaluator}",
        *(
            # always quoted: Ray wants str values, and Hydra reads a bare 1 as an int
            f"+ray_kwargs.ray_init.runtime_env.env_vars.{name}={_hydra_string(value)}"
            for name, value in sorted(s.worker_env.items())
            if name not in ("COBALT_EVALUATOR", "COBALT_PROFILE")
        ),
        # trainer
        f"trainer.n_gpus_per_node={s.n_gpus_per_node}",
        f"trainer.nnodes={s.nnodes}",
        f"trainer.logger={_hydra_list(s.logger)}",
        f"trainer.project_name={_hydra_value(s.project_name)}",
        f"trainer.experiment_name={_hydra_value(experiment)}",
        f"trainer.total_epochs={spec.total_epochs}",
        "trainer.save_freq=10",
        "trainer.test_freq=10",
        "trainer.val_before_train=True",
        "trainer.critic_warmup=0",
        f"trainer.default_local_dir={_hydra_value(output_dir + '/checkpoints')}",
        f"trainer.validation_data_dir={_hydra_value(output_dir + '/validation')}",
    ]


def verl_config_dir() -> Path:
    """The Hydra config folder of the installed verl (where ``main_ppo`` reads ``ppo_trainer.yaml``)."""
    import verl

    return Path(verl.__file__).resolve().parent / "trainer" / "config"


def compose_config(overrides: Sequence[str], config_name: str = "ppo_trainer") -> Any:
    """Compose verl's trainer config with ``overrides``, exactly as ``main_ppo`` would (no GPU, no Ray).

    Returns the OmegaConf ``DictConfig``. Hydra's global state is cleared
    before and after, so this can be called repeatedly in one process.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
            return compose(config_name=config_name, overrides=list(overrides))
    finally:
        GlobalHydra.instance().clear()
