"""Compose and print the veRL GRPO config of a paper training run.

``cobalt train-config RUN [OVERRIDE ...]`` composes the pinned verl's
``ppo_trainer`` config with the run's Hydra overrides (METHOD §5, see
:mod:`cobalt.verl_plugin.runs`) followed by yours, checks it with verl's own
``validate_config`` and prints it as YAML. Nothing is started: no GPU, no Ray.
``--print-overrides`` prints the override list instead, one per line, which is
what ``scripts/train_*.sh`` hand to ``python -m verl.trainer.main_ppo``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from cobalt.profile import add_profile_argument, profile_from_args
from cobalt.verl_plugin.runs import RUNS, RunSettings

# Variables that verl's Ray workers need to see when they are set here.
FORWARDED_ENV = ("TIKTOKEN_CACHE_DIR", "HF_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt train-config``."""
    defaults = RunSettings()
    parser.add_argument("run", choices=sorted(RUNS), help="the paper run: " + "; ".join(
        f"{name}: {spec.description}" for name, spec in RUNS.items()))
    parser.add_argument("overrides", nargs="*", metavar="OVERRIDE",
                        help="extra Hydra overrides applied after the run's (e.g. trainer.total_epochs=1)")
    parser.add_argument("--model", default=defaults.model, help="policy model: hub id or local folder")
    parser.add_argument("--data-dir", default=defaults.data_dir,
                        help="folder with <run>/train.parquet and <run>/val.parquet (env COBALT_DATA_DIR)")
    parser.add_argument("--train-files", default=None, help="training parquet (default: from --data-dir)")
    parser.add_argument("--val-files", default=None, help="validation parquet (default: from --data-dir)")
    parser.add_argument("--n-gpus-per-node", type=int, default=defaults.n_gpus_per_node, help="GPUs per node")
    parser.add_argument("--nnodes", type=int, default=defaults.nnodes, help="number of nodes")
    parser.add_argument("--logger", default=",".join(defaults.logger),
                        help="comma-separated verl loggers, e.g. console,wandb")
    parser.add_argument("--output-dir", default=None,
                        help="checkpoints and validation generations (default: ./outputs/<experiment>, made absolute)")
    parser.add_argument("--project-name", default=defaults.project_name, help="tracking project name")
    parser.add_argument("--experiment-name", default=None, help="experiment name (default: <run>-<model name>)")
    parser.add_argument("--rollout-tp", type=int, default=defaults.rollout_tp, help="vLLM tensor parallel size")
    parser.add_argument("--reward-workers", type=int, default=defaults.reward_workers,
                        help="verl reward loop workers (Ray actors)")
    parser.add_argument("--reward-max-concurrent", type=int, default=defaults.reward_max_concurrent,
                        help="evaluations in flight per reward worker")
    parser.add_argument("--reward-timeout-s", type=float, default=defaults.reward_timeout_s,
                        help="seconds before a row's reward counts as failed (-1); default: the profile's "
                        "(300 s under paper, as the original; 120 s under cobalt)")
    parser.add_argument("--evaluator", choices=("ray", "embedded"), default=defaults.evaluator,
                        help="COBALT_EVALUATOR given to verl's workers")
    parser.add_argument("--print-overrides", action="store_true",
                        help="print the override list (one per line) instead of the composed config; with --save, "
                        "the config is still composed, checked and saved")
    parser.add_argument("--save", default=None, metavar="PATH",
                        help="also write {run, overrides, config} as JSON to PATH (atomically)")
    parser.add_argument("--no-validate", action="store_true", help="skip verl's validate_config check")
    add_profile_argument(parser)


def settings_from_args(args: argparse.Namespace) -> RunSettings:
    """The :class:`RunSettings` given by parsed flags (and the forwarded environment variables)."""
    worker_env = {name: os.environ[name] for name in FORWARDED_ENV if os.environ.get(name)}
    return RunSettings(
        model=args.model,
        data_dir=args.data_dir,
        train_files=args.train_files,
        val_files=args.val_files,
        n_gpus_per_node=args.n_gpus_per_node,
        nnodes=args.nnodes,
        logger=tuple(name.strip() for name in args.logger.split(",") if name.strip()),
        output_dir=args.output_dir,
        project_name=args.project_name,
        experiment_name=args.experiment_name,
        rollout_tp=args.rollout_tp,
        reward_workers=args.reward_workers,
        reward_max_concurrent=args.reward_max_concurrent,
        reward_timeout_s=args.reward_timeout_s,
        evaluator=args.evaluator,
        worker_env=worker_env,
        profile=str(profile_from_args(args)),
    )


def validate(config) -> None:
    """Run verl's own ``validate_config`` on ``config``; its chatter goes to stderr."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    with contextlib.redirect_stdout(sys.stderr):
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )


def run(args: argparse.Namespace) -> int:
    """Print the run's overrides, or its composed (and checked) config as YAML."""
    from cobalt.verl_plugin.runs import build_overrides, compose_config

    overrides = build_overrides(args.run, settings_from_args(args)) + list(args.overrides)
    if args.print_overrides and not args.save:
        sys.stdout.write("".join(f"{item}\n" for item in overrides))
        return 0

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        config = compose_config(overrides)
    except Exception as exc:  # Hydra's errors name the offending override
        print(f"cobalt train-config: cannot compose the config: {exc}", file=sys.stderr)
        return 2
    if not args.no_validate:
        try:
            validate(config)
        except (AssertionError, ValueError, OmegaConfBaseException) as exc:
            print(f"cobalt train-config: verl rejects the config: {exc}", file=sys.stderr)
            return 2
    # --print-overrides with --save: the launcher's one call (composing the config imports verl, which
    # takes tens of seconds on a fresh node): check and save the config, print the override list
    sys.stdout.write("".join(f"{item}\n" for item in overrides) if args.print_overrides
                     else OmegaConf.to_yaml(config, resolve=True))
    if args.save:
        from cobalt.io import write_json_atomic

        container = OmegaConf.to_container(config, resolve=True)
        write_json_atomic(args.save, {"run": args.run, "overrides": overrides, "config": container})
        print(f"cobalt train-config: wrote {args.save}", file=sys.stderr)
    return 0
