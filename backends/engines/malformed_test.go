package engines

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/backends"
)

// malformedChildEnv carries a child's case: the test binary, started with
// it set, loads that damaged checkpoint and serves one request instead of
// running tests (see TestMain).
const malformedChildEnv = "SLUICE_MALFORMED_CHILD"

// childCase is what a child is asked to load.
type childCase struct {
	Dir  string `json:"dir"`  // the damaged checkpoint folder
	Task string `json:"task"` // its task, for the request
}

// malformedChild loads the checkpoint of the case in env (catalogue,
// Validate, Open), answers one standard request, and prints one RESULT
// line: "refused <err>" (a 4xx, ErrInvalid), "failed <err>" (another
// error), or "served". A crash of the native library ends the process
// before the line, which is what the parent looks for.
func malformedChild(env string) int {
	var c childCase
	if err := json.Unmarshal([]byte(env), &c); err != nil {
		fmt.Println("RESULT failed bad case:", err)
		return 2
	}
	err := LoadAndServe(context.Background(), c.Dir, c.Task, nil, true)
	switch {
	case err == nil:
		fmt.Println("RESULT served")
	case errors.Is(err, backends.ErrInvalid):
		fmt.Println("RESULT refused", strings.ReplaceAll(err.Error(), "\n", " "))
	default:
		fmt.Println("RESULT failed", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	return 0
}

// TestMalformedCheckpoints (contract engine.load-safety): damaged copies
// of every checkpoint of the default root (Malformations: truncated,
// emptied, wrong magic, huge header counts, random bytes; manifests
// rewritten to match, so only the engines' own checks stand between the
// files and the native libraries) are loaded and served once, each in a
// child process: every child must end normally with the load refused as
// invalid or the request served. A native crash or exit would have taken
// a server down with it.
func TestMalformedCheckpoints(t *testing.T) {
	cat, _ := scan(t)
	cases := MalformedCases(cat)
	// SLUICE_MALFORMED_ALL=1: every file (the long form); _ONLY: one
	// checkpoint's cases.
	if os.Getenv("SLUICE_MALFORMED_ALL") == "" {
		cases = MalformedShort(cases, 32)
	}
	if only := os.Getenv("SLUICE_MALFORMED_ONLY"); only != "" {
		cases = slices.DeleteFunc(cases, func(c MalformedCase) bool { return c.Checkpoint != only })
	}
	if len(cases) < 5 {
		t.Fatalf("only %d malformed cases over %v", len(cases), cat.Names())
	}
	outcomes := map[string]int{}
	for _, c := range cases {
		cp, _ := cat.Get(c.Checkpoint)
		dir, err := Damage(cp.Dir, t.TempDir(), c, 32)
		if err != nil {
			t.Fatal(err)
		}
		env, _ := json.Marshal(childCase{Dir: dir, Task: cp.Task})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), malformedChildEnv+"="+string(env))
		out, err := cmd.CombinedOutput()
		cancel()
		line := ""
		for _, l := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(l, "RESULT ") {
				line = strings.TrimPrefix(l, "RESULT ")
			}
		}
		kind, _, _ := strings.Cut(line, " ")
		t.Logf("%s: %s", c, line)
		switch {
		case err != nil || line == "":
			t.Errorf("%s: the child process died (%v): %s", c, err, tail(string(out), 600))
		case kind == "failed":
			t.Errorf("%s: load failed without a 4xx: %s", c, line)
		}
		outcomes[kind]++
	}
	t.Logf("%d cases: %v", len(cases), outcomes)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
