"""The ``vm`` provider: a real single-node Kubernetes cluster (cgroup v2 + swap) in a QEMU guest.

Everything is built offline from Debian packages and the Go module proxy and cached under
``~/.cache/kube-swap-conformance/``. See :class:`clusters.vm.cluster.VmCluster` and
``python -m clusters.vm --help``.
"""
from .cluster import VmCluster, VmClusterError

__all__ = ["VmCluster", "VmClusterError"]
