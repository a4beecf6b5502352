//go:build !candidateonly

package main

import (
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kversion "k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

// runAPIServer runs the real kube-apiserver with the given command-line flags.
func runAPIServer(args []string) int {
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runControllerManager runs the real kube-controller-manager. The caller
// restricts it with --controllers to the garbage collector and namespace controllers.
func runControllerManager(args []string) int {
	cmd := kcm.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func version() string {
	return kversion.Get().GitVersion
}
