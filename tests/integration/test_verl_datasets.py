"""`cobalt make-verl-data` output loaded by the pinned verl's own dataset class (RLHFDataset)
with the real Qwen3 tokenizer: rows, schema, validation flag and length filtering."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

verl_dataset = pytest.importorskip("verl.utils.dataset.rl_dataset")
pytestmark = pytest.mark.verl

from omegaconf import OmegaConf  # noqa: E402  (verl's own dependency)

from cobalt import prompts  # noqa: E402
from cobalt.cli import main  # noqa: E402
from cobalt.training_data.trajectories import ChatTokenCounter  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "trajectories"
TOKENIZER = REPO.parent / "shared" / "data" / "qwen3_tokenizer"


@pytest.fixture(scope="module")
def counter() -> ChatTokenCounter:
    return ChatTokenCounter.from_pretrained(str(TOKENIZER))


@pytest.fixture(scope="module")
def cobalt_data(tmp_path_factory) -> Path:
    """Train prompts (training mode) and validation prompts (--is-test) from the fixture, as veRL parquet."""
    root = tmp_path_factory.mktemp("cobalt")
    src = FIXTURES / "inference_records.jsonl"
    common = ["--model-name", str(TOKENIZER), "--no-progress"]
    assert main(["build-prompts", "-i", str(src), "-o", str(root / "train.jsonl"), *common]) == 0
    assert main(["build-prompts", "-i", str(src), "-o", str(root / "val.parquet"), "--is-test", *common]) == 0
    assert main(["make-verl-data", "--kind", "cobalt", "--train", str(root / "train.jsonl"),
                 "--val", str(root / "val.parquet"), "--out-dir", str(root / "verl"),
                 "--tokenizer", str(TOKENIZER), "--no-progress"]) == 0
    return root


def load(path: Path, tmp_path: Path, counter: ChatTokenCounter, max_prompt_length: int = 20_000):
    config = OmegaConf.create({
        "cache_dir": str(tmp_path / "verl_cache"),
        "prompt_key": "prompt",
        "max_prompt_length": max_prompt_length,
        "filter_overlong_prompts": True,
        "filter_overlong_prompts_workers": None,  # in-process: no pool to pickle the tokenizer into
        "truncation": "error",
    })
    return verl_dataset.RLHFDataset(data_files=str(path), tokenizer=counter.tokenizer, config=config)


def test_cobalt_parquet_loads_in_verl(cobalt_data, tmp_path, counter):
    source = [json.loads(line) for line in (cobalt_data / "train.jsonl").read_text().splitlines()]
    train = load(cobalt_data / "verl" / "train.parquet", tmp_path, counter)
    assert len(train) == len(source) == 30  # hand count: tests/unit/data/test_trajectories_cli.py
    for i in range(len(train)):
        row, src = train[i], source[i]
        assert row["data_source"] == "code_taco_verified" and row["ability"] == "code"
        assert row["raw_prompt"] == src["messages"]
        assert row["reward_model"] == {"style": "rule", "ground_truth": src["test_cases"]}
        assert json.loads(row["reward_model"]["ground_truth"])["inputs"]  # a test set, as JSON
        info = row["extra_info"]
        assert info["split"] == "train" and info["is_val"] is False and info["index"] == i == row["index"]
        assert info["problem_id"] == src["problem_id"] and info["turn"] == src["turn"]
        assert info["prev_best_pass_rate"] == pytest.approx(src["prev_best_pass_rate"])
    val = load(cobalt_data / "verl" / "val.parquet", tmp_path, counter)
    assert len(val) == 16
    assert all(val[i]["extra_info"]["is_val"] is True and val[i]["extra_info"]["split"] == "val" for i in range(len(val)))
    assert max(val[i]["extra_info"]["turn"] for i in range(len(val))) == 3


def test_verl_length_filter_agrees_with_our_token_counts(cobalt_data, tmp_path, counter):
    source = [json.loads(line) for line in (cobalt_data / "train.jsonl").read_text().splitlines()]
    lengths = sorted(counter(r["messages"]) for r in source)
    limit = lengths[len(lengths) // 2]
    expected = [r for r in source if counter(r["messages"]) <= limit]
    assert 0 < len(expected) < len(source)
    filtered = load(cobalt_data / "verl" / "train.parquet", tmp_path, counter, max_prompt_length=limit)
    assert len(filtered) == len(expected)
    # make-verl-data's own limit drops exactly the rows that veRL's filter drops
    out = tmp_path / "limited"
    assert main(["make-verl-data", "--kind", "cobalt", "--train", str(cobalt_data / "train.jsonl"), "--out-dir",
                 str(out), "--tokenizer", str(TOKENIZER), "--max-prompt-tokens", str(limit), "--no-progress"]) == 0
    ours = load(out / "train.parquet", tmp_path, counter)

    def keys(ds) -> list:
        rows = [ds[i] for i in range(len(ds))]
        return sorted((r["extra_info"]["problem_id"], r["extra_info"]["turn"], json.dumps(r["raw_prompt"])) for r in rows)

    assert keys(ours) == keys(filtered) == sorted(
        (r["problem_id"], r["turn"], json.dumps(r["messages"])) for r in expected)
    summary = json.loads((out / "make_verl_data.summary.json").read_text())
    (split,) = summary["splits"]
    assert split["dropped_overlong"] == len(source) - len(expected)
    assert split["lengths"]["max"] <= limit and split["lengths"]["count"] == len(expected)


def test_single_turn_parquet_loads_in_verl(tmp_path, counter, capsys):
    problems = FIXTURES / "problems.jsonl"
    lines = problems.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[2])
    del bad["public_test_cases"]
    train_src = tmp_path / "train.jsonl"
    train_src.write_text("\n".join(lines[:2] + [json.dumps(bad)] + lines[3:]) + "\n", encoding="utf-8")
    out = tmp_path / "single"
    assert main(["make-verl-data", "--kind", "single-turn", "--train", str(train_src), "--val", str(problems),
                 "--out-dir", str(out), "--tokenizer", str(TOKENIZER), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert f"{train_src}:3: field 'public_test_cases'" in captured.err
    assert "prompt tokens: mean" in captured.out and "p90" in captured.out
    train = load(out / "train.parquet", tmp_path, counter)
    val = load(out / "val.parquet", tmp_path, counter)
    assert (len(train), len(val)) == (6, 7)
    expected = [json.loads(line) for line in lines]
    prompts.clear_cache()
    for i in range(len(val)):
        row = val[i]
        assert row["raw_prompt"] == [
            {"role": "system", "content": prompts.system_prompt()},
            {"role": "user", "content": prompts.problem_prompt(expected[i]["question"])},
        ]
        truth = json.loads(row["reward_model"]["ground_truth"])
        public, hidden = json.loads(expected[i]["public_test_cases"]), json.loads(expected[i]["hidden_test_cases"])
        assert truth["inputs"] == public["inputs"] + hidden["inputs"]
        assert row["extra_info"] | {} == {"split": "val", "index": i, "prev_best_pass_rate": 0.0, "is_val": True,
                                          "problem_id": expected[i]["id"], "turn": 0}
    summary = json.loads((out / "make_verl_data.summary.json").read_text())
    lengths = [counter(val[i]["raw_prompt"]) for i in range(len(val))]
    val_stats = summary["splits"][1]["lengths"]
    assert val_stats["max"] == max(lengths) and val_stats["mean"] == pytest.approx(sum(lengths) / len(lengths))
    assert summary["splits"][0]["bad_records"] == 1


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        main(["make-verl-data", "--help"])
    text = capsys.readouterr().out
    for flag in ("--kind", "--train", "--val", "--output-dir", "--tokenizer", "--chat-template-kwargs", "--data-source",
                 "--max-prompt-tokens", "--template-dir", "--no-progress"):
        assert flag in text
