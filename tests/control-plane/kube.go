//go:build !candidateonly && !pauseonly

package main

import (
	"context"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kversion "k8s.io/component-base/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// runAPIServer runs the real kube-apiserver with the given command-line flags.
func runAPIServer(args []string) int {
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runControllerManager runs the real kube-controller-manager. The caller
// restricts it with --controllers to what the test bed needs.
func runControllerManager(args []string) int {
	cmd := kcm.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runScheduler runs the real kube-scheduler.
func runScheduler(args []string) int {
	cmd := scheduler.NewSchedulerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runKubelet runs the real kubelet.
func runKubelet(args []string) int {
	cmd := kubelet.NewKubeletCommand(context.Background())
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

func version() string {
	return kversion.Get().GitVersion
}
