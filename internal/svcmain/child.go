package svcmain

import (
	"os"
	"os/exec"
)

// A command's tests run it as a process of their own by re-executing the
// test binary with env=1: its TestMain calls AsChild first.

// AsChild runs main and reports true if this process is such a child.
func AsChild(env string, main func()) bool {
	if os.Getenv(env) != "1" {
		return false
	}
	main()
	return true
}

// Child is the test binary re-executed as the command with args.
func Child(env string, args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"=1")
	return cmd
}
