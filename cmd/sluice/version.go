package main

import (
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/server"
)

// version runs `sluice version`: the main module's version, the VCS
// revision with its dirty flag and commit time, and the Go version, from
// debug.ReadBuildInfo (server.BuildInfo, which also labels
// sluice_build_info).
func version(args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return &usageError{cmd: "version", err: fmt.Errorf("unexpected arguments %q", args)}
	}
	_, err := io.WriteString(stdout, formatVersion(server.BuildInfo()))
	return err
}

// formatVersion writes b as `sluice version` prints it.
func formatVersion(b server.Build) string {
	rev := b.Revision
	switch {
	case rev == "":
		rev = "unknown (built without VCS information)"
	case b.Modified:
		rev += " (modified)"
	}
	out := fmt.Sprintf("sluice %s\nrevision: %s\n", b.Version, rev)
	if b.Time != "" {
		out += "commit time: " + b.Time + "\n"
	}
	return out + "go: " + b.GoVersion + "\n"
}
