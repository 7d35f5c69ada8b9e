// Command kind_render prints the kubeadm config that kind writes on one node of a cluster, from
// the kind config file the suite hands kind, for a node image of a given Kubernetes version: kind's
// own template (pkg/cluster/internal/kubeadm) and its own patching (pkg/internal/patch), run
// without Docker. The self-test copies kind's module from the Go module cache, puts this file
// inside it (kind's internal packages are importable only from within its tree), and runs it.
//
//	kind_render <kind config> <kubernetes version> <control-plane|worker>
package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster/internal/kubeadm"
	"sigs.k8s.io/kind/pkg/internal/apis/config/encoding"
	"sigs.k8s.io/kind/pkg/internal/patch"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: kind_render <kind config> <kubernetes version> <control-plane|worker>")
		os.Exit(2)
	}
	cfg, err := encoding.Load(os.Args[1])
	if err != nil {
		fail(err)
	}
	role := os.Args[3]
	data := kubeadm.ConfigData{
		NodeProvider:         "docker",
		ClusterName:          cfg.Name,
		KubernetesVersion:    os.Args[2],
		ControlPlaneEndpoint: cfg.Name + "-control-plane:6443",
		APIBindPort:          6443,
		APIServerAddress:     cfg.Networking.APIServerAddress,
		Token:                kubeadm.Token,
		PodSubnet:            cfg.Networking.PodSubnet,
		ServiceSubnet:        cfg.Networking.ServiceSubnet,
		KubeProxyMode:        string(cfg.Networking.KubeProxyMode),
		ControlPlane:         role == "control-plane",
		IPFamily:             cfg.Networking.IPFamily,
		FeatureGates:         cfg.FeatureGates,
		RuntimeConfig:        cfg.RuntimeConfig,
		NodeAddress:          "172.18.0.2",
		NodeName:             cfg.Name + "-" + role,
	}
	text, err := kubeadm.Config(data)
	if err != nil {
		fail(err)
	}
	// the cluster's patches; the suite's configs set none per node
	patched, err := patch.KubeYAML(text, cfg.KubeadmConfigPatches, cfg.KubeadmConfigPatchesJSON6902)
	if err != nil {
		fail(err)
	}
	// as kind writes it to the node: without the metadata its patches matched on
	fmt.Print(strings.ReplaceAll(patched, "metadata:\n  name: config\n", ""))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
