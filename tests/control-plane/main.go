//go:build !candidateonly && !pauseonly

// Command harness is the crossplane-rs test bed: one binary that runs a real
// etcd, kube-apiserver, a kube-controller-manager limited to the controllers
// a test bed needs, kube-scheduler and the kubelet (for a test bed with a
// node), and a client-go leader-election candidate used as the
// interoperability peer and benchmark anchor, and an OCI registry (go-containerregistry)
// that package tests push to and fetch from, and the cluster's DNS for a node's Pods.
//
// Usage: harness <etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|supervise|cri-cleanup|lease-candidate|registry|dns|version> [flags]
package main

import (
	"fmt"
	"os"
)

func main() {
	exitWithParent()
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	switch cmd {
	case "etcd":
		os.Exit(runEtcd(args))
	case "kube-apiserver":
		os.Exit(runAPIServer(args))
	case "kube-controller-manager":
		os.Exit(runControllerManager(args))
	case "kube-scheduler":
		os.Exit(runScheduler(args))
	case "kubelet":
		os.Exit(runKubelet(args))
	case "supervise":
		os.Exit(runSupervise(args))
	case "cri-cleanup":
		os.Exit(runCRICleanup(args))
	case "lease-candidate":
		os.Exit(runLeaseCandidate(args))
	case "registry":
		os.Exit(runRegistry(args))
	case "dns":
		os.Exit(runDNS(args))
	case "version":
		fmt.Println(version())
	case "-h", "--help", "help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "harness: unknown subcommand %q\n", cmd)
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: harness <etcd|kube-apiserver|kube-controller-manager|kube-scheduler|kubelet|supervise|cri-cleanup|lease-candidate|registry|dns|version> [flags]")
}
