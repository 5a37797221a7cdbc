package spec

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/core"
	"github.com/sluice-dev/sluice/spec/abstract"
)

func readNames(t *testing.T, src string) *Names {
	t.Helper()
	n, err := TLANames(src)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func sameNames(what string, got, want []string) string {
	if slices.Equal(got, want) {
		return ""
	}
	return what + ": " + strings.Join(got, " ") + "\n   want: " + strings.Join(want, " ") + "\n"
}

// checkNames compares the names of a Scheduler.tla source with core's and
// the transcription's; it returns the differences.
func checkNames(n *Names) string {
	diff := sameNames("event actions in Scheduler.tla", n.Events, core.EventNames())
	diff += sameNames("event actions of spec/abstract", abstract.ActionNames(), core.EventNames())
	diff += sameNames("internal actions in Scheduler.tla", n.Internal, abstract.InternalActionNames())
	diff += sameNames("invariants in Scheduler.tla", n.Invariants, core.InvariantNames())
	diff += sameNames("invariants of spec/abstract", abstract.InvariantNames(), core.InvariantNames())
	return diff
}

// TestNamesMatch keeps the action and invariant names of Scheduler.tla, the
// Go transcription and core identical, and the .cfg files checking every
// invariant.
func TestNamesMatch(t *testing.T) {
	src, err := os.ReadFile("Scheduler.tla")
	if err != nil {
		t.Fatal(err)
	}
	if d := checkNames(readNames(t, string(src))); d != "" {
		t.Fatalf("names differ:\n%s", d)
	}
	for _, f := range []string{"MCSchedulerSmall.cfg", "MCSchedulerLarge.cfg"} {
		cfg, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if d := sameNames("invariants in "+f, CfgInvariants(string(cfg)), core.InvariantNames()); d != "" {
			t.Fatal(d)
		}
	}
}

// TestNamesCatchRename shows the name test failing when one action of the
// .tla is renamed (everywhere, or only at its definition).
func TestNamesCatchRename(t *testing.T) {
	src, err := os.ReadFile("Scheduler.tla")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	everywhere := strings.ReplaceAll(s, "TeardownDone", "TeardownFinished")
	definition := strings.Replace(s, "\nTick(expire, idle, ended) ==", "\nTock(expire, idle, ended) ==", 1)
	invariant := strings.ReplaceAll(s, "NoBarging", "NoOvertaking")
	for name, v := range map[string]string{"everywhere": everywhere, "definition": definition, "invariant": invariant} {
		if v == s {
			t.Fatalf("%s: the rename changed nothing", name)
		}
		n, err := TLANames(v)
		if err == nil && checkNames(n) == "" {
			t.Errorf("renaming (%s) went unnoticed", name)
		}
	}
}
