package listenlog

import (
	"strings"
	"testing"
)

func TestScanFindsTheFirstListeningLine(t *testing.T) {
	log := "time=1 level=INFO msg=\"model registered\"\n" +
		"time=2 level=INFO msg=listening addr=127.0.0.1:4321 parallel_jobs=true\n" +
		"time=3 level=INFO msg=listening addr=127.0.0.1:9999\n"
	var lines []string
	addr, done := Scan(strings.NewReader(log), func(l string) { lines = append(lines, l) })
	<-done
	if a := <-addr; a != "127.0.0.1:4321" {
		t.Fatalf("addr %q", a)
	}
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), lines)
	}
}
