package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/listenlog"
)

// One server process under attack: started from a binary, watched
// through /proc, killed at the end.

// raiseNoFile lifts this process's descriptor limit to its hard limit: (d)
// holds 1,100 connections.
func raiseNoFile() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// harness runs one binary.
type harness struct {
	bin, root string
}

// proc is one running server.
type proc struct {
	*listenlog.Proc
	url string
}

// start runs the server (through prefix, e.g. prlimit) and waits up to 60 s
// for its listening line: the startup models are loaded by then.
func (h *harness) start(prefix []string, extra ...string) (*proc, error) {
	args := append(append([]string{}, prefix...), h.bin, "serve", "--parallel-jobs", "--ui-management", "--fixture",
		"--models-root", h.root, "--listen", "127.0.0.1:0")
	args = append(args, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p, err := listenlog.Start(ctx, exec.Command(args[0], args[1:]...))
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, url: "http://" + p.Addr}, nil
}

// kill ends the process and waits for it (at most 10 s).
func (p *proc) kill() {
	_ = p.Cmd.Process.Kill()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
	}
}

// cpu returns utime+stime of the process in seconds (/proc/PID/stat, in
// clock ticks of 1/100 s, Linux's USER_HZ).
func (p *proc) cpu() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // fields from 3 (state) on
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return (ut + st) / 100, nil
}

// status returns a /proc/PID/status field in MiB (VmHWM, VmRSS).
func (p *proc) status(field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, field+":"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/PID/status", field)
}
