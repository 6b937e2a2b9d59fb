"""Test helpers shared by the suites: a scriptable OpenAI-compatible server (openai_server.py)."""
