"""The tests' own Ray head: a head that cannot come up on its ports is started again on fresh ones."""
from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

from support.ray_cluster import RayCluster


@contextlib.contextmanager
def cluster_on_a_taken_port(tmp_path) -> Iterator[tuple[RayCluster, int]]:
    """A cluster (not started) whose head port is held by a listening socket, and that port."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        cluster = RayCluster(tmp_path / "logs")
        cluster.port = busy
        yield cluster, busy


def test_a_head_whose_port_is_taken_comes_up_on_a_fresh_port(tmp_path):
    with cluster_on_a_taken_port(tmp_path) as (cluster, busy), cluster:
        assert cluster.port != busy and cluster.address == f"127.0.0.1:{cluster.port}"
        assert cluster._head is not None and cluster._head.poll() is None  # the second head runs


def test_a_head_that_never_comes_up_says_why(tmp_path):
    with cluster_on_a_taken_port(tmp_path) as (cluster, _):
        try:
            cluster.start(attempts=1)
        except RuntimeError as exc:
            assert "did not come up" in str(exc)
        else:
            cluster.stop()
            raise AssertionError("a head on a taken port came up")
        assert cluster.temp_dir is None and cluster._head is None
