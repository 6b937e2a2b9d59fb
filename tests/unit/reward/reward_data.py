"""Test data for the reward tests: real model answers turned into thinking responses.

The LeetCode rows come from ../shared/data/leetcode (LeetCodeDataset, MIT): ``response``
is a real model answer (reasoning, one ```python block, an explanation).
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SHARED_DATA = REPO_ROOT / ".." / "shared" / "data"
LEETCODE = SHARED_DATA / "leetcode" / "leetcode_problems.jsonl.gz"
TIKTOKEN_DIR = SHARED_DATA / "tiktoken"
QWEN3_TOKENIZER = SHARED_DATA / "qwen3_tokenizer"

# The encoding file is only available offline from the shared data folder.
os.environ["TIKTOKEN_CACHE_DIR"] = str(TIKTOKEN_DIR.resolve())

CLEAN_ROW = 198  # minimum-operations-to-collect-elements: reasoning, code, explanation
KEYWORD_SENTENCES = {
    # Appended to the clean reasoning; the comment lists the whole-word keywords.
    "kw3": "\nWait, is every value up to k present? But the array may lack one. Let me verify on example 1.",  # wait but verify
    "kw6": (  # seven keywords: over the cap
        "\nWait, what if k is larger? However the constraints rule that out. But an error here would be "
        "wrong, so let me retry and evaluate the first example."  # wait however but error wrong retry evaluate
    ),
    "kw5x": "\nWait. Wait. Wait. Wait. Wait. One error to check.",  # wait x5 (no bonus), error x1
}


def load_leetcode() -> list[dict]:
    """All LeetCode rows of the shared data set."""
    with gzip.open(LEETCODE, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def split_answer(response: str) -> tuple[str, str, str]:
    """A LeetCode model answer cut into (reasoning, code block with fences, explanation)."""
    start = response.index("```python")
    end = response.index("\n```", start + 9) + len("\n```")
    return response[:start].strip(), response[start:end], response[end:].strip()


def thinking(reasoning: str, code_block: str, explanation: str) -> str:
    """A thinking model's response: reasoning in <think>, then the block and the explanation."""
    return f"<think>\n{reasoning}\n</think>\n\n{code_block}\n\n{explanation}"


def build_responses(rows: list[dict]) -> dict[str, str]:
    """Realistic responses for every branch of the reward, keyed by kind."""
    reasoning, block, explanation = split_answer(rows[CLEAN_ROW]["response"])
    fenced = [split_answer(r["response"]) for r in rows if "```python" in r["response"]]
    long_think = "\n\n".join(r["query"] for r in rows[:10])
    long_code = "```python\n" + "\n\n".join([r["completion"] for r in rows if "`" not in r["completion"]][:60]) + "\n```"
    long_expl = "\n\n".join(e for _, _, e in fenced[1:6])
    line40 = "print('this line is forty chars long!!')\n"  # 40 characters
    line31 = "x = compute(values, k) + 1 # 2\n"  # 31 characters
    out = {
        "clean": thinking(reasoning, block, explanation),
        "no_think_end": f"{reasoning}\n\n{block}\n\n{explanation}",
        "two_think_end": thinking(reasoning, block, explanation).replace("</think>", "</think>\nok\n</think>", 1),
        "two_python": thinking(reasoning, "```python\nimport sys\n```\n\n" + block, explanation),
        "no_python": thinking(reasoning, block.replace("```python", "```py", 1), explanation),
        "unclosed": thinking(reasoning, block[: -len("\n```")], explanation),
        "extra_fence": thinking(reasoning, block, explanation + "\n\nExample:\n```\nnums = [3,1,5,4,2], k = 2\n```"),
        "backtick_code": thinking(reasoning, block.replace("class Solution:", "# see `nums`\nclass Solution:", 1), explanation),
        "repeat8": thinking(reasoning, block, explanation + "\n" + line40 * 8),
        "repeat7": thinking(reasoning, block, explanation + "\n" + line40 * 7),
        "repeat31x8": thinking(reasoning, block, explanation + "\n" + line31 * 8),
        "long_think": thinking(long_think, block, explanation),
        "long_answer": thinking(reasoning, long_code, explanation),
        "long_expl": thinking(reasoning, block, long_expl),
        "all_long": thinking(long_think, long_code, long_expl),
    }
    for kind, sentence in KEYWORD_SENTENCES.items():
        out[kind] = thinking(reasoning + sentence, block, explanation)
    return out


def call_tests(row: dict) -> dict:
    """A LeetCode row's ``input_output`` as call-based tests: one JSON argument per
    line (from ``name = value, ...``), the expected return value as JSON."""
    import ast

    inputs, outputs = [], []
    for case in row["input_output"]:
        call = ast.parse(f"f({case['input']})", mode="eval").body
        args = [ast.literal_eval(kw.value) for kw in call.keywords]
        inputs.append("".join(json.dumps(a) + "\n" for a in args))
        outputs.append(json.dumps(ast.literal_eval(case["output"])))
    return {"inputs": inputs, "outputs": outputs, "fn_name": row["entry_point"].rsplit(".", 1)[-1]}


def stdin_program(row: dict, code: str) -> str:
    """``code`` (a class Solution) as a stdin/stdout program: read the JSON arguments,
    one per line, call the method and print the JSON result."""
    method = row["entry_point"].rsplit(".", 1)[-1]
    driver = (
        "\n\nimport json as _json, sys as _sys\n"
        "_args = [_json.loads(_line) for _line in _sys.stdin if _line.strip()]\n"
        f"print(_json.dumps(Solution().{method}(*_args)))\n"
    )
    return row["prompt"] + code + driver


def with_code(row: dict, code: str) -> str:
    """The row's real thinking response with its code block's body replaced by ``code``."""
    reasoning, _, explanation = split_answer(row["response"])
    return thinking(reasoning, f"```python\n{code.rstrip()}\n```", explanation)
