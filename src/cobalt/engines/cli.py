"""Engine flags shared by every command that calls a model.

``add_engine_arguments(parser)`` adds ``--engine``, ``--model``, ``--base-url``,
``--api-key``, ``--max-in-flight``, ``--timeout``, ``--tensor-parallel-size``,
``--device`` and the paper's credential flags (``--openai_api_key``,
``--aws_access_key_id``, ``--aws_secret_access_key``, ``--aws_region_name``);
``engine_from_args(args)`` builds the chosen engine from them. Credentials
given as flags are handed to the engine only; they are never echoed, logged
or saved (``Engine.describe()`` is what a command saves).
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
from typing import Any

from cobalt.cli_support import non_negative_int, positive_float, positive_int
from cobalt.engines.base import ENGINES, Engine, EngineError, SamplingParams, engine_factory

ENV_ENGINE = "COBALT_ENGINE"
ENV_MODEL = "COBALT_MODEL"


def add_engine_arguments(parser: argparse.ArgumentParser, *, default_engine: str | None = None) -> None:
    """Add the engine flags to ``parser`` (``default_engine``: what a paper shim implies)."""
    import cobalt.engines  # noqa: F401  (registers the built-in backends)

    group = parser.add_argument_group("model engine")
    group.add_argument("--engine", choices=sorted(ENGINES), default=default_engine or os.environ.get(ENV_ENGINE, "openai"),
                       help=f"backend that runs the model (default: ${ENV_ENGINE}, else openai)")
    group.add_argument("--model", default=os.environ.get(ENV_MODEL),
                       help=f"hub id, local path or API model name (default: ${ENV_MODEL})")
    group.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    group.add_argument("--api-key", default=None, help="API key (default: $OPENAI_API_KEY); never saved or logged")
    group.add_argument("--max-in-flight", type=positive_int, default=64, help="API engines: requests in flight at most")
    group.add_argument("--timeout", type=positive_float, default=600.0, help="API engines: seconds per request attempt")
    group.add_argument("--max-retries", type=non_negative_int, default=6,
                       help="API engines: retries on 429, 5xx and timeouts")
    group.add_argument("--tensor-parallel-size", type=positive_int, default=1, help="vllm: GPUs per model copy")
    group.add_argument("--device", default="auto", help="transformers: auto, cpu or cuda[:i]")
    group.add_argument("--openai_api_key", default=None, help="the paper's flag: same as --api-key")
    group.add_argument("--aws_access_key_id", default=None, help="litellm/Bedrock (default: $AWS_ACCESS_KEY_ID)")
    group.add_argument("--aws_secret_access_key", default=None, help="litellm/Bedrock (default: $AWS_SECRET_ACCESS_KEY)")
    group.add_argument("--aws_region_name", default=None, help="litellm/Bedrock (default: $AWS_REGION_NAME)")
    group.add_argument("--reasoning-effort", "--reasoning_effort", dest="reasoning_effort", default=None,
                       choices=("minimal", "low", "medium", "high"),
                       help="openai/litellm: reasoning_effort sent with every request (default: the command's; "
                            "under paper the original's, low for the judge and medium for API policy models)")


def _candidate_options(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "base_url": getattr(args, "base_url", None),
        "api_key": getattr(args, "api_key", None) or getattr(args, "openai_api_key", None),
        "max_in_flight": getattr(args, "max_in_flight", None),
        "timeout": getattr(args, "timeout", None),
        "max_retries": getattr(args, "max_retries", None),
        "tensor_parallel_size": getattr(args, "tensor_parallel_size", None),
        "device": getattr(args, "device", None),
        "reasoning_effort": getattr(args, "reasoning_effort", None),
        "aws_access_key_id": getattr(args, "aws_access_key_id", None),
        "aws_secret_access_key": getattr(args, "aws_secret_access_key", None),
        "aws_region_name": getattr(args, "aws_region_name", None),
    }


def engine_from_args(args: argparse.Namespace, **overrides: Any) -> Engine:
    """The engine chosen by the parsed flags; options a backend does not take are left out.

    Raises :class:`EngineError` (one line) on a missing model or a bad choice.
    """
    import cobalt.engines  # noqa: F401

    name = args.engine
    if not getattr(args, "model", None) and name != "vllm-serve":
        raise EngineError(f"--model is required for engine {name!r} (or set ${ENV_MODEL})")
    factory = engine_factory(name)
    engine_cls_init = _accepted(factory)
    candidates = {**_candidate_options(args), **overrides}
    if candidates.get("reasoning_effort") is not None and engine_cls_init is not None \
            and "reasoning_effort" not in engine_cls_init:
        print(f"warning: engine {name!r} does not send reasoning_effort; "
              f"--reasoning-effort {candidates['reasoning_effort']} is ignored", file=sys.stderr)
    options = {k: v for k, v in candidates.items()
               if v is not None and (engine_cls_init is None or k in engine_cls_init)}
    return factory(args.model or "", **options)


API_ENGINES = ("openai", "litellm")
"""Engines that reach a hosted API and take ``reasoning_effort``."""


def default_reasoning_effort(args: argparse.Namespace, paper_value: str, profile: str) -> None:
    """Fill ``args.reasoning_effort`` with the original's ``paper_value`` (low: judge, medium: API
    policy models) under ``paper`` for the API engines, when the flag was not given."""
    if getattr(args, "reasoning_effort", None) is None and str(profile) == "paper" \
            and getattr(args, "engine", None) in API_ENGINES:
        args.reasoning_effort = paper_value


def _accepted(factory: Any) -> set[str] | None:
    """Keyword names the engine behind ``factory`` takes (None: anything).

    An engine class whose ``**options`` go on to another function names it in
    ``forwards_options_to``; that function's keywords count as the class's own.
    """
    target = factory
    ret = inspect.signature(factory).return_annotation
    module = inspect.getmodule(factory)
    if isinstance(ret, str) and module is not None and hasattr(module, ret):
        target = getattr(module, ret)
    params = inspect.signature(target).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()) and target is factory:
        return None
    names = _keyword_names(params)
    forwarded = getattr(target, "forwards_options_to", None)
    if forwarded is not None:
        names |= _keyword_names(inspect.signature(forwarded).parameters)
    return names


def _keyword_names(params: Any) -> set[str]:
    return {n for n, p in params.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def add_sampling_arguments(parser: argparse.ArgumentParser, *, defaults: SamplingParams | None = None) -> None:
    """Add ``--n``, ``--temperature``, ``--top-p``, ``--max-new-tokens``, ``--seed``, ``--thinking``."""
    d = defaults or SamplingParams()
    group = parser.add_argument_group("sampling")
    from cobalt.cli_support import THINKING_CHOICES, add_alias, fraction, non_negative_float, positive_int

    group.add_argument("--n", type=positive_int, default=d.n, help="samples per conversation")
    group.add_argument("--temperature", type=non_negative_float, default=d.temperature,
                       help="sampling temperature (0: greedy)")
    group.add_argument("--top-p", type=fraction, default=d.top_p, help="nucleus sampling mass, in (0, 1]")
    group.add_argument("--max-new-tokens", type=positive_int, default=d.max_new_tokens,
                       help="new tokens per sample at most")
    add_alias(group, "--max-tokens", dest="max_new_tokens", type=positive_int)
    group.add_argument("--seed", type=int, default=d.seed, help="base seed (conversation i gets seed + i)")
    group.add_argument("--thinking", type=_thinking_choice, choices=THINKING_CHOICES, default="auto",
                       help="Qwen3 enable_thinking in the chat template; 'auto' leaves the template's choice")


def _thinking_choice(text: str) -> str:
    """``default``, the old spelling, is ``auto``."""
    return "auto" if text == "default" else text


def sampling_from_args(args: argparse.Namespace) -> SamplingParams:
    """The :class:`SamplingParams` of the parsed sampling flags."""
    thinking = {"on": True, "off": False}.get(getattr(args, "thinking", "auto"))
    return SamplingParams(n=args.n, temperature=args.temperature, top_p=args.top_p,
                          max_new_tokens=args.max_new_tokens, seed=args.seed, enable_thinking=thinking)
