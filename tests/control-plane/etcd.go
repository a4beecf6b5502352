//go:build !candidateonly && !pauseonly

package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// runEtcd runs an embedded, single-member etcd that listens on loopback only.
func runEtcd(args []string) int {
	fs := flag.NewFlagSet("etcd", flag.ContinueOnError)
	dataDir := fs.String("data-dir", "", "directory that holds etcd's data (required)")
	clientPort := fs.Int("client-port", 0, "loopback port for clients (required)")
	peerPort := fs.Int("peer-port", 0, "loopback port for peers (required)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dataDir == "" || *clientPort == 0 || *peerPort == 0 {
		fmt.Fprintln(os.Stderr, "etcd: --data-dir, --client-port and --peer-port are required")
		return 2
	}
	cfg := embed.NewConfig()
	cfg.Name = "testbed"
	cfg.Dir = *dataDir
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *clientPort)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", *peerPort)}
	cfg.ListenClientUrls = []url.URL{cu}
	cfg.AdvertiseClientUrls = []url.URL{cu}
	cfg.ListenPeerUrls = []url.URL{pu}
	cfg.AdvertisePeerUrls = []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "warn"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "etcd: start: %v\n", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
		fmt.Fprintf(os.Stderr, "etcd: ready on %s\n", cu.String())
	case <-time.After(60 * time.Second):
		e.Close()
		fmt.Fprintln(os.Stderr, "etcd: not ready after 60s")
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		e.Close()
		return 0
	case err := <-e.Err():
		fmt.Fprintf(os.Stderr, "etcd: %v\n", err)
		e.Close()
		return 1
	}
}
