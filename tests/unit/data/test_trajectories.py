"""The offline-trajectory rules of METHOD §4 on small hand-built records with known outcomes.

Turn texts are real model answers from the shared LeetCode data (``response``);
prompt lengths are measured with the real Qwen3 tokenizer and chat template.
Pass rates are set through the number of tests passed out of 20 (4 public,
16 hidden), so a turn that passes k tests has pass rate k / 20.
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cobalt import prompts
from cobalt.data.records import TrajectoryRecord
from cobalt.training_data.trajectories import (
    BuildConfig,
    BuildSummary,
    ChatTokenCounter,
    build_prompts,
    history_messages,
    iter_records,
    process_record,
    select_trajectories,
    write_rows,
)
from cobalt.io import RecordError

pytestmark = pytest.mark.usefixtures("tqdm_lock_of_this_process")  # see conftest.py: mutation testing forks

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "data"
LEETCODE = SHARED / "leetcode" / "leetcode_problems.jsonl.gz"
TOKENIZER = SHARED / "qwen3_tokenizer"
N_PUBLIC, N_HIDDEN = 4, 16


@pytest.fixture(scope="module")
def leetcode_rows() -> list[dict]:
    with gzip.open(LEETCODE, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def leetcode(leetcode_rows) -> list[dict]:
    """The problems whose real model answer has a fenced code block (88 of 286)."""
    return [row for row in leetcode_rows if "```" in row["response"]]


@pytest.fixture(scope="module")
def counter() -> ChatTokenCounter:
    return ChatTokenCounter.from_pretrained(str(TOKENIZER))


@pytest.fixture(scope="module")
def tokenizer(counter):
    return counter.tokenizer


@pytest.fixture(autouse=True)
def _packaged_templates(monkeypatch):
    monkeypatch.delenv(prompts.ENV_TEMPLATE_DIR, raising=False)
    prompts.clear_cache()


def make_tests(n: int, tag: str) -> dict:
    return {"inputs": [f"{tag} in {i}\n" for i in range(n)], "outputs": [f"{tag} out {i}" for i in range(n)]}


def turn(response: str, k: int, *, public: list[bool] | None = None) -> dict:
    """A turn passing k of the 20 tests: the public ones first, then hidden."""
    n_pub_pass = min(k, N_PUBLIC)
    passing = public if public is not None else [i < n_pub_pass for i in range(N_PUBLIC)]
    n_pub_pass = sum(passing)
    return {
        "response": response,
        "public": {"passing": passing, "feedback": [f"feedback of public test {i}" for i in range(N_PUBLIC)]},
        "hidden_pass_rate": (k - n_pub_pass) / N_HIDDEN,
    }


def record(pid: str, samples: list[list[dict]], question: str = "Print the answer.", *, pad: bool = True) -> dict:
    """A problem record; ``pad`` appends one failing single-turn sample (d = 0, never selected)
    so that the problem is not too easy."""
    if pad:
        samples = samples + [[turn("no code in this answer", 0)]]
    return {
        "id": pid,
        "question": question,
        "difficulty": "MEDIUM",
        "public_test_cases": json.dumps(make_tests(N_PUBLIC, "pub")),
        "hidden_test_cases": json.dumps(make_tests(N_HIDDEN, "hid")),
        "samples": [{"turns": s} for s in samples],
    }


def parse(obj: dict) -> TrajectoryRecord:
    return TrajectoryRecord.from_dict(obj, path="mem.jsonl", line=1)


def texts(leetcode, n: int, start: int = 0) -> list[str]:
    return [leetcode[(start + i) % len(leetcode)]["response"] for i in range(n)]


def run_one(obj: dict, config: BuildConfig = BuildConfig(), count=None):
    summary = BuildSummary()
    rows = process_record(parse(obj), config, count, summary)
    return rows, summary


# ------------------------------------------------------------------ pass rates and records


def test_turn_pass_rate_weights_public_and_hidden_by_test_counts(leetcode):
    r = parse(record("p", [[turn(leetcode[0]["response"], 0, public=[True, True, False, False]) | {"hidden_pass_rate": 0.25}]]))
    # (0.5 * 4 + 0.25 * 16) / 20
    assert r.pass_rates(r.samples[0]) == [pytest.approx(0.3)]


def test_without_hidden_tests_the_public_rate_is_the_pass_rate(leetcode):
    obj = record("p", [[turn(leetcode[0]["response"], 0, public=[True, False, False, False])]])
    obj["hidden_test_cases"] = json.dumps({"inputs": [], "outputs": []})
    del obj["samples"][0]["turns"][0]["hidden_pass_rate"]
    r = parse(obj)
    assert r.pass_rates(r.samples[0]) == [0.25]


def test_code_is_extracted_when_the_record_has_none(leetcode):
    text = leetcode[3]["response"]
    r = parse(record("p", [[turn(text, 0)]]))
    assert r.samples[0].turns[0].code is not None and r.samples[0].turns[0].code in text


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda o: o.pop("samples"), "samples"),
        (lambda o: o["samples"][1]["turns"][1].pop("hidden_pass_rate"), "samples[1].turns[1].hidden_pass_rate"),
        (lambda o: o["samples"][0]["turns"][0].update(hidden_pass_rate=1.5), "samples[0].turns[0].hidden_pass_rate"),
        (lambda o: o["samples"][0]["turns"][1].update(response=None), "samples[0].turns[1].response"),
        (lambda o: o["samples"][0]["turns"][0]["public"].update(passing=[1, 0, 0, 0]), "samples[0].turns[0].public.passing"),
        (lambda o: o["samples"][0]["turns"][0]["public"].update(feedback=["x"]), "samples[0].turns[0].public.feedback"),
        (lambda o: o["samples"][0].update(turns=[]), "samples[0].turns"),
        (lambda o: o.pop("public_test_cases"), "public_test_cases"),
    ],
)
def test_bad_record_errors_name_the_field(leetcode, mutate, field):
    t = texts(leetcode, 2)
    obj = record("p", [[turn(t[0], 0), turn(t[1], 20)]] * 2)
    obj = json.loads(json.dumps(obj))
    mutate(obj)
    with pytest.raises(RecordError) as info:
        TrajectoryRecord.from_dict(obj, path="runs/x.jsonl", line=7)
    assert info.value.field == field
    assert str(info.value).startswith("runs/x.jsonl:7: field '" + field + "'")


# ------------------------------------------------------------------ dynamic sampling


def test_problem_whose_first_turns_all_pass_is_too_easy(leetcode):
    t = texts(leetcode, 3)
    obj = record("easy", [[turn(t[i], 20)] for i in range(3)], pad=False)
    rows, summary = run_one(obj)
    assert rows == []
    assert (summary.problems_too_easy, summary.problems_considered) == (1, 0)


def test_one_failing_first_turn_keeps_the_problem(leetcode):
    t = texts(leetcode, 3)
    obj = record("p", [[turn(t[0], 20)], [turn(t[1], 20)], [turn(t[2], 3), turn(t[0], 20)]], pad=False)
    rows, summary = run_one(obj)
    assert summary.problems_too_easy == 0 and summary.problems_considered == 1
    # the history may end with the trajectory's last recorded turn
    assert sorted(r.id for r in rows) == ["p/s2/t1", "p/s2/t2", "p/t0"]


def test_too_easy_is_judged_on_all_tests_by_default(leetcode):
    t = texts(leetcode, 2)
    # every first turn passes the 4 public tests but only half of the hidden ones: not too easy
    # on all tests (the original, METHOD §9), too easy on the public ones alone
    obj = record("p", [[turn(t[0], 12), turn(t[1], 20)], [turn(t[1], 12)]], pad=False)
    # paper stops s0 before t = 2: the feedbacks after turns 0 and 1 are both the all-passed message
    for profile, ids in (("paper", ["p/s0/t1", "p/t0"]), ("cobalt", ["p/s0/t1", "p/s0/t2", "p/t0"])):
        rows, summary = run_one(obj, BuildConfig(profile=profile))
        assert summary.problems_too_easy == 0
        assert sorted(r.id for r in rows) == ids
    assert run_one(obj, BuildConfig(too_easy_by="public"))[1].problems_too_easy == 1


# ------------------------------------------------------------------ trajectory selection


def selection_record(leetcode) -> dict:
    t = texts(leetcode, 4, start=10)
    return record("sel", [
        [turn(t[0], 0), turn(t[1], 20)],               # s0: 0 -> 1, d = 1, correct       (train, not eval: d largest)
        [turn(t[1], 10), turn(t[2], 10)],              # s1: d = 0                         (never)
        [turn(t[2], 2), turn(t[3], 12)],               # s2: .1 -> .6, d = .5, not correct (eval: smallest d > 0)
        [turn(t[3], 20), turn(t[0], 0)],               # s3: 1 -> 0, d = 1, correct at turn 0 (train)
        [turn(t[0], 8), turn(t[1], 8), turn(t[2], 8)],  # s4: d = 0
    ])


def test_training_keeps_improving_trajectories_that_reach_full_correctness(leetcode):
    assert select_trajectories(parse(selection_record(leetcode)), BuildConfig()) == [0, 3]


def test_evaluation_keeps_the_one_with_the_smallest_positive_range(leetcode):
    assert select_trajectories(parse(selection_record(leetcode)), BuildConfig(is_test=True)) == [2]


def test_evaluation_ties_go_to_the_first_sample(leetcode):
    t = texts(leetcode, 2)
    obj = record("tie", [[turn(t[0], 4), turn(t[1], 8)], [turn(t[1], 20), turn(t[0], 16)], [turn(t[0], 1), turn(t[1], 5)]])
    # d = .2, .2, .2 -> sample 0 (cobalt rounds d to 12 decimals, so these tie)
    assert select_trajectories(parse(obj), BuildConfig(is_test=True, profile="cobalt")) == [0]


def test_evaluation_sorts_raw_float_ranges_under_paper(leetcode):
    # process_multi_turn_taco.py: pass_rate_diffs = (max - min) of the weighted rates, sorted raw.
    # Rates (public*4 + hidden*16) / 20: s0 0.2 -> 0.4, d = 0.4 - 0.2 = 0.2; s1 1.0 -> 0.8,
    # d = 1.0 - 0.8 = 0.19999999999999996; s2 0.05 -> 0.25, d = 0.25 - 0.05 = 0.2.
    # The smallest raw d is s1's.
    t = texts(leetcode, 2)
    obj = record("tie", [[turn(t[0], 4), turn(t[1], 8)], [turn(t[1], 20), turn(t[0], 16)], [turn(t[0], 1), turn(t[1], 5)]])
    assert select_trajectories(parse(obj), BuildConfig(is_test=True)) == [1]


def test_max_variance_down_sampling_of_six_kept_trajectories(leetcode):
    t = texts(leetcode, 2, start=20)
    # all end correct; first-turn k -> d = 1 - k/20: k=12 .4, k=0 1.0, k=18 .1, k=4 .8, k=16 .2, k=8 .6
    firsts = [12, 0, 18, 4, 16, 8]
    obj = record("mv", [[turn(t[0], k), turn(t[1], 20)] for k in firsts] + [[turn(t[0], 20), turn(t[1], 20)]])
    # sorted d: .1 (s2) .2 (s4) .4 (s0) .6 (s5) .8 (s3) 1.0 (s1); best variance: 2 smallest + 2 largest
    assert select_trajectories(parse(obj), BuildConfig()) == [2, 4, 3, 1]
    rows, summary = run_one(obj)
    assert summary.trajectories_kept == 4
    assert {r.sample_index for r in rows} == {None, 2, 4, 3, 1}


def test_down_sampling_flags_change_m(leetcode):
    t = texts(leetcode, 2, start=20)
    obj = record("mv", [[turn(t[0], k), turn(t[1], 20)] for k in (12, 0, 18, 4, 16, 8)])
    # m = 2: sets {.1, 1.0} (j=1) beats {.1, .2} (j=2)
    assert select_trajectories(parse(obj), BuildConfig(max_trajectories=2)) == [2, 1]


def test_variance_pool_flag_limits_the_candidates(leetcode):
    t = texts(leetcode, 2, start=20)
    obj = record("mv", [[turn(t[0], k), turn(t[1], 20)] for k in (12, 0, 18, 4, 16, 8)])
    # d = .4 1.0 .1 .8 .2 .6; n = 4: the pool is the four smallest (.1 s2, .2 s4, .4 s0, .6 s5), all kept
    assert select_trajectories(parse(obj), BuildConfig(variance_pool=4)) == [2, 4, 0, 5]


def test_evaluation_without_an_improving_trajectory_keeps_only_the_first_turn_prompt(leetcode):
    t = texts(leetcode, 2)
    obj = record("flat", [[turn(t[0], 8), turn(t[1], 8)], [turn(t[1], 20), turn(t[0], 20)]])  # d = 0 everywhere
    assert select_trajectories(parse(obj), BuildConfig(is_test=True)) == []
    rows, summary = run_one(obj, BuildConfig(is_test=True))
    assert [r.id for r in rows] == ["flat/t0"] and summary.problems_kept == 0


def test_improvement_range_by_hand():
    from cobalt.training_data.trajectories import improvement_range

    assert improvement_range([]) == 0.0
    assert improvement_range([0.25]) == 0.0
    assert improvement_range([0.2, 1.0, 0.4]) == 0.8
    assert improvement_range([1.0, 0.8]) == improvement_range([0.4, 0.2]) == 0.2  # equal after rounding


# ------------------------------------------------------------------ partial-trajectory prompts


def test_partial_prompts_messages_and_prev_best(leetcode):
    t = texts(leetcode, 4, start=30)
    fails_at_2 = [True, True, False, False]
    obj = record("pp", [[turn(t[0], 2), turn(t[1], 0, public=[True, True, True, False]) | {"hidden_pass_rate": 0.5},
                         turn(t[2], 3, public=fails_at_2), turn(t[3], 20)]],
                 question="Read n and print n + 1.")
    rows, summary = run_one(obj)
    by_turn = {r.turn: r for r in rows}
    assert sorted(by_turn) == [0, 1, 2, 3]
    # prev best over the turns in the prompt: rates .1, (3 + 8)/20 = .55, .15
    assert by_turn[0].prev_best_pass_rate == 0.0
    assert by_turn[1].prev_best_pass_rate == pytest.approx(0.1)
    assert by_turn[2].prev_best_pass_rate == pytest.approx(0.55)
    assert by_turn[3].prev_best_pass_rate == pytest.approx(0.55)

    system = prompts.system_prompt()
    first_user = prompts.problem_prompt("Read n and print n + 1.")
    assert by_turn[0].messages == [{"role": "system", "content": system}, {"role": "user", "content": first_user}]
    m3 = by_turn[3].messages
    assert [m["role"] for m in m3] == ["system", "user"] + ["assistant", "user"] * 3
    assert m3[2]["content"] == t[0].strip()
    assert m3[3]["content"] == prompts.repair_prompt("feedback of public test 2")  # k=2: tests 0,1 pass
    assert m3[5]["content"] == prompts.repair_prompt("feedback of public test 3")
    assert m3[7]["content"] == prompts.repair_prompt("feedback of public test 2")
    assert by_turn[2].messages == m3[:6] and by_turn[1].messages == m3[:4]
    row = by_turn[2]
    assert row.id == "pp/s0/t2" and row.problem_id == "pp" and row.sample_index == 0
    assert json.loads(row.public_test_cases) == make_tests(N_PUBLIC, "pub")
    all_tests = json.loads(row.test_cases)
    assert all_tests["inputs"] == make_tests(4, "pub")["inputs"] + make_tests(16, "hid")["inputs"]
    assert (summary.first_turn_prompts, summary.partial_prompts, summary.prompts) == (1, 3, 4)


def test_all_public_passed_feedback_message(leetcode):
    t = texts(leetcode, 2)
    obj = record("ap", [[turn(t[0], 10), turn(t[1], 20)]])
    (row,) = [r for r in run_one(obj)[0] if r.turn == 1]
    # the all-passed sentence is wrapped in the repair instruction, like any feedback
    assert row.messages[-1]["content"] == prompts.repair_prompt(prompts.feedback_all_public_passed())


def test_instruction_of_the_data_set_is_used_as_is(leetcode):
    t = texts(leetcode, 2)
    obj = record("ins", [[turn(t[0], 0), turn(t[1], 20)]]) | {"instruction": "LCB instruction text"}
    for row in run_one(obj)[0]:
        assert row.messages[1] == {"role": "user", "content": "LCB instruction text"}


def test_history_text_depends_on_the_thinking_flag(leetcode):
    answer = "\n\n".join(texts(leetcode, 12, start=40))
    assert len(answer) > 6000
    reasoning = "Let me reason about the problem first.\n" + leetcode[5]["response"]
    # two </think>: the history keeps what follows the LAST one (METHOD §9)
    thinking = f"<think>\n{reasoning}\n</think>\nstray text\n</think>\n\n  {answer}  "
    obj = record("th", [[turn(thinking, 0), turn(thinking, 20)]])

    def history(config):
        (row,) = [r for r in run_one(obj, config)[0] if r.turn == 1]
        return row.messages[2]["content"]

    for profile in ("paper", "cobalt"):
        content = history(BuildConfig(enable_thinking=True, profile=profile))
        assert content == answer[:6000] and len(content) == 6000  # answer has no outer blanks of its own
        assert history(BuildConfig(enable_thinking=True, history_max_chars=0, profile=profile)) == answer
        # without the flag (and for API models) the full response, uncut
        assert history(BuildConfig(profile=profile)) == thinking


def test_history_cut_follows_the_record_unless_a_flag_overrides(leetcode):
    # The original's prompts reuse the rollout's conversations, cut (or not) by the rollout's own
    # --enable_thinking: a record written with enable_thinking true keeps the answer after the last
    # </think>, stripped, 6,000 characters; the build flag, when given, wins.
    answer = "\n\n".join(texts(leetcode, 12, start=40))
    thinking = f"<think>\nplan\n</think>\n\n  {answer}  "
    obj = dict(record("th", [[turn(thinking, 0), turn(thinking, 20)]]), enable_thinking=True)

    def history(config, record_obj=obj):
        (row,) = [r for r in run_one(record_obj, config)[0] if r.turn == 1]
        return row.messages[2]["content"]

    assert history(BuildConfig()) == answer[:6000]
    assert history(BuildConfig(enable_thinking=False)) == thinking
    assert history(BuildConfig(), dict(obj, enable_thinking=False)) == thinking
    assert history(BuildConfig(enable_thinking=True), dict(obj, enable_thinking=False)) == answer[:6000]


def test_history_without_think_tag_is_kept_unstripped(leetcode):
    text = "  " + leetcode[7]["response"]
    obj = record("nt", [[turn(text, 0), turn(text, 20)]])
    (row,) = [r for r in run_one(obj, BuildConfig(enable_thinking=True))[0] if r.turn == 1]
    assert row.messages[2]["content"] == text[:6000]


def test_history_is_limited_to_three_turns(leetcode):
    t = texts(leetcode, 9, start=50)
    obj = record("long", [[turn(t[i], i) for i in range(9)]])  # .0 .05 ... .4: d > 0, never correct
    rows, _ = run_one(obj, BuildConfig(is_test=True))
    assert sorted(r.turn for r in rows) == [0, 1, 2, 3]
    assert max(len(r.messages) for r in rows) == 2 + 2 * 3
    rows, _ = run_one(obj, BuildConfig(is_test=True, history_turns=5))
    assert sorted(r.turn for r in rows) == [0, 1, 2, 3, 4, 5]


def test_trajectory_shorter_than_the_history_limit(leetcode):
    t = texts(leetcode, 2)
    rows, _ = run_one(record("short", [[turn(t[0], 3), turn(t[1], 20)]]))
    assert sorted(r.turn for r in rows) == [0, 1, 2]


# Early stop, by hand. Each trajectory has 4 turns given as tests passed out of 20 (>= 4:
# every public test passes, so the feedback is the all-passed message; 20: fully correct).
# Expected: the turns t of the emitted partial prompts (history_turns = 3), per rule.
EARLY_STOP_CASES = [
    # turns       paper      public     correct
    ([10, 20, 20, 20], [1], [1], [1, 2]),           # all-passed feedback after turns 0 and 1
    ([20, 2, 20, 20], [], [1, 2, 3], [1, 2, 3]),     # issue rule (b): rate 1.0 at turns 0 and 2, t = 1
    ([2, 12, 16, 20], [1, 2], [1, 2], [1, 2, 3]),   # public passes at turns 1, 2, hidden does not
    ([20, 20, 3, 20], [1], [1], [1]),                # two correct turns first
    ([3, 20, 2, 20], [1, 2, 3], [1, 2, 3], [1, 2, 3]),  # rule (b) only looks at t = 1 (turns 1, 3 here)
    ([0, 20, 4, 1], [1, 2], [1, 2], [1, 2, 3]),     # correct, then all-public but not correct
]


@pytest.mark.parametrize("ks, paper, public, correct", EARLY_STOP_CASES)
def test_early_stop_rules(leetcode, ks, paper, public, correct):
    t = texts(leetcode, 4, start=60)
    obj = record("es", [[turn(t[i], k) for i, k in enumerate(ks)]])
    expected = {"paper": paper, "public": public, "correct": correct}
    for rule, turns in expected.items():
        rows, summary = run_one(obj, BuildConfig(stop_when=rule))
        assert sorted(r.turn for r in rows if r.turn) == turns, rule
        assert summary.early_stops == (len(turns) < 3), rule


def test_early_stop_rule_follows_the_profile(leetcode):
    assert BuildConfig().stop_when == "paper" and BuildConfig(profile="paper").stop_when == "paper"
    assert BuildConfig(profile="cobalt").stop_when == "correct"
    assert BuildConfig(profile="cobalt", stop_when="public").stop_when == "public"
    t = texts(leetcode, 4, start=60)
    obj = record("es", [[turn(t[i], k) for i, k in enumerate([20, 2, 20, 20])]])
    assert [r.turn for r in run_one(obj)[0]] == [0]
    assert sorted(r.turn for r in run_one(obj, BuildConfig(profile="cobalt"))[0]) == [0, 1, 2, 3]


def test_three_turn_trajectory_is_enough_for_rule_b(leetcode):
    t = texts(leetcode, 3, start=60)
    obj = record("three", [[turn(t[0], 20), turn(t[1], 2), turn(t[2], 20)]])
    rows, summary = run_one(obj)  # paper: pass rate 1.0 at turns 0 and 2, so no partial prompt
    assert [r.turn for r in rows] == [0] and summary.early_stops == 1
    rows, _ = run_one(obj, BuildConfig(stop_when="public"))
    assert sorted(r.turn for r in rows if r.turn) == [1, 2, 3]


def test_two_turn_trajectory_has_no_turn_2_for_rule_b(leetcode):
    t = texts(leetcode, 2, start=60)
    rows, summary = run_one(record("two", [[turn(t[0], 20), turn(t[1], 3)]]))
    assert sorted(r.turn for r in rows if r.turn) == [1, 2] and summary.early_stops == 0


def test_length_cut_with_the_qwen3_chat_template(leetcode, counter, tokenizer):
    t = texts(leetcode, 4, start=70)
    obj = record("len", [[turn(t[0], 0), turn(t[1], 3), turn(t[2], 2), turn(t[3], 20)]])
    parsed = parse(obj)
    lengths = [
        len(tokenizer.apply_chat_template(history_messages(parsed.problem, parsed.samples[0], k, BuildConfig()),
                                          tokenize=True, add_generation_prompt=True)["input_ids"])
        for k in (1, 2, 3)
    ]
    assert lengths[0] < lengths[1] < lengths[2]
    assert [counter(history_messages(parsed.problem, parsed.samples[0], k, BuildConfig())) for k in (1, 2, 3)] == lengths
    limit = (lengths[0] + lengths[1]) // 2
    rows, summary = run_one(obj, BuildConfig(max_prompt_tokens=limit), counter)
    assert sorted(r.turn for r in rows) == [0, 1] and summary.prompts_cut_by_length == 1
    # a prompt exactly at the limit is kept (only longer ones are cut)
    rows, summary = run_one(obj, BuildConfig(max_prompt_tokens=lengths[1]), counter)
    assert sorted(r.turn for r in rows) == [0, 1, 2] and summary.prompts_cut_by_length == 1


def test_default_10000_token_limit_on_long_thinking_trajectories(leetcode, counter):
    long_answer = "\n\n".join(texts(leetcode, 12, start=100))
    responses = [f"<think>\n{leetcode[i]['response']}\n</think>\n{long_answer}" for i in range(4)]
    question = ""
    for row in leetcode:  # grow a real, long statement until the first-turn prompt is ~7,000 tokens
        question += row["query"].split("### Question:", 1)[-1].strip() + "\n\n"
        if counter([{"role": "user", "content": question}]) > 7000:
            break
    obj = record("big", [[turn(responses[0], 0), turn(responses[1], 3), turn(responses[2], 2), turn(responses[3], 20)]],
                 question=question)
    parsed = parse(obj)
    config = BuildConfig(enable_thinking=True)
    lengths = [counter(history_messages(parsed.problem, parsed.samples[0], k, config)) for k in (1, 2, 3)]
    expected = [k for k, n in zip((1, 2, 3), lengths) if n <= 10_000]
    assert 0 < len(expected) < 3, lengths  # the data really crosses the limit
    print("prompt lengths t=1..3:", lengths)
    rows, summary = run_one(obj, config, counter)
    assert sorted(r.turn for r in rows if r.turn) == expected
    assert summary.prompts_cut_by_length == 1


# ------------------------------------------------------------------ whole files


def write_jsonl(path: Path, lines: list) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for item in lines:
            fh.write((item if isinstance(item, str) else json.dumps(item)) + "\n")
    return path


def test_file_with_bad_records_processes_the_others(tmp_path, leetcode):
    t = texts(leetcode, 2)
    good = record("good", [[turn(t[0], 0), turn(t[1], 20)]])
    missing = json.loads(json.dumps(good)) | {"id": "bad"}
    del missing["samples"][0]["turns"][1]["hidden_pass_rate"]
    path = write_jsonl(tmp_path / "in.jsonl", [good, "{not json", missing, record("easy", [[turn(t[0], 20)]], pad=False)])
    rows, summary = build_prompts(path, BuildConfig(), None)
    assert sorted(r.id for r in rows) == ["good/s0/t1", "good/s0/t2", "good/t0"]
    assert (summary.records_read, summary.records_valid, summary.bad_records) == (4, 2, 2)
    assert summary.problems_too_easy == 1 and summary.problems_kept == 1
    assert any(e.startswith(f"{path}:2") for e in summary.errors)
    assert any(e.startswith(f"{path}:3: field 'samples[0].turns[1].hidden_pass_rate'") for e in summary.errors)


def test_seeded_shuffle(tmp_path, leetcode):
    # properties only (the expected order is not recomputed with the code's own shuffle): a seed
    # gives one order, other seeds other orders of the same rows, and rows of one problem are
    # spread out rather than left in file order
    t = texts(leetcode, 3)
    recs = [record(f"p{i}", [[turn(t[0], i % 3), turn(t[1], 10), turn(t[2], 20)]]) for i in range(12)]
    path = write_jsonl(tmp_path / "in.jsonl", recs)
    a, _ = build_prompts(path, BuildConfig(seed=1), None)
    b, _ = build_prompts(path, BuildConfig(seed=1), None)
    others = [build_prompts(path, BuildConfig(seed=s), None)[0] for s in (2, 3)]
    ids = [r.id for r in a]
    assert ids == [r.id for r in b]
    # by hand: each problem gives t0 and partial prompts t1, t2 (turn 1 passes the public
    # tests but the turn-0 feedback is a failure, so no early stop): 3 rows x 12 problems
    expected = sorted(f"p{i}/{suffix}" for i in range(12) for suffix in ("t0", "s0/t1", "s0/t2"))
    assert sorted(ids) == expected
    for other in others:
        assert sorted(r.id for r in other) == expected and [r.id for r in other] != ids
    in_file_order = [f"p{i}/{suffix}" for i in range(12) for suffix in ("t0", "s0/t1", "s0/t2")]
    assert ids != in_file_order
    assert ids[:3] != in_file_order[:3] and len({i.split("/")[0] for i in ids[:6]}) > 2


# ------------------------------------------------------------------ found by mutation testing


def test_template_overrides_reach_every_message(tmp_path, leetcode):
    folder = tmp_path / "templates"
    folder.mkdir()
    (folder / "system.txt").write_text("SYSTEM OVERRIDE\n", encoding="utf-8")
    (folder / "instruction.txt").write_text("TASK: {question}\n", encoding="utf-8")
    (folder / "repair.txt").write_text("FIX IT\n{feedback}\n", encoding="utf-8")
    (folder / "all_public_passed.txt").write_text("ALL PUBLIC OK\n", encoding="utf-8")
    t = texts(leetcode, 3, start=80)
    # turn 0 fails public test 0, turn 1 passes every public test, turn 2 is fully correct;
    # paper stop (a) before t = 3 (feedbacks after turns 1 and 2 are both all-passed)
    obj = record("tpl", [[turn(t[0], 0), turn(t[1], 10), turn(t[2], 20)]], question="Read n and print n + 1.")
    rows, _ = run_one(obj, BuildConfig(template_dir=str(folder)))
    by_turn = {r.turn: r.messages for r in rows}
    assert sorted(by_turn) == [0, 1, 2]
    first = [{"role": "system", "content": "SYSTEM OVERRIDE"}, {"role": "user", "content": "TASK: Read n and print n + 1."}]
    assert by_turn[0] == first
    assert by_turn[2] == first + [
        {"role": "assistant", "content": t[0]},
        {"role": "user", "content": "FIX IT\nfeedback of public test 0"},
        {"role": "assistant", "content": t[1]},
        {"role": "user", "content": "FIX IT\nALL PUBLIC OK"},
    ]
    assert by_turn[1] == by_turn[2][:4]


def test_history_cut_to_one_character(leetcode):
    answer = leetcode[9]["response"].strip()
    obj = record("one", [[turn(f"<think>\nfirst\n</think>\n{answer}", 0), turn(answer, 20)]])
    (row,) = [r for r in run_one(obj, BuildConfig(enable_thinking=True, history_max_chars=1))[0] if r.turn == 1]
    assert row.messages[2]["content"] == answer[0]


def test_token_limit_of_zero_means_no_limit_and_of_one_cuts_everything(leetcode, counter):
    t = texts(leetcode, 2, start=90)
    obj = record("lim", [[turn(t[0], 0), turn(t[1], 20)]])
    rows, summary = run_one(obj, BuildConfig(max_prompt_tokens=0), counter)
    assert sorted(r.turn for r in rows) == [0, 1, 2] and summary.prompts_cut_by_length == 0
    rows, summary = run_one(obj, BuildConfig(max_prompt_tokens=1), counter)
    assert [r.turn for r in rows] == [0] and summary.prompts_cut_by_length == 1


def test_length_cuts_and_too_easy_problems_are_counted_not_flagged(leetcode, counter):
    t = texts(leetcode, 2, start=90)
    # two kept trajectories, both cut at their first prompt by a one-token limit
    obj = record("two-cut", [[turn(t[0], 0), turn(t[1], 20)], [turn(t[1], 4), turn(t[0], 20)]])
    rows, summary = run_one(obj, BuildConfig(max_prompt_tokens=1), counter)
    assert [r.turn for r in rows] == [0] and summary.trajectories_kept == 2 and summary.prompts_cut_by_length == 2
    summary = BuildSummary()
    easy = parse(record("easy", [[turn(t[0], 20)]], pad=False))
    for _ in range(3):
        assert process_record(easy, BuildConfig(), None, summary) == []
    assert summary.problems_too_easy == 3


def test_rows_carry_the_problem_difficulty(leetcode):
    t = texts(leetcode, 2)
    rows, _ = run_one(record("dif", [[turn(t[0], 0), turn(t[1], 20)]]))
    assert len(rows) == 3 and {r.difficulty for r in rows} == {"MEDIUM"}
    assert {r.to_dict()["difficulty"] for r in rows} == {"MEDIUM"}


def test_build_prompts_passes_the_token_counter_on(tmp_path, leetcode, counter):
    t = texts(leetcode, 2, start=90)
    path = write_jsonl(tmp_path / "in.jsonl", [record("p", [[turn(t[0], 0), turn(t[1], 20)]])])
    rows, summary = build_prompts(path, BuildConfig(max_prompt_tokens=1), counter)
    assert [r.id for r in rows] == ["p/t0"] and summary.prompts_cut_by_length == 1


def test_progress_bar_only_when_asked(tmp_path, leetcode, capsys):
    t = texts(leetcode, 2)
    path = write_jsonl(tmp_path / "in.jsonl", [record(f"p{i}", [[turn(t[0], 0), turn(t[1], 20)]]) for i in range(3)])
    build_prompts(path, BuildConfig(), None)
    assert capsys.readouterr().err == ""
    build_prompts(path, BuildConfig(), None, progress=True)
    err = capsys.readouterr().err
    # stderr is not a terminal here: plain lines with the total (counted before the run), no tqdm frames
    assert "\r" not in err
    lines = err.splitlines()
    assert lines and all(line.startswith("build-prompts: ") for line in lines), err
    assert lines[-1].startswith("build-prompts: 3/3 problems (100%)"), err


def test_iter_records_extracts_code_under_the_profile(tmp_path, leetcode):
    # a fence line "```python " with a trailing space: no code block for paper, one for cobalt
    response = "Here it is:\n```python \nprint(int(input()) + 1)\n```\n"
    obj = record("fence", [[turn(response, 0), turn(leetcode[0]["response"], 20)]])
    path = write_jsonl(tmp_path / "in.jsonl", [obj])
    codes = {}
    for profile in ("paper", "cobalt"):
        summary = BuildSummary()
        (rec,) = list(iter_records(path, summary, profile))
        codes[profile] = rec.samples[0].turns[0].code
        assert (summary.records_read, summary.records_valid) == (1, 1)
    assert codes == {"paper": None, "cobalt": "print(int(input()) + 1)"}


def test_token_counter_counts_the_chat_template_by_hand():
    # "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n": 9 tokens; with enable_thinking
    # false the Qwen3 template adds "<think>\n\n</think>\n\n": 4 more
    chat = [{"role": "user", "content": "hi"}]
    plain = ChatTokenCounter.from_pretrained(str(TOKENIZER))
    assert plain(chat) == 9
    assert plain([chat]) == 9  # a batch of one conversation counts as that conversation
    assert ChatTokenCounter.from_pretrained(str(TOKENIZER), {"enable_thinking": False})(chat) == 13


def test_config_checks_and_their_messages():
    from cobalt.profile import Profile

    assert BuildConfig(history_turns=1).history_turns == 1
    assert BuildConfig(max_trajectories=1, variance_pool=1).max_trajectories == 1
    for kwargs, message in [
        ({"history_turns": 0}, "history_turns must be >= 1, got 0"),
        ({"max_trajectories": 0}, "need 1 <= max_trajectories <= variance_pool, got m=0, n=16"),
        ({"max_trajectories": 5, "variance_pool": 4}, "need 1 <= max_trajectories <= variance_pool, got m=5, n=4"),
        ({"too_easy_by": "hidden"}, "too_easy_by must be 'public' or 'full', got 'hidden'"),
        ({"stop_when": "never"}, "stop_when must be one of paper, public, correct, got 'never'"),
    ]:
        with pytest.raises(ValueError) as info:
            BuildConfig(**kwargs)
        assert str(info.value) == message
    # the profile is stored as its plain name, whatever spelling or type it was given in
    for given in (Profile.COBALT, " Cobalt "):
        config = BuildConfig(profile=given)
        assert type(config.profile) is str and config.profile == "cobalt" and config.stop_when == "correct"


def test_summary_report_by_hand():
    summary = BuildSummary(records_read=9, records_valid=3, bad_records=6, problems_too_easy=1,
                           problems_considered=2, problems_kept=2, trajectories_kept=5, prompts=12,
                           first_turn_prompts=2, partial_prompts=10, early_stops=1, prompts_cut_by_length=2,
                           errors=[f"in.jsonl:{i}: bad" for i in range(1, 7)])
    assert summary.format() == "\n".join([
        "records read:              9 (3 valid)",
        "bad records (skipped):     6",
        "problems too easy:         1",
        "problems considered:       2",
        "problems kept:             2",
        "trajectories kept:         5",
        "prompts:                   12 (2 first-turn, 10 partial)",
        "early stops:               1",
        "prompts cut by length:     2",
        "  error: in.jsonl:1: bad",
        "  error: in.jsonl:2: bad",
        "  error: in.jsonl:3: bad",
        "  error: in.jsonl:4: bad",
        "  error: in.jsonl:5: bad",
    ])


def test_write_rows_jsonl_keeps_unicode_and_makes_folders(tmp_path):
    out = tmp_path / "a" / "b" / "rows.jsonl"
    write_rows([{"id": "p/t0", "text": "café → ok"}, {"id": "p/s0/t1", "n": None}], out)
    assert out.read_bytes() == ('{"id": "p/t0", "text": "café → ok"}\n{"id": "p/s0/t1", "n": null}\n').encode("utf-8")
    assert sorted(p.name for p in out.parent.iterdir()) == ["rows.jsonl"]


def test_write_rows_parquet_by_suffix(tmp_path):
    import pyarrow.parquet as pq

    rows = [{"id": "p/t0", "turn": 0, "text": "café"}, {"id": "p/s1/t2", "turn": 2, "text": "x"}]
    out = tmp_path / "new" / "rows.parquet"
    write_rows(rows, out)
    assert out.read_bytes()[:4] == b"PAR1"
    assert pq.read_table(out).to_pylist() == rows
    # any other suffix is JSONL, ".parquet" inside the name included
    other = tmp_path / "rows.parquet.jsonl"
    write_rows(rows[:1], other)
    assert other.read_text(encoding="utf-8") == '{"id": "p/t0", "turn": 0, "text": "café"}\n'


def test_failed_write_leaves_the_old_output_whole(tmp_path):
    out = tmp_path / "rows.jsonl"
    out.write_text('{"id": "old"}\n', encoding="utf-8")
    with pytest.raises(TypeError):
        write_rows([{"id": "new"}, {"id": "bad", "value": {1, 2}}], out)  # a set is not JSON
    assert out.read_text(encoding="utf-8") == '{"id": "old"}\n'
    # what was written so far sits in <output>.tmp, which the next successful write replaces
    assert (tmp_path / "rows.jsonl.tmp").read_text(encoding="utf-8") == '{"id": "new"}\n'
    write_rows([{"id": "new"}], out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.jsonl"]


def test_write_rows_writes_utf8_under_an_ascii_locale(tmp_path):
    # a child Python whose locale encoding is ASCII (C locale, no coercion, no UTF-8 mode):
    # the rows must still be UTF-8, not the locale's encoding (which cannot even write "é")
    import os
    import subprocess
    import sys

    import cobalt

    out = tmp_path / "rows.jsonl"
    code = ("import locale, sys\n"
            "from cobalt.training_data.trajectories import write_rows\n"
            "print(locale.getpreferredencoding(False))\n"
            "write_rows([{'text': 'caf\\u00e9 \\u2192 ok'}], sys.argv[1])\n")  # escaped: the command line is ASCII
    env = os.environ | {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                        "PYTHONPATH": str(Path(cobalt.__file__).resolve().parents[1])}  # the cobalt under test
    proc = subprocess.run([sys.executable, "-c", code, str(out)], env=env, capture_output=True, text=True,
                          encoding="utf-8", cwd=os.getcwd())
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() in ("ANSI_X3.4-1968", "ascii", "US-ASCII")  # the premise: an ASCII locale
    assert out.read_bytes() == '{"text": "café → ok"}\n'.encode("utf-8")
    # the same rows written here give the same bytes (and tie this test to write_rows for mutmut,
    # which maps tests to the functions they call in their own process)
    write_rows([{"text": "café → ok"}], tmp_path / "here.jsonl")
    assert (tmp_path / "here.jsonl").read_bytes() == out.read_bytes()
