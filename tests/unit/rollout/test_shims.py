"""The paper's inference/evaluation scripts: their flags map onto cobalt rollout / cobalt eval."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.cli import command_parser
from cobalt.shims import ROLLOUT_SHIMS, translate

REPO = Path(__file__).resolve().parents[3]


def _parsed(cobalt_argv):
    parser, _ = command_parser(cobalt_argv[0])
    return parser.parse_args(cobalt_argv[1:])


def test_single_turn_vllm_readme_command():
    argv, env = translate("run_single_turn_vllm", ["--input_file", "in.jsonl", "--output_file", "out.jsonl",
                                                   "--max_tokens", "6144", "--model_name", "Qwen/Qwen3-8B"])
    args = _parsed(argv)
    assert (args.engine, args.turns, args.max_tokens, args.first_turn_from) == ("vllm", 0, 6144, None)
    assert (args.input, args.output, args.model, args.thinking) == ("in.jsonl", "out.jsonl", "Qwen/Qwen3-8B", "auto")
    assert (args.temperature, args.top_p, args.samples) == (0.6, 0.95, 16) and env == {}


def test_multi_turn_vllm_reads_its_first_turns_from_the_input():
    argv, _ = translate("run_multi_turn_vllm", ["--input_file", "single.jsonl", "--output_file", "multi.jsonl",
                                                "--max_tokens", "6144", "--enable_thinking", "--model_name", "m"])
    args = _parsed(argv)
    assert args.turns == 8 and args.first_turn_from == "single.jsonl" == args.input and args.thinking == "on"
    assert args.max_tokens == 6144


def test_default_max_tokens_is_the_papers():
    args = _parsed(translate("run_multi_turn_vllm", ["--input_file", "a", "--output_file", "b", "--model_name", "m"])[0])
    assert args.max_tokens == 8192


def test_litellm_flags_credentials_go_to_the_environment_only():
    argv, env = translate("run_multi_turn_litellm", [
        "--model_name", "gpt-x", "--input_file", "a", "--output_file", "b", "--openai_api_key", "sk-secret",
        "--aws_access_key_id", "AK", "--aws_secret_access_key", "SK", "--aws_region_name", "us-west-2"])
    assert "sk-secret" not in argv and "SK" not in argv
    assert env == {"OPENAI_API_KEY": "sk-secret", "AWS_ACCESS_KEY_ID": "AK", "AWS_SECRET_ACCESS_KEY": "SK",
                   "AWS_REGION_NAME": "us-west-2"}
    args = _parsed(argv)
    assert (args.temperature, args.top_p, args.max_tokens, args.turns) == (1.0, 1.0, 32000, 8)
    assert args.engine == "litellm"


def test_extra_flags_pass_through_and_win():
    argv, _ = translate("run_single_turn_vllm", ["--input_file", "a", "--output_file", "b", "--model_name", "m",
                                                 "--samples", "4", "--engine", "openai", "--base-url", "http://x/v1"])
    args = _parsed(argv)
    assert (args.samples, args.engine, args.base_url) == (4, "openai", "http://x/v1")


@pytest.mark.parametrize("script", [*ROLLOUT_SHIMS, "eval_multi_turn"])
def test_root_scripts_answer_help(script):
    out = subprocess.run([sys.executable, str(REPO / f"{script}.py"), "--help"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--input_file" in out.stdout and "--output_file" in out.stdout
    if "litellm" in script:
        assert "--openai_api_key" in out.stdout and "--aws_region_name" in out.stdout
    if script == "run_multi_turn_vllm":
        assert "--enable_thinking" in out.stdout
