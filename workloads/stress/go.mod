module kube-swap-conformance/stress

go 1.22
