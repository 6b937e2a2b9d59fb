"""``litellm_model_name``: how ``--model`` maps onto a LiteLLM provider (pure; LiteLLM is not imported)."""
from __future__ import annotations

import pytest

from cobalt.engines.litellm_engine import litellm_model_name

PROVIDERS = {"openai", "bedrock", "hosted_vllm", "anthropic"}


@pytest.mark.parametrize("model, expected", [
    ("anthropic.claude-3-5-sonnet-20240620-v1:0", ("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0", "bedrock")),
    ("us.anthropic.claude-3-7-sonnet-20250219-v1:0", ("bedrock/us.anthropic.claude-3-7-sonnet-20250219-v1:0", "bedrock")),
    ("meta.llama3-70b-instruct-v1:0", ("bedrock/meta.llama3-70b-instruct-v1:0", "bedrock")),
    ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/x", (
        "bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/x", "bedrock")),
    ("bedrock/converse/anthropic.claude-x", ("bedrock/converse/anthropic.claude-x", "bedrock")),
    ("hosted_vllm/Qwen/Qwen3-8B", ("hosted_vllm/Qwen/Qwen3-8B", "hosted_vllm")),
    ("anthropic/claude-sonnet-4", ("anthropic/claude-sonnet-4", "anthropic")),
    ("gpt-4o-mini", ("openai/gpt-4o-mini", "openai")),
    ("Qwen/Qwen3-8B", ("openai/Qwen/Qwen3-8B", "openai")),
    # a local path or hub id whose first part happens to look like a vendor is not Bedrock
    ("meta.llama/weights", ("openai/meta.llama/weights", "openai")),
    ("claude-3-haiku", ("openai/claude-3-haiku", "openai")),
])
def test_mapping(model, expected):
    assert litellm_model_name(model, PROVIDERS) == expected
