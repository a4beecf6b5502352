//go:build !candidateonly && !pauseonly

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	criclient "k8s.io/cri-client/pkg"
)

// runSupervise runs a program that knows nothing of HARNESS_PARENT_PID (containerd) so that it still
// ends with the test bed: it gets SIGTERM when this process exits (PR_SET_PDEATHSIG), and this process
// exits with its parent (exitWithParent). SIGTERM and SIGINT are passed on.
//
// Usage: harness supervise -- PROGRAM [ARGS...]
func runSupervise(args []string) int {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "supervise: usage: harness supervise -- PROGRAM [ARGS...]")
		return 2
	}
	// The parent-death signal follows the thread that forked the child.
	runtime.LockOSThread()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "supervise: %v\n", err)
		return 1
	}
	go func() {
		for s := range sig {
			_ = cmd.Process.Signal(s)
		}
	}()
	if err := cmd.Wait(); err != nil {
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode()
		}
		return 1
	}
	return 0
}

// runCRICleanup stops and removes every Pod sandbox (and so every container, and its network) of the
// container runtime at --endpoint, through the CRI as the kubelet would: a node's containerd is left
// with nothing running before it stops.
func runCRICleanup(args []string) int {
	fs := flag.NewFlagSet("cri-cleanup", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "the CRI endpoint, unix://PATH (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *endpoint == "" {
		fmt.Fprintln(os.Stderr, "cri-cleanup: --endpoint is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rs, err := criclient.NewRemoteRuntimeService(ctx, *endpoint, 10*time.Second, nil, false)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-cleanup: %v\n", err)
		return 1
	}
	sandboxes, err := rs.ListPodSandbox(ctx, nil)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cri-cleanup: listing sandboxes: %v\n", err)
		return 1
	}
	failed := 0
	for _, s := range sandboxes {
		if err := rs.StopPodSandbox(ctx, s.Id); err != nil {
			fmt.Fprintf(os.Stderr, "cri-cleanup: stopping %s: %v\n", s.Id, err)
		}
		if err := rs.RemovePodSandbox(ctx, s.Id); err != nil {
			fmt.Fprintf(os.Stderr, "cri-cleanup: removing %s: %v\n", s.Id, err)
			failed++
		}
	}
	fmt.Fprintf(os.Stderr, "cri-cleanup: removed %d of %d sandboxes\n", len(sandboxes)-failed, len(sandboxes))
	if failed > 0 {
		return 1
	}
	return 0
}
