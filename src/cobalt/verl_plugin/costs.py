"""Training cost per method from verl's own step logs (``cobalt cost-report``).

verl 0.9.1 logs one record per training step with ``timing_s/step`` (wall
seconds of the step: generation, reward, log-probs, update), ``timing_s/gen``
and ``timing_s/update_actor`` among others. Two formats are read:

- the ``file`` logger's JSONL (``trainer.logger=[console,file]``; one
  ``{"step": N, "data": {metric: value}}`` a line, at ``$VERL_FILE_LOGGER_PATH``
  or ``./<project>/<experiment>.jsonl``);
- the ``console`` logger's lines (``step:N - key:value - ...``) in a saved
  terminal log, other lines ignored.

Prompts per step and GPUs come from the run's ``train_config.json`` (written by
``scripts/train_*.sh`` beside the outputs: ``data.train_batch_size``,
``actor_rollout_ref.rollout.n``, ``trainer.n_gpus_per_node`` x ``trainer.nnodes``)
or from flags. Printed per method:

    s/example    = mean timing_s/step / prompts per step        (an "example" = one prompt, all its rollouts)
    GPU-s/example = s/example x GPUs
    GPU-h/step   = mean timing_s/step x GPUs / 3600

beside the paper's reported figures (``--paper``).
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

STEP_KEY = "timing_s/step"
GEN_KEY = "timing_s/gen"
UPDATE_KEY = "timing_s/update_actor"
PAPER_REPORTED = (
    ("Cobalt (paper)", 16.9, 4),
    ("VeRPO-MT (paper)", 26.7, 8),
)
"""(method, seconds per example, GPUs) as reported by the paper (METHOD §5)."""

_CONSOLE_STEP = re.compile(r"(?:^|\s)step:(\d+)\s+-\s+(.*)$")
_CONSOLE_ITEM = re.compile(r"([^\s:][^:]*?):(\S+)")
_CONSOLE_NUMBER = re.compile(r"(?:np\.\w+\()?([^()]+)\)?")
"""A console value: a plain number or numpy's repr of one (``np.float64(1.5)``)."""


