"""Test helpers shared by the suites: a scriptable OpenAI-compatible server (openai_server.py)
and a private Ray cluster per test module (ray_cluster.py)."""
