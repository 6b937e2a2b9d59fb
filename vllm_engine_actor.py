"""Thin shim for the paper's command: ``serve run vllm_engine_actor:app``.

Deploys vLLM as Ray Serve app ``vllm_actor`` (route ``/vllm_actor``); the
deployment lives in :mod:`cobalt.engines.vllm_serve`. Choose the model and
shape with environment variables: ``COBALT_VLLM_MODEL`` (hub id or local
path, required), ``COBALT_VLLM_NUM_REPLICAS``, ``COBALT_VLLM_TENSOR_PARALLEL_SIZE``,
``COBALT_VLLM_GPU_MEMORY_UTILIZATION``, ``COBALT_VLLM_MAX_MODEL_LEN``,
``COBALT_VLLM_CPUS_PER_REPLICA``, ``COBALT_VLLM_BACKEND`` (``transformers`` for a CPU
run without vLLM) (docs/ENGINES.md).
"""
from cobalt.engines.vllm_serve import build_app

app = build_app()
