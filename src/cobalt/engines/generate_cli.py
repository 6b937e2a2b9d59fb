"""Complete chat conversations from a JSONL file with any engine (``cobalt generate``).

Input: one JSON object per line, ``{"id": ..., "messages": [{"role", "content"}, ...]}``.
Output: one line per input, ``{"id", "completions": [{"text", "prompt_tokens",
"completion_tokens", "finish_reason"}, ...], "engine": {...}, "sampling": {...},
"profile": ...}``, appended and flushed per record; a rerun skips ids already
written. The engine is checked (endpoint reached, key accepted, model
loaded) before the output file is opened, so a bad engine writes nothing.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from cobalt.engines.cli import add_engine_arguments, add_sampling_arguments, engine_from_args, sampling_from_args
from cobalt.profile import add_profile_argument, profile_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt generate``."""
    parser.add_argument("--input", required=True, help="JSONL of {id, messages}")
    parser.add_argument("--output", required=True, help="JSONL to append completions to (resumes)")
    parser.add_argument("--batch-size", type=int, default=64, help="conversations sent to the engine at once")
    add_engine_arguments(parser)
    add_sampling_arguments(parser)
    add_profile_argument(parser)


def _read(path: str) -> list[dict]:
    from cobalt.io import RecordError, check_unique_id, iter_jsonl, require_field

    records, seen = [], {}
    for line, rec in iter_jsonl(path):
        rid = require_field(rec, "id", (str, int), path=path, line=line)
        check_unique_id(rid, seen, path=path, line=line)
        messages = require_field(rec, "messages", list, path=path, line=line)
        for k, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
                raise RecordError(path, line, f"messages[{k}]", "expected an object with string 'role' and 'content'")
        records.append({"id": rid, "messages": messages})
    return records


async def _generate(args: argparse.Namespace, engine, records: list[dict], settings: dict) -> int:
    from cobalt.cli_support import progress, resumed_line
    from cobalt.io import JsonlAppender, save_settings

    params = sampling_from_args(args)
    profile = str(profile_from_args(args))
    await engine.check()
    save_settings(args.output, "cobalt generate", settings)
    with JsonlAppender(args.output) as out:
        todo = [r for r in records if r["id"] not in out.done]
        if out.done:
            print(f"generate: {resumed_line(len(records) - len(todo), len(records), 'conversations')}",
                  file=sys.stderr)
        bar = progress(len(todo), "generate", "conversations")
        try:
            for start in range(0, len(todo), args.batch_size):
                chunk = todo[start:start + args.batch_size]
                results = await engine.generate([r["messages"] for r in chunk], params)
                for rec, samples in zip(chunk, results):
                    out.write({"id": rec["id"], "completions": [
                        {"text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                         "finish_reason": c.finish_reason} for c in samples],
                        "engine": engine.describe(), "sampling": asdict(params), "profile": profile})
                    bar.update(1)
        finally:
            bar.close()
    return 0


def run(args: argparse.Namespace) -> int:
    """Generate; one clear line and a non-zero exit on bad input or a failing engine."""
    import asyncio

    from cobalt.engines.base import EngineError
    from cobalt.io import RecordError, empty_input_warning, resume_guard

    settings, refused = resume_guard(args, [args.input], profile=str(profile_from_args(args)))
    if refused:
        print(f"cobalt generate: error: {refused}", file=sys.stderr)
        return 2
    try:
        records = _read(args.input)
        engine = engine_from_args(args)
    except (RecordError, EngineError, FileNotFoundError, ValueError) as exc:
        print(f"cobalt generate: error: {exc}", file=sys.stderr)
        return 2
    if not records:
        print(empty_input_warning("cobalt generate", args.input), file=sys.stderr)
        return 1

    async def main() -> int:
        try:
            return await _generate(args, engine, records, settings)
        finally:
            await engine.aclose()

    try:
        return asyncio.run(main())
    except EngineError as exc:
        print(f"cobalt generate: error: {exc}", file=sys.stderr)
        return 1
