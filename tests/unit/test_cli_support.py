"""cobalt.cli_support: progress lines for logs, the Ctrl-C line, error lines."""
from __future__ import annotations

import io
import time

import pytest

from cobalt.cli_support import (EXIT_INTERRUPTED, LineProgress, UsageError, capped, interrupt_line, on_interrupt,
                                progress, require_output_file, run_guarded)


def test_log_progress_prints_every_five_percent_and_at_the_end():
    out = io.StringIO()
    bar = LineProgress(100, "eval", "problems", stream=out, interval_s=3600)
    for _ in range(100):
        bar.update(1)
    bar.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 20 and lines[0].startswith("eval: 5/100 problems (5%)")
    assert lines[-1].startswith("eval: 100/100 problems (100%)") and "\r" not in out.getvalue()


def test_log_progress_prints_when_the_interval_has_passed():
    out = io.StringIO()
    bar = LineProgress(10_000, "rollout", "turns", stream=out, interval_s=0.05)
    bar.update(1)
    assert out.getvalue() == ""
    time.sleep(0.06)
    bar.update(1)
    assert out.getvalue().startswith("rollout: 2/10000 turns (0%)")


def test_progress_on_a_pipe_is_lines_and_feeds_the_interrupt_line():
    out = io.StringIO()
    bar = progress(6, "judge", "cases", stream=out)
    assert isinstance(bar, LineProgress)
    bar.update(4)
    assert interrupt_line() == "interrupted: 4 of 6 cases done; rerun the same command to resume"
    on_interrupt(lambda: "3 of 6 problems")  # a command's own count comes first
    assert interrupt_line() == "interrupted: 3 of 6 problems done; rerun the same command to resume"


def test_run_guarded_one_line_status_and_debug():
    def broken():
        raise RuntimeError("disk on fire\nsecond line")

    out = io.StringIO()
    assert run_guarded("x", broken, stream=out) == 1
    assert out.getvalue() == ("cobalt x: error: RuntimeError: disk on fire "
                              "(--debug or COBALT_DEBUG=1 shows the traceback)\n")
    out = io.StringIO()
    assert run_guarded("x", broken, debug=True, stream=out) == 1
    assert "Traceback (most recent call last)" in out.getvalue()

    def interrupted():
        raise KeyboardInterrupt

    out = io.StringIO()
    assert run_guarded("x", interrupted, stream=out) == EXIT_INTERRUPTED
    assert out.getvalue() == "cobalt x: interrupted; rerun the same command to resume\n"


def test_capped_counts_the_rest():
    assert capped([str(i) for i in range(25)]) == [str(i) for i in range(10)] + ["... and 15 more"]


def test_an_output_that_is_a_folder_or_under_a_file_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"is a folder; give a file path \(folders go to --output-dir\)"):
        require_output_file(tmp_path)
    (tmp_path / "afile").write_text("")
    for path in (tmp_path / "afile" / "out.jsonl", tmp_path / "afile" / "deeper" / "out.jsonl"):
        with pytest.raises(UsageError, match="a part of this path is a file, not a folder"):
            require_output_file(path)
    # a file to be made, in folders that exist or are still to be made, is fine; nothing is created
    require_output_file(tmp_path / "out.jsonl")
    require_output_file(tmp_path / "new" / "sub" / "out.jsonl")
    require_output_file("relative-out.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]
