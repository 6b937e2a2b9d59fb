"""The ``transformers`` engine with a tiny random Qwen3 model and the real Qwen3 tokenizer."""
from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cobalt.engines import EngineError, SamplingParams, create_engine  # noqa: E402

SHARED_TOKENIZER = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "qwen3_tokenizer"
SYSTEM = {"role": "system", "content": "You write Python programs."}
SHORT = [SYSTEM, {"role": "user", "content": "Print hello."}]
LONG = [SYSTEM, {"role": "user", "content": "Read n from stdin and print the sum of the first n squares, "
                                            "one number per line, for every test case in the input."}]
GREEDY = SamplingParams(temperature=0.0, max_new_tokens=12)


@pytest.fixture(scope="module")
def reference_tokenizer():
    """The shared Qwen3 tokenizer, loaded independently of the engine."""
    return transformers.AutoTokenizer.from_pretrained(str(SHARED_TOKENIZER))


@pytest.fixture(scope="module")
def loaded_engine(tiny_qwen3):
    eng = create_engine("transformers", str(tiny_qwen3), device="cpu", cpu_threads=1)
    eng.load()
    return eng


@pytest.fixture
async def engine(loaded_engine):
    yield loaded_engine
    await loaded_engine.stop_batching()


def _count(tok, conv, thinking):
    kwargs = {} if thinking is None else {"enable_thinking": thinking}
    text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True, **kwargs)
    return text, len(tok(text, add_special_tokens=False)["input_ids"])


@pytest.mark.parametrize("thinking", [True, False, None])
async def test_chat_template_thinking_flag_and_prompt_counts(engine, reference_tokenizer, thinking):
    expected_text, expected_count = _count(reference_tokenizer, SHORT, thinking)
    assert engine.prompt_text(SHORT, thinking) == expected_text
    if thinking is False:
        assert expected_text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    else:
        assert expected_text.endswith("<|im_start|>assistant\n")
    [[c]] = await engine.generate([SHORT], SamplingParams(max_new_tokens=4, enable_thinking=thinking, seed=1))
    assert c.prompt_tokens == expected_count


async def test_n_samples_lengths_and_finish_reason(engine, reference_tokenizer):
    outs = await engine.generate([SHORT, LONG], SamplingParams(n=3, max_new_tokens=6, seed=0))
    assert [len(o) for o in outs] == [3, 3]
    for conv, samples in zip((SHORT, LONG), outs):
        _, count = _count(reference_tokenizer, conv, None)
        for c in samples:
            assert c.prompt_tokens == count
            # a random model practically never picks an end token within 6 steps
            assert (c.finish_reason, c.completion_tokens) == ("length", 6)
            assert c.text


async def test_left_padding_keeps_greedy_output(engine):
    [[alone]] = await engine.generate([SHORT], GREEDY)
    batched = await engine.generate([LONG, SHORT, LONG], GREEDY)
    assert batched[1][0].text == alone.text
    assert batched[0][0].text == batched[2][0].text


async def test_seed_reproduces_and_changes_samples(engine):
    params = SamplingParams(n=2, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=11)
    first = await engine.generate([SHORT], params)
    again = await engine.generate([SHORT], params)
    other = await engine.generate([SHORT], SamplingParams(n=2, temperature=1.0, top_p=1.0, max_new_tokens=8, seed=12))
    assert [c.text for c in first[0]] == [c.text for c in again[0]]
    assert [c.text for c in first[0]] != [c.text for c in other[0]]


async def test_stop_string_cuts_text(engine):
    [[full]] = await engine.generate([LONG], SamplingParams(temperature=0.0, max_new_tokens=16))
    assert full.finish_reason == "length" and len(full.text) > 6
    stop = full.text[len(full.text) // 2:len(full.text) // 2 + 3]
    [[cut]] = await engine.generate([LONG], SamplingParams(temperature=0.0, max_new_tokens=16, stop=(stop,)))
    assert cut.text == full.text[:full.text.find(stop)]
    assert cut.finish_reason == "stop"
    assert 1 <= cut.completion_tokens <= full.completion_tokens


async def test_end_token_ends_a_row(engine, reference_tokenizer):
    await engine.check()
    words = reference_tokenizer("def f(): return 1", add_special_tokens=False)["input_ids"]
    im_end = reference_tokenizer.convert_tokens_to_ids("<|im_end|>")
    pad = reference_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    c = engine.finish_row(words + [im_end, pad, pad], 10, SamplingParams())
    assert (c.text, c.completion_tokens, c.finish_reason) == ("def f(): return 1", len(words) + 1, "stop")
    c = engine.finish_row(words, 10, SamplingParams(max_new_tokens=len(words)))
    assert (c.text, c.completion_tokens, c.finish_reason) == ("def f(): return 1", len(words), "length")


async def test_concurrent_callers_share_one_batch(engine):
    await engine.check()
    before = engine.batches_run
    convs = [[{"role": "user", "content": f"task number {i}"}] for i in range(6)]
    results = await asyncio.gather(*(engine.generate([c], GREEDY) for c in convs))
    assert engine.batches_run - before == 1
    singles = [await engine.generate([c], GREEDY) for c in convs[:2]]
    assert [r[0][0].text for r in results[:2]] == [s[0][0].text for s in singles]
    # different sampling settings cannot share a batch
    before = engine.batches_run
    await asyncio.gather(engine.generate([SHORT], GREEDY),
                         engine.generate([SHORT], SamplingParams(temperature=0.0, max_new_tokens=5)))
    assert engine.batches_run - before == 2


async def test_event_loop_stays_free_during_generation(engine):
    await engine.check()
    task = asyncio.ensure_future(engine.generate([LONG] * 2, SamplingParams(n=2, max_new_tokens=32)))
    while engine.running_batches == 0 and not task.done():
        await asyncio.sleep(0.005)
    seen_running = engine.running_batches  # this line runs while the batch is in the worker thread
    await task
    assert seen_running == 1


async def test_max_batch_size_splits_rows(tiny_qwen3):
    eng = create_engine("transformers", str(tiny_qwen3), device="cpu", cpu_threads=1, max_batch_size=4)
    outs = await eng.generate([SHORT, LONG, SHORT], SamplingParams(n=2, max_new_tokens=3))
    assert [len(o) for o in outs] == [2, 2, 2] and eng.batches_run == 2
    await eng.aclose()


def test_missing_model_path_is_a_clear_error(tmp_path):
    with pytest.raises(EngineError, match="model path .* does not exist"):
        create_engine("transformers", str(tmp_path / "nope"))


async def test_folder_without_a_model_fails_in_check(tmp_path):
    eng = create_engine("transformers", str(tmp_path))
    with pytest.raises(EngineError, match="cannot load model"):
        await eng.check()
