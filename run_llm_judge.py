"""Classify reward-hacking cases with an LLM judge (the paper's run_llm_judge.py).

A thin shim: `python run_llm_judge.py --model_name M --input_file I --output_file O --openai_api_key K`
is `cobalt judge` with the same flags (engine `openai` by default).
"""
import sys

from cobalt.cli import main

if __name__ == "__main__":
    sys.exit(main(["judge", *sys.argv[1:]]))
