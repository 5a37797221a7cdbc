// Command sim runs Sluice's deterministic simulator; it is `sluice sim`
// (see sim.Main) for use before the sluice command wires it.
package main

import (
	"os"

	"github.com/sluice-dev/sluice/sim"
)

func main() {
	os.Exit(sim.Main(os.Args[1:], os.Stdout, os.Stderr))
}
