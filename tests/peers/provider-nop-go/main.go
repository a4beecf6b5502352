// Command provider-nop-go is crossplane-rs's Go peer of its provider-nop: a NopResource provider built on
// crossplane-runtime's managed reconciler and controller-runtime's manager and leader election, by
// default at controller-runtime's default Lease timings (15 s / 10 s / 2 s; --lease-duration,
// --renew-deadline and --retry-period change them), on Lease crossplane-leader-election-provider-nop. It serves the CRD crossplane-rs generates
// (deploy/crds/nopresources.nop.crossplane.io.yaml) and never installs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/feature"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
)

const (
	name    = "provider-nop-go"
	version = "v0.1.0"
	// leaseName is upstream provider-nop's Lease, which crossplane-rs's provider-nop shares.
	leaseName = "crossplane-leader-election-provider-nop"
	// inClusterNamespace is where a Pod finds its namespace.
	inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
)

func envBool(key string) bool {
	v := strings.ToLower(os.Getenv(key))
	return v == "true" || v == "1"
}

// leaseNamespace is --leader-election-namespace, else POD_NAMESPACE, else the Pod's own namespace.
func leaseNamespace(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	b, err := os.ReadFile(inClusterNamespace)
	if err != nil {
		return "", fmt.Errorf("no Lease namespace: pass --leader-election-namespace or set POD_NAMESPACE (outside a Pod, %s does not exist)", inClusterNamespace)
	}
	return strings.TrimSpace(string(b)), nil
}

// identity is POD_NAME, else controller-runtime's own choice: the hostname, an underscore and a UUID.
func identity() (string, error) {
	if id := os.Getenv("POD_NAME"); id != "" {
		return id, nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return host + "_" + uuid.NewString(), nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run() error {
	// --kubeconfig is controller-runtime's own flag (pkg/client/config), with KUBECONFIG as its fallback.
	leaderElection := flag.Bool("leader-election", envBool("LEADER_ELECTION"), "Use leader election (Lease "+leaseName+"); env LEADER_ELECTION.")
	leaseNS := flag.String("leader-election-namespace", "", "The Lease's namespace (default: env POD_NAMESPACE, else the Pod's namespace).")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "How long a Lease is valid without renewal (controller-runtime's default).")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "How long the leader retries renewing before it gives up (controller-runtime's default).")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "How long candidates wait between tries (controller-runtime's default).")
	releaseOnCancel := flag.Bool("leader-election-release-on-cancel", false, "Release the Lease on shutdown (controller-runtime's default is not to).")
	metricsAddr := flag.String("metrics-bind-address", ":8080", "Where /metrics listens; 0 turns it off.")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "Where /healthz and /readyz listen; 0 turns them off.")
	maxReconcileRate := flag.Int("max-reconcile-rate", 1, "The global maximum rate per second at which resources may be checked for drift.")
	poll := flag.Duration("poll", 10*time.Second, "How often an individual resource is checked for drift.")
	syncInterval := flag.Duration("sync", time.Hour, "How often all resources are double-checked for drift (the cache's resync).")
	labelSelector := flag.String("label-selector", "", "Reconcile only NopResources with these labels (a test bed shares one cluster).")
	debug := flag.Bool("debug", false, "Log at debug level.")
	flag.Parse()

	zl := zap.New(zap.UseDevMode(*debug))
	ctrl.SetLogger(zl)
	log := logging.NewLogrLogger(zl.WithName(name))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("cannot get a kubeconfig (pass --kubeconfig or set KUBECONFIG): %w", err)
	}
	id, err := identity()
	if err != nil {
		return fmt.Errorf("cannot choose a leader election identity: %w", err)
	}
	cfg.UserAgent = fmt.Sprintf("%s/%s (%s)", name, version, id)
	cfg = ratelimiter.LimitRESTConfig(cfg, *maxReconcileRate)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := AddToScheme(scheme); err != nil {
		return err
	}

	byObject := map[client.Object]cache.ByObject{}
	if *labelSelector != "" {
		sel, err := labels.Parse(*labelSelector)
		if err != nil {
			return fmt.Errorf("--label-selector %q: %w", *labelSelector, err)
		}
		byObject[&NopResource{}] = cache.ByObject{Label: sel}
	}

	opts := ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cache.Options{SyncPeriod: syncInterval, ByObject: byObject},
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:        *probeAddr,
		LeaderElection:                *leaderElection,
		LeaderElectionID:              leaseName,
		LeaderElectionReleaseOnCancel: *releaseOnCancel,
		LeaseDuration:                 leaseDuration,
		RenewDeadline:                 renewDeadline,
		RetryPeriod:                   retryPeriod,
	}
	if *leaderElection {
		ns, err := leaseNamespace(*leaseNS)
		if err != nil {
			return err
		}
		opts.LeaderElectionNamespace = ns
		// controller-runtime's own kind of lock, made here only to name the identity (POD_NAME when set, so
		// a test tells its replicas apart) and to keep it in the Lease client's user agent, which
		// resourcelock.NewFromKubeconfig would replace by client-go's default; the client's timeout is the
		// one NewFromKubeconfig sets (half the renew deadline).
		leaseClient, err := kubernetes.NewForConfig(leaseConfig(cfg, id, *renewDeadline/2))
		if err != nil {
			return fmt.Errorf("cannot create the Lease client: %w", err)
		}
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: leaseName},
			Client:     leaseClient.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		}
		opts.LeaderElectionResourceLockInterface = lock
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return fmt.Errorf("cannot create the manager: %w", err)
	}

	o := controller.Options{
		Logger:                  log,
		MaxConcurrentReconciles: *maxReconcileRate,
		PollInterval:            *poll,
		GlobalRateLimiter:       ratelimiter.NewGlobal(*maxReconcileRate),
		Features:                &feature.Flags{},
	}
	if err := setup(mgr, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	log.Info("starting", "identity", id, "leaderElection", *leaderElection)
	return mgr.Start(ctrl.SetupSignalHandler())
}

// setup registers the NopResource controller, the way crossplane's providers do.
func setup(mgr ctrl.Manager, o controller.Options) error {
	ctrlName := "managed/" + strings.ToLower(NopResourceGroupVersionKind.GroupKind().String())
	r := managed.NewReconciler(mgr,
		resource.ManagedKind(NopResourceGroupVersionKind),
		managed.WithExternalConnector(connector{}),
		managed.WithLogger(o.Logger.WithValues("controller", ctrlName)),
		managed.WithRecorder(event.NewAPIRecorder(mgr.GetEventRecorderFor(ctrlName))),
		managed.WithPollInterval(o.PollInterval),
		managed.WithPollIntervalHook(pollAfter),
		managed.WithManagementPolicies(),
	)
	return ctrl.NewControllerManagedBy(mgr).
		Named(ctrlName).
		WithOptions(o.ForControllerRuntime()).
		WithEventFilter(resource.DesiredStateChanged()).
		For(&NopResource{}).
		Complete(ratelimiter.NewReconciler(ctrlName, r, o.GlobalRateLimiter))
}

// leaseConfig is the Lease client's config: the manager's, with "leader-election" in its user agent, as
// controller-runtime names its own, and the identity kept in it, so that the audit log attributes every
// Lease request to its replica.
func leaseConfig(cfg *rest.Config, id string, timeout time.Duration) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.UserAgent = fmt.Sprintf("%s/%s (%s) leader-election", name, version, id)
	out.Timeout = timeout
	return out
}
