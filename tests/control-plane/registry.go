//go:build !candidateonly && !pauseonly

package main

import (
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

// runRegistry serves go-containerregistry's OCI distribution registry (blobs in memory, or on disk with
// --disk) on an address of this machine (loopback, or the node bridge's address of a test bed with a
// node), for the package manager's tests: packages are pushed to it and fetched from it over plain HTTP.
//
// With --auth-address and --auth-credentials it serves the same registry (the same blobs and manifests)
// on a second address that requires HTTP Basic authentication, as a distribution registry with an
// htpasswd file does: a request without the user and password of the credentials file gets 401 with
// `WWW-Authenticate: Basic realm="..."`. The anonymous address stays as it is.
func runRegistry(args []string) int {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	address := fs.String("address", "", "host:port of this machine to listen on (required; not 0.0.0.0)")
	disk := fs.String("disk", "", "directory for blobs (default: in memory)")
	authAddress := fs.String("auth-address", "", "host:port of this machine to serve the registry on with Basic authentication (optional; not 0.0.0.0)")
	authCredentials := fs.String("auth-credentials", "", "file holding `user:password` for --auth-address (required with it)")
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
	var user, password string
	if *authAddress != "" {
		if err := oneAddress(*authAddress); err != nil {
			fmt.Fprintf(os.Stderr, "registry: %v\n", err)
			return 2
		}
		var err error
		if user, password, err = readCredentials(*authCredentials); err != nil {
			fmt.Fprintf(os.Stderr, "registry: %v\n", err)
			return 2
		}
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
	handler := registry.New(opts...)
	servers := []*http.Server{{Handler: handler, ReadHeaderTimeout: 10 * time.Second}}
	listeners := []net.Listener{listener}
	if *authAddress != "" {
		authListener, err := net.Listen("tcp", *authAddress)
		if err != nil {
			_ = listener.Close()
			fmt.Fprintf(os.Stderr, "registry: listen: %v\n", err)
			return 1
		}
		servers = append(servers, &http.Server{Handler: basicAuth(handler, user, password), ReadHeaderTimeout: 10 * time.Second})
		listeners = append(listeners, authListener)
		fmt.Fprintf(os.Stderr, "registry: serving with Basic authentication (user %s) on http://%s\n", user, authListener.Addr())
	}
	fmt.Fprintf(os.Stderr, "registry: serving on http://%s\n", listener.Addr())
	done := make(chan error, len(servers))
	for i := range servers {
		go func() { done <- servers[i].Serve(listeners[i]) }()
	}
	closeAll := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
		closeAll()
		return 0
	case err := <-done:
		closeAll()
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

// readCredentials reads `user:password` (one line) from path.
func readCredentials(path string) (string, string, error) {
	if path == "" {
		return "", "", errors.New("--auth-credentials is required with --auth-address")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("reading --auth-credentials: %w", err)
	}
	user, password, ok := strings.Cut(strings.TrimRight(string(b), "\r\n"), ":")
	if !ok || user == "" || password == "" {
		return "", "", fmt.Errorf("--auth-credentials %s does not hold `user:password`", path)
	}
	return user, password, nil
}

// basicAuth serves next to requests with the user and password, and answers any other request as a
// distribution registry with htpasswd authentication does: 401, a Basic challenge, and the spec's
// UNAUTHORIZED error (no body for HEAD).
func basicAuth(next http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if ok && subtle.ConstantTimeCompare([]byte(u), []byte(user)) == 1 &&
			subtle.ConstantTimeCompare([]byte(p), []byte(password)) == 1 {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="crossplane-rs test bed registry"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		if r.Method != http.MethodHead {
			_, _ = io.WriteString(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
		}
	})
}
