"""scripts/gpu/merge_fp32.py: a verl FSDP actor checkpoint (plain tensors, or DTensors as FSDP2 saves
them) merged into a Hugging Face folder that keeps float32, so updates below bf16's spacing survive."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT.parent / "shared" / "data" / "qwen3_tokenizer"


@pytest.fixture(scope="module")
def merger():
    spec = importlib.util.spec_from_file_location("merge_fp32", ROOT / "scripts" / "gpu" / "merge_fp32.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from cobalt.engines.tiny_model import build_tiny_qwen3

    out = tmp_path_factory.mktemp("base") / "model"
    build_tiny_qwen3(str(out), tokenizer_dir=str(TOKENIZER), hidden_size=32, layers=1, seed=0)
    return out


def checkpoint(tmp_path, base, wrap=lambda t: t):
    """An actor folder as verl saves it, from the base's weights with one tiny update (1e-6)."""
    from transformers import AutoModelForCausalLM

    state = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32).state_dict()
    key = "model.layers.0.mlp.down_proj.weight"
    state[key] = state[key].clone()
    state[key][0, 0] += 1e-6
    actor = tmp_path / "global_step_20" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    shutil.copy(base / "config.json", actor / "huggingface" / "config.json")
    torch.save({k: wrap(v) for k, v in state.items()}, actor / "model_world_size_1_rank_0.pt")
    return actor, state, key


def check_merged(merger, tmp_path, base, actor, state, key, capsys):
    from transformers import AutoModelForCausalLM

    target = tmp_path / "trained"
    assert merger.main(["--local-dir", str(actor), "--target", str(target), "--base", str(base)]) == 0
    merged = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).state_dict()
    assert torch.equal(merged[key], state[key])  # the 1e-6 update kept: bf16 would have rounded it away
    assert state[key][0, 0].bfloat16() == (state[key][0, 0] - 1e-6).bfloat16()
    assert json.loads((target / "config.json").read_text()).get("dtype", "float32") == "float32"
    assert (target / "tokenizer.json").is_file()
    assert "merge_fp32: 1 of " in capsys.readouterr().out


def test_plain_tensors_world_size_1(merger, base, tmp_path, capsys):
    actor, state, key = checkpoint(tmp_path, base)
    check_merged(merger, tmp_path, base, actor, state, key, capsys)


def test_dtensor_shards(merger, base, tmp_path, capsys):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
        actor, state, key = checkpoint(tmp_path, base, wrap=lambda t: distribute_tensor(t, mesh, [Shard(0)]))
    finally:
        dist.destroy_process_group()
    check_merged(merger, tmp_path, base, actor, state, key, capsys)


def test_incomplete_checkpoint_is_refused(merger, tmp_path):
    (tmp_path / "model_world_size_2_rank_0.pt").write_bytes(b"")
    with pytest.raises(SystemExit, match="ranks \\[0\\] of world size 2"):
        merger.shard_files(tmp_path)