@dataclass
class MethodCost:
    """The cost of one method's run, from its step records."""

    method: str
    steps: int
    step_s: float
    gen_s: float | None
    update_s: float | None
    prompts_per_step: int
    rollouts_per_prompt: int
    gpus: int

    @property
    def s_per_example(self) -> float:
        """Wall seconds per training prompt (with all its rollouts)."""
        return self.step_s / self.prompts_per_step

    @property
    def gpu_s_per_example(self) -> float:
        """GPU-seconds per training prompt."""
        return self.s_per_example * self.gpus

    @property
    def gpu_h_per_step(self) -> float:
        """GPU-hours per training step."""
        return self.step_s * self.gpus / 3600.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record with the derived figures."""
        return {**self.__dict__, "s_per_example": self.s_per_example, "gpu_s_per_example": self.gpu_s_per_example,
                "gpu_h_per_step": self.gpu_h_per_step}


def read_step_metrics(path: str | Path) -> dict[int, dict[str, float]]:
    """``{step: {metric: value}}`` from a verl file-logger JSONL or a console log.

    A later record of the same step updates the earlier one (verl may log a
    step's validation separately). Raises ``ValueError`` naming the file and
    line for a JSONL line that is not a step record.
    """
    path = Path(path)
    steps: dict[int, dict[str, float]] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            text = line.strip()
            if not text:
                continue
            if text.startswith("{"):
                try:
                    record = json.loads(text)
                    step, data = int(record["step"]), dict(record["data"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                    raise ValueError(f"{path}:{number}: not a verl step record ({exc})") from None
                steps.setdefault(step, {}).update(
                    {k: float(v) for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
                continue
            match = _CONSOLE_STEP.search(text)
            if match is None:
                continue
            values = steps.setdefault(int(match.group(1)), {})
            for item in match.group(2).split(" - "):
                kv = _CONSOLE_ITEM.fullmatch(item.strip())
                number = _CONSOLE_NUMBER.fullmatch(kv.group(2)) if kv else None
                if number:
                    try:
                        values[kv.group(1)] = float(number.group(1))
                    except ValueError:
                        pass
    return steps


def run_shape(config_path: str | Path) -> dict[str, int]:
    """``{prompts_per_step, rollouts_per_prompt, gpus}`` from a ``train_config.json`` (``cobalt train-config --save``)."""
    config = json.loads(Path(config_path).read_text())
    config = config.get("config", config)
    try:
        return {
            "prompts_per_step": int(config["data"]["train_batch_size"]),
            "rollouts_per_prompt": int(config["actor_rollout_ref"]["rollout"]["n"]),
            "gpus": int(config["trainer"]["n_gpus_per_node"]) * int(config["trainer"]["nnodes"]),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{config_path}: missing training shape ({exc})") from None


def method_cost(method: str, steps: dict[int, dict[str, float]], *, prompts_per_step: int, rollouts_per_prompt: int,
                gpus: int, skip_first: int = 0) -> MethodCost:
    """Mean step time (and its generation and update parts) over the logged steps after ``skip_first``."""
    kept = [steps[s] for s in sorted(steps)[skip_first:] if STEP_KEY in steps[s]]
    if not kept:
        raise ValueError(f"{method}: no step with {STEP_KEY} (after skipping {skip_first})")

    def mean(key: str) -> float | None:
        values = [s[key] for s in kept if key in s]
        return statistics.fmean(values) if values else None

    return MethodCost(method, len(kept), mean(STEP_KEY), mean(GEN_KEY), mean(UPDATE_KEY),
                      prompts_per_step, rollouts_per_prompt, gpus)


def format_table(costs: Iterable[MethodCost], paper: bool = False) -> str:
    """One aligned text table, a row per method (and the paper's figures when asked)."""
    header = ("method", "steps", "GPUs", "prompts/step", "s/step", "gen s/step", "s/example", "GPU-s/example",
              "GPU-h/step")
    rows = [header]

    def f(x: float | None, digits: int = 1) -> str:
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"

    for c in costs:
        rows.append((c.method, str(c.steps), str(c.gpus), str(c.prompts_per_step), f(c.step_s), f(c.gen_s),
                     f(c.s_per_example, 2), f(c.gpu_s_per_example, 1), f(c.gpu_h_per_step, 3)))
    if paper:
        for name, s_example, gpus in PAPER_REPORTED:
            rows.append((name, "-", str(gpus), "128", f(s_example * 128), "-", f(s_example, 2),
                         f(s_example * gpus, 1), f(s_example * 128 * gpus / 3600, 3)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt cost-report``."""
    from cobalt.profile import add_profile_argument

    parser.add_argument("--run", action="append", required=True, metavar="METHOD=LOG",
                        help="a method and its verl step log (file-logger JSONL or saved console output); repeat "
                        "per method, e.g. --run cobalt=cobalt.log --run grpo-mt=grpo.log --run verpo-mt=verpo.log")
    parser.add_argument("--config", action="append", default=[], metavar="METHOD=PATH",
                        help="the run's train_config.json (default: train_config.json beside the log, if any)")
    parser.add_argument("--prompts-per-step", type=int, default=128,
                        help="prompts per step when no train_config.json is found (data.train_batch_size)")
    parser.add_argument("--rollouts-per-prompt", type=int, default=16,
                        help="rollouts per prompt when no train_config.json is found (rollout.n)")
    parser.add_argument("--gpus", type=int, default=4, help="GPUs of a run when no train_config.json is found")
    parser.add_argument("--skip-first", type=int, default=0,
                        help="leave out the first N logged steps (warm-up) from the means")
    parser.add_argument("--paper", action="store_true", help="add the paper's reported costs as reference rows")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the figures as JSON to PATH")
    add_profile_argument(parser)


def parse_pairs(items: list[str], flag: str) -> dict[str, str]:
    """``{name: path}`` from ``NAME=PATH`` flag values; ``ValueError`` naming ``flag`` for a malformed one."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise ValueError(f"{flag} expects METHOD=PATH, got {item!r}")
        out[name] = value
    return out


def run(args: argparse.Namespace) -> int:
    """Print the table (and write JSON); 2 on bad flags or unreadable logs."""
    from cobalt.profile import profile_from_args

    try:
        logs, configs = parse_pairs(args.run, "--run"), parse_pairs(args.config, "--config")
        costs = []
        for method, log in logs.items():
            config = configs.get(method) or Path(log).with_name("train_config.json")
            if Path(config).is_file():
                shape = run_shape(config)
            else:
                shape = {"prompts_per_step": args.prompts_per_step, "rollouts_per_prompt": args.rollouts_per_prompt,
                         "gpus": args.gpus}
            costs.append(method_cost(method, read_step_metrics(log), skip_first=args.skip_first, **shape))
    except (OSError, ValueError) as exc:
        print(f"cobalt cost-report: {exc}", file=sys.stderr)
        return 2
    print(format_table(costs, paper=args.paper))
    if args.json:
        from cobalt.io import write_json_atomic

        write_json_atomic(args.json, {"profile": str(profile_from_args(args)),
                                      "methods": [c.to_dict() for c in costs]})
    return 0
