//go:build !pauseonly

package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// exitWithParent ends this process when the process named by HARNESS_PARENT_PID exits, so that a test
// bed never outlives the test run that started it, even when that run is killed.
func exitWithParent() {
	ppid, err := strconv.Atoi(os.Getenv("HARNESS_PARENT_PID"))
	if err != nil || ppid <= 1 {
		return
	}
	go func() {
		for range time.Tick(time.Second) {
			if os.Getppid() != ppid {
				fmt.Fprintf(os.Stderr, "harness: parent %d exited; exiting\n", ppid)
				os.Exit(3)
			}
		}
	}()
}
