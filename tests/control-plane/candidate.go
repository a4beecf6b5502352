//go:build !pauseonly

package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientversion "k8s.io/client-go/pkg/version"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var outMu sync.Mutex

// emit prints one JSON line with wall-clock and CLOCK_MONOTONIC timestamps,
// so that tests can compare events across processes on one machine.
func emit(event, identity, leader string) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	line, _ := json.Marshal(map[string]any{
		"event":    event,
		"identity": identity,
		"leader":   leader,
		"wall":     time.Now().UTC().Format(time.RFC3339Nano),
		"mono_ns":  ts.Nano(),
	})
	outMu.Lock()
	defer outMu.Unlock()
	fmt.Println(string(line))
}

// runLeaseCandidate runs client-go's leader election with a LeaseLock.
func runLeaseCandidate(args []string) int {
	fs := flag.NewFlagSet("lease-candidate", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "path to a kubeconfig")
	namespace := fs.String("namespace", "default", "namespace of the Lease")
	name := fs.String("name", "", "name of the Lease (required)")
	identity := fs.String("identity", "", "identity of this candidate (required)")
	leaseDuration := fs.Duration("lease-duration", 15*time.Second, "lease duration")
	renewDeadline := fs.Duration("renew-deadline", 10*time.Second, "renew deadline")
	retryPeriod := fs.Duration("retry-period", 2*time.Second, "retry period")
	releaseOnCancel := fs.Bool("release-on-cancel", true, "release the Lease on SIGTERM/SIGINT")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *name == "" || *identity == "" {
		fmt.Fprintln(os.Stderr, "lease-candidate: --name and --identity are required")
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lease-candidate: kubeconfig: %v\n", err)
		return 2
	}
	// As client-go's NewFromKubeconfig does: one hung request cannot cost the lease.
	cfg.Timeout = max(time.Second, *renewDeadline/2)
	cfg.UserAgent = fmt.Sprintf("lease-candidate/%s (%s)", clientversion.Get().GitVersion, *identity)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "lease-candidate: client: %v\n", err)
		return 2
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: *name, Namespace: *namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		emit("signal", *identity, "")
		cancel()
		<-sig
		os.Exit(1)
	}()
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		ReleaseOnCancel: *releaseOnCancel,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		Name:            *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { emit("started_leading", *identity, *identity) },
			OnStoppedLeading: func() { emit("stopped_leading", *identity, "") },
			OnNewLeader:      func(leader string) { emit("new_leader", *identity, leader) },
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "lease-candidate: %v\n", err)
		return 2
	}
	emit("started", *identity, "")
	elector.Run(ctx)
	emit("exited", *identity, "")
	return 0
}
