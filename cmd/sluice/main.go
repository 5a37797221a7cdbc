// Command sluice is the Sluice model server and its tools.
//
//	sluice serve [flags]        run the HTTP server (see `sluice serve -h`)
//	sluice models [flags]       list the models of a running server
//	sluice run [flags] MODEL INPUT
//	                            run one inference without a server
//	sluice sim [flags]          deterministic simulation of the scheduler
//	sluice demo                 drive the scheduler core through a short scripted scenario
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-dev/sluice/conformance"
	"github.com/sluice-dev/sluice/sim"
)

func main() {
	os.Exit(mainCode(os.Args[1:], os.Stdout, os.Stderr))
}

// mainCode runs one subcommand and returns the process exit code.
func mainCode(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		usage(stderr)
		return 2
	}
	ctx := context.Background()
	var err error
	switch args[0] {
	case "demo":
		err = demo(stdout)
	case "serve":
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
		err = serve(ctx, args[1:], stderr, sigs, nil)
	case "models":
		err = models(ctx, args[1:], stdout, stderr)
	case "run":
		err = run(ctx, args[1:], stdout, stderr)
	case "sim":
		return sim.Main(args[1:], stdout, stderr)
	case "conformance":
		return conformance.Main(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		usage(stderr)
		return 2
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errStuckExit):
		fmt.Fprintln(stderr, "sluice:", err)
		return exitStuck
	case err != nil:
		fmt.Fprintln(stderr, "sluice:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, `usage:
  sluice serve [flags]            run the HTTP server (sluice serve -h lists the flags)
  sluice models [--target URL]    list the models of a running server
  sluice run [flags] MODEL INPUT  run one inference without a server
  sluice sim [flags]              deterministic simulation of the scheduler (sluice sim -h)
  sluice conformance --target URL run the contract's matrices against a running build
  sluice demo                     drive the scheduler core through a scripted scenario`)
}
