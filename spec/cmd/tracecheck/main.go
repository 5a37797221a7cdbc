// Command tracecheck validates every ndjson trace (core.Record lines, with
// <name>.options.json beside it when known) under a directory against the
// spec and prints one line per trace and a summary.
//
//	go run ./spec/cmd/tracecheck [-dir DIR]   # default $SLUICE_TRACE_DIR or out/traces
//
// It exits 1 when a trace is rejected, 0 when all are accepted or there are
// none (with -require, no traces is an error).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/sluice-dev/sluice/spec/trace"
)

func main() {
	dir := flag.String("dir", trace.Dir(), "directory of traces ($"+trace.DirEnv+", default "+trace.DefaultDir+")")
	require := flag.Bool("require", false, "fail when there are no traces")
	flag.Parse()
	res, err := trace.ValidateDir(*dir, os.Stdout)
	if errors.Is(err, trace.ErrNoTraces) {
		if *require {
			os.Exit(1)
		}
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracecheck:", err)
		os.Exit(2)
	}
	for _, r := range res {
		if r.Err != nil {
			os.Exit(1)
		}
	}
}
