"""What of the vLLM backend runs without vLLM: sampling mapping, engine arguments,
prompts through the real Qwen3 chat template, the Ray Serve deployment's config and the root shim."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.engines import EngineError, SamplingParams, create_engine
from cobalt.engines.vllm_engine import engine_args_kwargs, vllm_sampling_kwargs
from cobalt.engines.vllm_serve import APP_NAME, DEPLOYMENT_NAME, ROUTE_PREFIX, VLLMServeConfig

REPO = Path(__file__).resolve().parents[3]
TOKENIZER = REPO.parent / "shared" / "data" / "qwen3_tokenizer"


def test_sampling_params_map_onto_vllm_keywords():
    params = SamplingParams(n=16, temperature=0.6, top_p=0.95, max_new_tokens=8192, seed=5, stop=("```\n",))
    assert vllm_sampling_kwargs(params, 7) == {
        "n": 16, "temperature": 0.6, "top_p": 0.95, "max_tokens": 8192, "seed": 7, "stop": ["```\n"],
        "skip_special_tokens": True}
    plain = vllm_sampling_kwargs(SamplingParams(), None)
    assert "seed" not in plain and "stop" not in plain and plain["max_tokens"] == 8192


def test_engine_arguments():
    kw = engine_args_kwargs("Qwen/Qwen3-8B", tensor_parallel_size=2, max_model_len=16384,
                            distributed_executor_backend="mp")
    assert kw["model"] == kw["tokenizer"] == "Qwen/Qwen3-8B"
    assert (kw["tensor_parallel_size"], kw["max_model_len"], kw["distributed_executor_backend"]) == (2, 16384, "mp")
    assert "max_model_len" not in engine_args_kwargs("m")
    with pytest.raises(EngineError, match="tensor_parallel_size"):
        engine_args_kwargs("m", tensor_parallel_size=0)


def test_engine_flags_reach_the_vllm_engine_arguments():
    """The CLI hands the vllm engine the options it takes (its ``**engine_args`` included), and no API option."""
    import argparse

    from cobalt.engines.cli import add_engine_arguments, engine_from_args

    parser = argparse.ArgumentParser()
    add_engine_arguments(parser)
    args = parser.parse_args(["--engine", "vllm", "--model", str(TOKENIZER), "--tensor-parallel-size", "2",
                              "--max-in-flight", "7", "--timeout", "9"])
    engine = engine_from_args(args)
    assert engine.engine_kwargs["tensor_parallel_size"] == 2
    assert engine.engine_kwargs == engine_args_kwargs(str(TOKENIZER), tensor_parallel_size=2)
    direct = create_engine("vllm", "m", dtype="bfloat16", engine_kwargs={"max_num_seqs": 8, "dtype": "float16"})
    assert (direct.engine_kwargs["dtype"], direct.engine_kwargs["max_num_seqs"]) == ("float16", 8)
    with pytest.raises(TypeError, match="max_in_flight"):
        create_engine("vllm", "m", max_in_flight=7)


@pytest.mark.parametrize("thinking", [True, False])
def test_prompts_through_the_real_chat_template(thinking):
    transformers = pytest.importorskip("transformers")
    engine = create_engine("vllm", str(TOKENIZER))  # the tokenizer folder is enough for prompts
    ref = transformers.AutoTokenizer.from_pretrained(str(TOKENIZER))
    conv = [{"role": "system", "content": "Be safe."}, {"role": "user", "content": "Sum two numbers."}]
    text = ref.apply_chat_template(conv, tokenize=False, add_generation_prompt=True, enable_thinking=thinking)
    assert engine.prompt_text(conv, thinking) == text
    assert engine.prompt_ids(conv, thinking) == ref(text, add_special_tokens=False)["input_ids"]
    assert text.endswith("<think>\n\n</think>\n\n") is (not thinking)


async def test_without_vllm_check_is_one_clear_line():
    pytest.importorskip("transformers")
    try:
        import vllm  # noqa: F401
        pytest.skip("vLLM is installed here")
    except ImportError:
        pass
    engine = create_engine("vllm", str(TOKENIZER))
    with pytest.raises(EngineError, match=r"vLLM is not installed .*cobalt\[vllm\]"):
        await engine.check()


def test_serve_config_from_environment():
    env = {"COBALT_VLLM_MODEL": "/models/qwen3-8b", "COBALT_VLLM_NUM_REPLICAS": "4",
           "COBALT_VLLM_TENSOR_PARALLEL_SIZE": "2", "COBALT_VLLM_GPU_MEMORY_UTILIZATION": "0.85"}
    cfg = VLLMServeConfig.from_env(env)
    opts = cfg.deployment_options()
    assert opts["name"] == DEPLOYMENT_NAME and opts["num_replicas"] == 4
    assert opts["ray_actor_options"]["num_gpus"] == 2
    eng = cfg.engine_options()
    assert (eng["tensor_parallel_size"], eng["gpu_memory_utilization"], eng["distributed_executor_backend"]) == (2, 0.85, "mp")
    assert VLLMServeConfig.from_env(env, num_replicas=1, model="other").model == "other"
    assert (APP_NAME, ROUTE_PREFIX) == ("vllm_actor", "/vllm_actor")


def test_serve_config_errors_are_clear():
    with pytest.raises(EngineError, match=r"no model; set \$COBALT_VLLM_MODEL"):
        VLLMServeConfig.from_env({})
    with pytest.raises(EngineError, match=r"\$COBALT_VLLM_NUM_REPLICAS: expected int, got 'many'"):
        VLLMServeConfig.from_env({"COBALT_VLLM_MODEL": "m", "COBALT_VLLM_NUM_REPLICAS": "many"})


def _import_shim(env_extra):
    pytest.importorskip("ray.serve")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_VLLM_")}
    env.update(env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    code = ("import vllm_engine_actor as m, sys; from ray.serve import Application;"
            "print(type(m.app).__name__, isinstance(m.app, Application), 'vllm' in sys.modules)")
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_root_shim_builds_the_app_from_the_environment():
    done = _import_shim({"COBALT_VLLM_MODEL": "Qwen/Qwen3-8B", "COBALT_VLLM_TENSOR_PARALLEL_SIZE": "2"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Application", "True", "False"]  # vLLM itself is not imported
    missing = _import_shim({})
    assert missing.returncode != 0 and "COBALT_VLLM_MODEL" in missing.stderr
