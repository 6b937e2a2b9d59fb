"""Thin shim for the paper's command: ``serve run remote_reward_server:app``.

The service lives in :mod:`cobalt.execution.service`; its shape comes from the
``COBALT_EVAL_*`` environment variables (see ``cobalt serve --help``); the
profile of requests that name none is ``$COBALT_EVAL_PROFILE``, else
``$COBALT_PROFILE``, else ``paper``.
"""
from cobalt.execution.service import build_app

app = build_app()
