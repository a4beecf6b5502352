//go:build !candidateonly && !pauseonly

package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// runRegistry serves go-containerregistry's OCI distribution registry (blobs in memory, or on disk with
// --disk) on an address of this machine (loopback, or the node bridge's address of a test bed with a
// node), for the package manager's tests: packages are pushed to it and fetched from it over plain HTTP.
func runRegistry(args []string) int {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	address := fs.String("address", "", "host:port of this machine to listen on (required; not 0.0.0.0)")
	disk := fs.String("disk", "", "directory for blobs (default: in memory)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *address == "" {
		fmt.Fprintln(os.Stderr, "registry: --address is required")
		return 2
	}
	if err := oneAddress(*address); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		return 2
	}
	opts := []registry.Option{registry.Logger(log.New(os.Stderr, "registry: ", log.LstdFlags))}
	if *disk != "" {
		if err := os.MkdirAll(*disk, 0o755); err != nil {
			fmt.Fprintf(os.Stderr, "registry: %v\n", err)
			return 1
		}
		opts = append(opts, registry.WithBlobHandler(registry.NewDiskBlobHandler(*disk)))
	}
	listener, err := net.Listen("tcp", *address)
	if err != nil {
		fmt.Fprintf(os.Stderr, "registry: listen: %v\n", err)
		return 1
	}
	server := &http.Server{Handler: registry.New(opts...), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "registry: serving on http://%s\n", listener.Addr())
	done := make(chan error, 1)
	go func() { done <- server.Serve(listener) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		_ = server.Close()
		return 0
	case err := <-done:
		if errors.Is(err, http.ErrServerClosed) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		return 1
	}
}

// oneAddress checks that a test bed's server is given one IP of this machine and a port: listening on
// every address (0.0.0.0 or ::) would expose the test bed beyond the machine.
func oneAddress(address string) error {
	host, _, err := net.SplitHostPort(address)
	if ip := net.ParseIP(host); err != nil || ip == nil || ip.IsUnspecified() {
		return fmt.Errorf("--address %q is not one IP and port (every address, 0.0.0.0 or ::, is refused)", address)
	}
	return nil
}
