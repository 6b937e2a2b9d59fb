"""``build_tiny_qwen3`` and ``cobalt tiny-model``: a real Qwen3 model folder from a config and the real tokenizer."""
from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cobalt.cli import main  # noqa: E402
from cobalt.engines.tiny_model import build_tiny_qwen3  # noqa: E402

TOKENIZER = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "qwen3_tokenizer"


def _weights(path):
    model = transformers.AutoModelForCausalLM.from_pretrained(str(path))
    return model, {k: v.clone() for k, v in model.state_dict().items()}


def test_builds_a_loadable_qwen3_with_the_real_tokenizer(tmp_path):
    out = build_tiny_qwen3(tmp_path / "a", tokenizer_dir=TOKENIZER, hidden_size=32, layers=1, seed=3)
    model, weights = _weights(out)
    assert model.config.model_type == "qwen3"
    assert (model.config.hidden_size, model.config.num_hidden_layers) == (32, 1)
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    ref = transformers.AutoTokenizer.from_pretrained(str(TOKENIZER))
    conv = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(conv, tokenize=False, enable_thinking=False) == \
        ref.apply_chat_template(conv, tokenize=False, enable_thinking=False)
    assert model.config.vocab_size >= len(ref)
    # same seed: same weights; other seed: other weights
    _, same = _weights(build_tiny_qwen3(tmp_path / "b", tokenizer_dir=TOKENIZER, hidden_size=32, layers=1, seed=3))
    _, other = _weights(build_tiny_qwen3(tmp_path / "c", tokenizer_dir=TOKENIZER, hidden_size=32, layers=1, seed=4))
    assert all(torch.equal(weights[k], same[k]) for k in weights)
    assert not all(torch.equal(weights[k], other[k]) for k in weights)


def test_cli_command(tmp_path, capsys):
    assert main(["tiny-model", "--out", str(tmp_path / "m"), "--tokenizer", str(TOKENIZER),
                 "--hidden-size", "32", "--layers", "1"]) == 0
    assert (tmp_path / "m" / "config.json").is_file()
    capsys.readouterr()
    assert main(["tiny-model", "--out", str(tmp_path / "n"), "--tokenizer", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no Qwen3 tokenizer here" in err
    assert not (tmp_path / "n").exists()
