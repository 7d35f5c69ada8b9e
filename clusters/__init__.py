"""How to get a Kubernetes node running a given kubelet swapBehavior (kind, existing, vm)."""
