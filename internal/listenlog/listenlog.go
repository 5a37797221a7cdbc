// Package listenlog reads the log of a `sluice serve` process that tests and
// tools start from a binary: it hands every line to the caller and finds
// the address of the "listening" line, which the server logs once its
// startup models are registered.
package listenlog

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"sync"
)

var listening = regexp.MustCompile(`msg=listening addr=(\S+)`)

// Scan reads r line by line on its own goroutine, calls each with every
// line (lines up to 1 MiB), and sends the address of the first listening
// line on addr. done is closed once r has ended and been drained, so a
// caller can wait for it before cmd.Wait.
func Scan(r io.Reader, each func(line string)) (addr <-chan string, done <-chan struct{}) {
	a := make(chan string, 1)
	d := make(chan struct{})
	go func() {
		defer close(d)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			each(line)
			if m := listening.FindStringSubmatch(line); m != nil && !sent {
				a <- m[1]
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, r)
	}()
	return a, d
}

// maxLog bounds the log a Proc keeps.
const maxLog = 1 << 20

// Proc is a server process started by Start: its command, the address of
// its listening line and the first MiB of its log.
type Proc struct {
	Cmd  *exec.Cmd
	Addr string

	done chan struct{}
	mu   sync.Mutex
	log  strings.Builder
	err  error
}

// Start starts cmd, reading its stderr (which it takes over) with Scan, and
// returns once the process logs its listening line. When the process exits
// first or ctx ends first (the process is then killed) it returns an error
// with the log.
func Start(ctx context.Context, cmd *exec.Cmd) (*Proc, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &Proc{Cmd: cmd, done: make(chan struct{})}
	addr, scanned := Scan(stderr, func(line string) {
		p.mu.Lock()
		if p.log.Len() < maxLog {
			p.log.WriteString(line + "\n")
		}
		p.mu.Unlock()
	})
	go func() {
		<-scanned
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	select {
	case a := <-addr:
		p.Addr = a
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening: %v\n%s", cmd.Path, p.Err(), p.Log())
	case <-ctx.Done():
		p.Kill()
		return nil, fmt.Errorf("%s did not listen: %w\n%s", cmd.Path, ctx.Err(), p.Log())
	}
}

// Log returns what the process has logged so far (at most 1 MiB).
func (p *Proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Done is closed once the process has exited and its log is read.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the process's exit error, once Done is closed.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Kill ends the process at once (SIGKILL) and waits for it.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}
