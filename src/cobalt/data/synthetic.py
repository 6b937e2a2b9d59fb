"""A generated family of small stdin tasks for the learning experiment (``cobalt make-synthetic``).

Each template is a task on a list of integers parameterised by a constant ``K``
that its statement states ("print the sum of the numbers multiplied by 7").
The input is always ``n`` on the first line and ``n`` integers on the second.
Every template has a reference program and one *shared small bug*: the same
program reading the list with ``[1:]``, so that it drops the first number.

Instances are split by constant: per template, the constants ``K_RANGE`` are
shuffled with the seed and :data:`HELD_OUT_PER_TEMPLATE` of them are held out,
so no held-out instance shares its constant with a training instance of its
template. Each instance has :data:`N_PUBLIC` public and :data:`N_HIDDEN` hidden
tests, drawn so that the bug fails at least one public and one hidden test.

Output: two problems files (``train.jsonl``, ``heldout.jsonl``) in the format
``cobalt rollout`` reads, each record also carrying ``template``, ``k``,
``reference`` and ``buggy`` (the warm start's targets).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_SEED = 20261125
K_RANGE = range(2, 42)
HELD_OUT_PER_TEMPLATE = 10
N_PUBLIC = 3
N_HIDDEN = 10
BUG_SLICE = "[1:]"
"""The shared small bug: the list is read without its first number."""

_READ = "n = int(input())\na = list(map(int, input().split())){bug}\nk = {k}\n"


@dataclass(frozen=True)
class Template:
    """One task: its statement (with ``{k}``), the answer's last line of code and the answer itself."""

    name: str
    statement: str
    code: str
    """The program's lines after reading ``n``, ``a`` and ``k``."""
    answer: Callable[[list[int], int], str]


def _join(values) -> str:
    return " ".join(str(v) for v in values)


