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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	workConfigMap := fs.String("work-configmap", "", "while leading, update this ConfigMap in --namespace every --work-period, "+
		"as a controller's work would (empty: no work); after losing the Lease, stand by again")
	workPeriod := fs.Duration("work-period", 100*time.Millisecond, "how often the work writes")
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
	newElector := func() (*leaderelection.LeaderElector, error) {
		return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			ReleaseOnCancel: *releaseOnCancel,
			LeaseDuration:   *leaseDuration,
			RenewDeadline:   *renewDeadline,
			RetryPeriod:     *retryPeriod,
			Name:            *name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					emit("started_leading", *identity, *identity)
					if *workConfigMap != "" {
						work(lctx, client, *namespace, *workConfigMap, *identity, *workPeriod)
					}
				},
				OnStoppedLeading: func() { emit("stopped_leading", *identity, "") },
				OnNewLeader:      func(leader string) { emit("new_leader", *identity, leader) },
			},
		})
	}
	elector, err := newElector()
	if err != nil {
		fmt.Fprintf(os.Stderr, "lease-candidate: %v\n", err)
		return 2
	}
	emit("started", *identity, "")
	elector.Run(ctx)
	// With work to do, a candidate that lost the Lease stands by for it again, as our replicas do
	// (a controller-runtime manager exits instead, and its pod's container is restarted).
	for *workConfigMap != "" && ctx.Err() == nil {
		if elector, err = newElector(); err != nil {
			fmt.Fprintf(os.Stderr, "lease-candidate: %v\n", err)
			return 1
		}
		elector.Run(ctx)
	}
	emit("exited", *identity, "")
	return 0
}

// work is a controller's work while leading, as client-go's leader election leaves it to the program:
// every period, read the ConfigMap and update it (creating it first), until the leadership context is
// cancelled. Nothing checks the term before a write: client-go offers no such guard.
func work(ctx context.Context, client kubernetes.Interface, namespace, name, identity string, period time.Duration) {
	cms := client.CoreV1().ConfigMaps(namespace)
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
			cm.Data = map[string]string{"writer": identity, "n": fmt.Sprint(n)}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
		} else if err == nil {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["writer"], cm.Data["n"] = identity, fmt.Sprint(n)
			_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			emit("work_error", identity, err.Error())
		}
	}
}
