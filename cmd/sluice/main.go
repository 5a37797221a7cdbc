// Command sluice is the Sluice model server and its tools.
//
//	sluice serve [flags]        run the HTTP server (see `sluice serve -h`)
//	sluice models [flags]       list the models of a running server
//	sluice run [flags] MODEL INPUT
//	                            run one inference without a server
//	sluice sim [flags]          deterministic simulation of the scheduler
//	sluice demo                 drive the scheduler core through a short scripted scenario
//	sluice version              the build's version, VCS revision and Go version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sluice-dev/sluice/conformance"
	"github.com/sluice-dev/sluice/conformance/inproc"
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
		return conformance.Main(args[1:], stdout, stderr, inproc.Build)
	case "version", "--version":
		err = version(args[1:], stdout)
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	default:
		fmt.Fprintf(stderr, "sluice: unknown command %q; run 'sluice help'\n", args[0])
		return 2
	}
	var ue *usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "sluice", ue.Error())
		return 2
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
  sluice demo                     drive the scheduler core through a scripted scenario
  sluice version                  the build's version, VCS revision and Go version`)
}

// usageError is a mistake on the command line (an unknown flag, a stray
// argument): mainCode prints it as one line naming the command's help and
// exits 2.
type usageError struct {
	cmd string
	err error
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%s: %v; run 'sluice %s -h'", e.cmd, e.err, e.cmd)
}

func (e *usageError) Unwrap() error { return e.err }

// parseFlags parses args into fs without the flag package's own output
// (which prints every flag after any mistake): -h and --help write help to
// w and return flag.ErrHelp; a mistake returns a usageError of one line.
func parseFlags(fs *flag.FlagSet, args []string, w io.Writer, help func(io.Writer)) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		help(w)
		return err
	case err != nil:
		return &usageError{cmd: fs.Name(), err: err}
	}
	return nil
}

// printFlags writes the flags of fs named in names (nil: all of them, in
// name order) as flag.PrintDefaults does, but with two dashes, and without
// the defaults of key flags: those come from the environment
// (SLUICE_API_KEY), and help must not print a secret.
func printFlags(w io.Writer, fs *flag.FlagSet, names []string) {
	if names == nil {
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	}
	for _, n := range names {
		f := fs.Lookup(n)
		if f == nil {
			continue
		}
		typ, help := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if typ != "" {
			line += " " + typ
		}
		def := f.DefValue
		switch {
		case strings.HasSuffix(f.Name, "-key"), def == "", def == "false", def == "0", def == "0s":
		default:
			help += " (default " + def + ")"
		}
		fmt.Fprintf(w, "%s\n    \t%s\n", line, help)
	}
}