TEMPLATES: tuple[Template, ...] = (
    Template("sum_times", "Print the sum of the numbers multiplied by {k}.",
             "print(sum(a) * k)", lambda a, k: str(sum(a) * k)),
    Template("plus_each", "Print every number increased by {k}, in the input order, separated by spaces.",
             "print(' '.join(str(x + k) for x in a))", lambda a, k: _join(x + k for x in a)),
    Template("count_greater", "Print how many of the numbers are greater than {k}.",
             "print(sum(1 for x in a if x > k))", lambda a, k: str(sum(1 for x in a if x > k))),
    Template("count_divisible", "Print how many of the numbers are divisible by {k}.",
             "print(sum(1 for x in a if x % k == 0))", lambda a, k: str(sum(1 for x in a if x % k == 0))),
    Template("max_plus", "Print the largest number plus {k}.",
             "print(max(a) + k)", lambda a, k: str(max(a) + k)),
    Template("min_times", "Print the smallest number multiplied by {k}.",
             "print(min(a) * k)", lambda a, k: str(min(a) * k)),
    Template("sum_mod", "Print the sum of the numbers modulo {k}.",
             "print(sum(a) % k)", lambda a, k: str(sum(a) % k)),
    Template("times_each", "Print every number multiplied by {k}, in the input order, separated by spaces.",
             "print(' '.join(str(x * k) for x in a))", lambda a, k: _join(x * k for x in a)),
    Template("count_equal", "Print how many of the numbers are equal to {k}.",
             "print(a.count(k))", lambda a, k: str(a.count(k))),
    Template("sum_greater", "Print the sum of the numbers that are greater than {k}.",
             "print(sum(x for x in a if x > k))", lambda a, k: str(sum(x for x in a if x > k))),
    Template("mod_each", "Print every number modulo {k}, in the input order, separated by spaces.",
             "print(' '.join(str(x % k) for x in a))", lambda a, k: _join(x % k for x in a)),
    Template("count_less", "Print how many of the numbers are less than {k}.",
             "print(sum(1 for x in a if x < k))", lambda a, k: str(sum(1 for x in a if x < k))),
    Template("squares_plus", "Print the sum of the squares of the numbers plus {k}.",
             "print(sum(x * x for x in a) + k)", lambda a, k: str(sum(x * x for x in a) + k)),
    Template("range_times", "Print the difference between the largest and the smallest number multiplied by {k}.",
             "print((max(a) - min(a)) * k)", lambda a, k: str((max(a) - min(a)) * k)),
    Template("div_sum", "Print the sum of the integer quotients of the numbers divided by {k} (rounded down).",
             "print(sum(x // k for x in a))", lambda a, k: str(sum(x // k for x in a))),
    Template("first_plus", "Print the first number plus {k}.",
             "print(a[0] + k)", lambda a, k: str(a[0] + k)),
    Template("xor_sum", "Print the sum of the numbers after each is combined with {k} by bitwise xor.",
             "print(sum(x ^ k for x in a))", lambda a, k: str(sum(x ^ k for x in a))),
    Template("pairs_sum", "Print how many pairs of positions i < j have numbers adding up to {k}.",
             "print(sum(1 for i in range(len(a)) for j in range(i + 1, len(a)) if a[i] + a[j] == k))",
             lambda a, k: str(sum(1 for i in range(len(a)) for j in range(i + 1, len(a)) if a[i] + a[j] == k))),
    Template("minus_each", "Print every number decreased by {k}, in the input order, separated by spaces.",
             "print(' '.join(str(x - k) for x in a))", lambda a, k: _join(x - k for x in a)),
    Template("count_not_divisible", "Print how many of the numbers are not divisible by {k}.",
             "print(sum(1 for x in a if x % k != 0))", lambda a, k: str(sum(1 for x in a if x % k != 0))),
)


def program(template: Template, k: int, *, buggy: bool = False) -> str:
    """The reference program of ``template`` for constant ``k`` (with the shared bug when ``buggy``)."""
    return _READ.format(bug=BUG_SLICE if buggy else "", k=k) + template.code + "\n"


def question(template: Template, k: int) -> str:
    """The problem statement of one instance."""
    return ("You are given a list of integers. The first line of the input holds n, the number of integers; "
            "the second line holds the n integers separated by spaces. "
            + template.statement.format(k=k))


def _numbers(rng: random.Random, k: int) -> list[int]:
    n = rng.randint(2, 8)
    # values near k, so that comparisons, equalities and pair sums with k happen
    return [rng.randint(0, 2 * k + 5) for _ in range(n)]


def make_tests(template: Template, k: int, rng: random.Random, count: int) -> tuple[list[str], list[str]]:
    """``count`` stdin tests; at least one of them fails the shared bug (the answer on ``a[1:]`` differs)."""
    inputs, outputs = [], []
    while len(inputs) < count:
        a = _numbers(rng, k)
        inputs.append(f"{len(a)}\n{_join(a)}\n")
        outputs.append(template.answer(a, k) + "\n")
    if all(template.answer(_parse(i)[1:], k) + "\n" == o for i, o in zip(inputs, outputs)):
        for _ in range(1000):
            a = _numbers(rng, k)
            if template.answer(a[1:], k) != template.answer(a, k):
                inputs[0], outputs[0] = f"{len(a)}\n{_join(a)}\n", template.answer(a, k) + "\n"
                break
        else:
            raise RuntimeError(f"{template.name}, k={k}: no input tells the bug apart")
    return inputs, outputs


def _parse(stdin: str) -> list[int]:
    return [int(x) for x in stdin.split()[1:]]


def split_constants(seed: int) -> dict[str, tuple[list[int], list[int]]]:
    """Per template: (training constants, held-out constants), disjoint, fixed by ``seed``."""
    out = {}
    for index, template in enumerate(TEMPLATES):
        ks = list(K_RANGE)
        random.Random(f"{seed}/{index}/split").shuffle(ks)
        out[template.name] = (sorted(ks[HELD_OUT_PER_TEMPLATE:]), sorted(ks[:HELD_OUT_PER_TEMPLATE]))
    return out


def instance(template: Template, k: int, seed: int, split: str) -> dict:
    """One problems-file record (public and hidden stdin tests, the reference and the buggy program)."""
    rng = random.Random(f"{seed}/{template.name}/{k}")
    pub_in, pub_out = make_tests(template, k, rng, N_PUBLIC)
    hid_in, hid_out = make_tests(template, k, rng, N_HIDDEN)

    def tests(inputs, outputs):
        return json.dumps({"inputs": inputs, "outputs": outputs})

    return {
        "id": f"synthetic/{template.name}/k{k}",
        "question": question(template, k),
        "difficulty": "synthetic",
        "source": "synthetic",
        "public_test_cases": tests(pub_in, pub_out),
        "hidden_test_cases": tests(hid_in, hid_out),
        "test_cases": tests(pub_in + hid_in, pub_out + hid_out),
        "split": split,
        "template": template.name,
        "k": k,
        "reference": program(template, k),
        "buggy": program(template, k, buggy=True),
    }


def generate(seed: int = DEFAULT_SEED) -> tuple[list[dict], list[dict]]:
    """(training records, held-out records), each sorted by template then constant."""
    constants = split_constants(seed)
    train, held = [], []
    for template in TEMPLATES:
        train_ks, held_ks = constants[template.name]
        train += [instance(template, k, seed, "train") for k in train_ks]
        held += [instance(template, k, seed, "heldout") for k in held_ks]
    return train, held


def write_jsonl(path: Path, records: list[dict]) -> None:
    """Write ``records`` one JSON object a line (atomically: a temporary file, then a rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record) + "\n")
    tmp.replace(path)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt make-synthetic``."""
    parser.add_argument("--out-dir", required=True, help="folder for train.jsonl and heldout.jsonl")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="generator seed (tests and the split)")
    parser.add_argument("--train-limit", type=int, default=0,
                        help="keep every m-th training record so that about this many remain (0: all; dry runs)")
    parser.add_argument("--heldout-limit", type=int, default=0, help="the same for the held-out records")


def _thin(records: list[dict], limit: int) -> list[dict]:
    if limit <= 0 or limit >= len(records):
        return records
    step = len(records) / limit
    return [records[int(i * step)] for i in range(limit)]


def run(args: argparse.Namespace) -> int:
    """Write the two problems files and print their sizes."""
    train, held = generate(args.seed)
    train, held = _thin(train, args.train_limit), _thin(held, args.heldout_limit)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "heldout.jsonl", held)
    print(f"make-synthetic: {len(train)} training and {len(held)} held-out problems from {len(TEMPLATES)} "
          f"templates (seed {args.seed}) in {out}", file=sys.stderr)
    return 0
