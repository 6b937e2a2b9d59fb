"""LLM engines behind one async interface (see :mod:`cobalt.engines.base`).

Backends register by name and are imported only when chosen::

    from cobalt.engines import create_engine
    engine = create_engine("transformers", model="path/or/hub-id")
    outs = await engine.generate(conversations, SamplingParams(n=4, max_new_tokens=256))
"""
from cobalt.engines.base import (
    ENGINES,
    ChatMessage,
    Completion,
    Engine,
    EngineError,
    SamplingParams,
    create_engine,
    register_engine,
)

__all__ = ["ENGINES", "ChatMessage", "Completion", "Engine", "EngineError", "SamplingParams", "create_engine",
           "register_engine"]

# The built-in backends, imported only when chosen.
register_engine("openai", "cobalt.engines.openai_engine:create")
register_engine("litellm", "cobalt.engines.litellm_engine:create")
register_engine("transformers", "cobalt.engines.hf_engine:create")
register_engine("vllm", "cobalt.engines.vllm_engine:create")
register_engine("vllm-serve", "cobalt.engines.vllm_serve:create_serve_engine")
