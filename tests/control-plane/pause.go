//go:build pauseonly

// Built with `-tags pauseonly` (and CGO_ENABLED=0, so it is static), this module is the test bed node's
// sandbox ("pause") process: it holds a Pod's namespaces until it receives SIGTERM or SIGINT, and, as
// PID 1 of the sandbox, reaps any child that is handed to it. `cargo xtask image --pause` packs it as the
// image containerd's CRI runs for every Pod, so that nothing is pulled from a registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
