"""What ``--cluster`` may name and why a cluster cannot be used: Dask-free, so the CLI checks an address before
anything is imported, and both this package and ``executors.cluster`` raise the same ``ClusterUnavailable``.
"""

from __future__ import annotations


class ClusterUnavailable(Exception):
    """``--cluster`` cannot be honoured: the extra is not installed, the scheduler cannot be reached, no worker
    is usable. An input error for the CLI (exit 2): ``hint`` says what to do."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


CLUSTER_EXTRA_HINT = "pip install 'verify-tf[cluster]'  (Dask distributed; docs/distributed.md)"


def cluster_address_problem(address: str) -> str | None:
    """Why ``--cluster ADDRESS`` is malformed (None when it is ``local:N`` or ``tcp://``/``tls://HOST:PORT``)."""
    if address.startswith("local:"):
        count = address.split(":", 1)[1]
        return (
            None
            if count.isdigit() and int(count) >= 1
            else f"--cluster {address}: N in local:N must be a positive number of worker processes"
        )
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme in ("tcp", "tls") and host and port.isdigit():
        return None
    return (
        f"--cluster {address}: expected local:N (N worker processes on this machine) or the address of a "
        "running Dask scheduler, tcp://HOST:PORT"
    )
