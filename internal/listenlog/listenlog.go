// Package listenlog reads the log of a `sluice serve` process that tests and
// tools start from a binary: it hands every line to the caller and finds
// the address of the "listening" line, which the server logs once its
// startup models are registered.
package listenlog

import (
	"bufio"
	"io"
	"regexp"
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
