"""Start the Ray Serve code-execution service (the paper's ``remote_reward_server.py``).

Connects to the Ray cluster at ``--address`` (or starts a local one), deploys
the ``Evaluator`` deployment as application ``evaluator`` on route prefix
``/evaluator``, and either blocks (default) or returns (``--detach``) leaving
the app running on the cluster. Equivalent: ``serve run remote_reward_server:app``.
``--profile`` (else ``$COBALT_EVAL_PROFILE``, else ``$COBALT_PROFILE``, else paper)
is the profile of the requests that name none.
"""
from __future__ import annotations

import argparse

from cobalt.profile import add_profile_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``cobalt serve``."""
    parser.add_argument("--address", default=None,
                        help="Ray cluster address (e.g. 'auto' or 'ray://host:10001'); default: start a local Ray")
    parser.add_argument("--replicas", type=int, default=None, help="number of Evaluator replicas (default 1, env COBALT_EVAL_NUM_REPLICAS)")
    parser.add_argument("--cpus-per-replica", type=float, default=None,
                        help="CPUs each replica reserves = sandboxes it runs at once (default 1)")
    parser.add_argument("--memory-gb-per-replica", type=float, default=None, help="memory each replica reserves, GiB (default 4)")
    parser.add_argument("--max-ongoing-requests", type=int, default=None, help="requests a replica accepts at once (default 64)")
    parser.add_argument("--no-sandbox", action="store_true", help="run programs WITHOUT bubblewrap (trusted code only)")
    parser.add_argument("--detach", action="store_true", help="deploy and return, leaving the app running on the cluster")
    add_profile_argument(parser)  # the profile of requests that name none


def run(args: argparse.Namespace) -> int:
    """Deploy the service."""
    from cobalt.execution.service import APP_NAME, ROUTE_PREFIX, ServiceConfig, deploy

    config = ServiceConfig.from_env(
        num_replicas=args.replicas,
        cpus_per_replica=args.cpus_per_replica,
        memory_gb_per_replica=args.memory_gb_per_replica,
        max_ongoing_requests=args.max_ongoing_requests,
        sandbox="none" if args.no_sandbox else None,
        profile=args.profile,  # None: $COBALT_EVAL_PROFILE, else $COBALT_PROFILE, else paper
    )
    print(f"cobalt serve: deploying {config} as app '{APP_NAME}' at {ROUTE_PREFIX}", flush=True)
    deploy(args.address, config, blocking=not args.detach)
    if args.detach:
        print("cobalt serve: evaluator is running; clients use COBALT_EVALUATOR=ray", flush=True)
    return 0
