//go:build candidateonly

// Built with `-tags candidateonly`, this module is client-go's lease candidate alone: the same code as
// `harness lease-candidate`, without kube-apiserver, etcd and kube-controller-manager linked in, so that
// its memory and start-up are client-go's own. The benchmark measures this binary.
//
// Usage: lease-candidate [flags]
package main

import "os"

func main() {
	exitWithParent()
	os.Exit(runLeaseCandidate(os.Args[1:]))
}
