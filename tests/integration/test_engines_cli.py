"""``cobalt generate`` end to end: engines chosen by flags, resumable output, one-line errors."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from support.openai_server import OpenAIServer  # noqa: E402

from cobalt.cli import main  # noqa: E402


def _write_prompts(path, n, start=0):
    with open(path, "a") as fh:
        for i in range(start, start + n):
            fh.write(json.dumps({"id": f"p{i}", "messages": [{"role": "user", "content": f"question {i}"}]}) + "\n")


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _one_line_error(capsys):
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1, err
    return err[0]


def test_openai_generate_is_resumable(tmp_path, openai_server):
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out.jsonl"
    _write_prompts(prompts, 3)
    argv = ["generate", "--input", str(prompts), "--output", str(out), "--engine", "openai", "--model", "test-model",
            "--base-url", openai_server.base_url, "--api-key", "sk-cli-secret", "--n", "2", "--seed", "1"]
    assert main(argv) == 0
    rows = _lines(out)
    assert [r["id"] for r in rows] == ["p0", "p1", "p2"]
    assert [c["text"] for c in rows[1]["completions"]] == ["answer 0 to: question 1", "answer 1 to: question 1"]
    assert rows[0]["engine"]["engine"] == "openai" and rows[0]["profile"] == "paper"
    assert rows[0]["sampling"]["n"] == 2
    assert "sk-cli-secret" not in out.read_text()
    _write_prompts(prompts, 2, start=3)
    before = len(openai_server.chat_requests())
    assert main(argv) == 0
    assert [r["id"] for r in _lines(out)] == ["p0", "p1", "p2", "p3", "p4"]
    assert len(openai_server.chat_requests()) - before == 2


def test_transformers_generate_with_tiny_model(tmp_path, tiny_qwen3):
    prompts, out = tmp_path / "prompts.jsonl", tmp_path / "out.jsonl"
    _write_prompts(prompts, 2)
    assert main(["generate", "--input", str(prompts), "--output", str(out), "--engine", "transformers",
                 "--model", str(tiny_qwen3), "--device", "cpu", "--max-new-tokens", "3", "--thinking", "off"]) == 0
    rows = _lines(out)
    assert [len(r["completions"]) for r in rows] == [1, 1]
    assert rows[0]["completions"][0]["completion_tokens"] == 3 and rows[0]["engine"]["engine"] == "transformers"


def test_unknown_engine(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    _write_prompts(prompts, 1)
    with pytest.raises(SystemExit) as exit_:
        main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"), "--engine", "nope",
              "--model", "m"])
    assert exit_.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_missing_model_path(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    _write_prompts(prompts, 1)
    assert main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"),
                 "--engine", "transformers", "--model", str(tmp_path / "no-model")]) == 2
    assert "does not exist" in _one_line_error(capsys)
    assert not (tmp_path / "o.jsonl").exists()


def test_unreachable_endpoint(tmp_path, capsys, closed_port):
    prompts = tmp_path / "p.jsonl"
    _write_prompts(prompts, 1)
    assert main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"), "--engine", "openai",
                 "--model", "m", "--base-url", f"http://127.0.0.1:{closed_port}/v1", "--api-key", "k"]) == 1
    assert "cannot reach the endpoint" in _one_line_error(capsys)
    assert not (tmp_path / "o.jsonl").exists()


def test_wrong_key(tmp_path, capsys):
    prompts = tmp_path / "p.jsonl"
    _write_prompts(prompts, 1)
    secret = "sk-wrong-but-secret-123"
    with OpenAIServer(api_key="sk-right") as server:
        code = main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"), "--engine", "openai",
                     "--model", "m", "--base-url", server.base_url, "--openai_api_key", secret])
        assert server.chat_requests() == []
    line = _one_line_error(capsys)
    assert code == 1 and "API key was refused" in line and secret not in line
    assert not (tmp_path / "o.jsonl").exists()


def test_bad_record_names_file_line_and_field(tmp_path, capsys, openai_server):
    prompts = tmp_path / "p.jsonl"
    _write_prompts(prompts, 1)
    with open(prompts, "a") as fh:
        fh.write(json.dumps({"id": "x", "messages": [{"role": "user"}]}) + "\n")
    assert main(["generate", "--input", str(prompts), "--output", str(tmp_path / "o.jsonl"), "--engine", "openai",
                 "--model", "m", "--base-url", openai_server.base_url]) == 2
    assert f"{prompts}:2: field 'messages[0]'" in _one_line_error(capsys)
    assert not (tmp_path / "o.jsonl").exists()
