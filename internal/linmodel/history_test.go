package linmodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/sluice-dev/sluice/core"
)

func TestHistoryRecords(t *testing.T) {
	h := &History{Spec: Spec{Configs: testConfigs}}
	call := h.Now()
	h.Add(0, apply(a, 0), ok(), call, h.Now())
	h.AddRead(0, a, Row{Model: a, Version: 1, Slots: 1}, call, 2)
	call = h.Now()
	h.AddBulk(1, []int{a, z, a}, core.CodeOK, false, []int{a}, call, h.Now())
	h.Add(2, infer(a), unknown(), h.Now(), h.Now())
	ops := h.Operations()
	if len(ops) != 5 || h.Len() != 5 {
		t.Fatalf("%d operations recorded, want 5 (apply, its read, two bulk members, infer)", len(ops))
	}
	if in := ops[1].Input.(Input); in.Kind != StatusOne || in.Model != a {
		t.Errorf("the manager's read is %+v", in)
	}
	if out := ops[2].Output.(Output); ops[2].Input.(Input).Model != a || !out.Found {
		t.Errorf("bulk member a: %+v %+v", ops[2].Input, out)
	}
	if out := ops[3].Output.(Output); ops[3].Input.(Input).Model != z || out.Found {
		t.Errorf("bulk member z: %+v %+v", ops[3].Input, out)
	}
	if ops[4].Return != unknownReturn {
		t.Errorf("an unknown outcome returns at %d, want the end of the history", ops[4].Return)
	}
	if ops[2].Call != 3 || ops[2].Return != 4 {
		t.Errorf("bulk member over [%d, %d], want the bulk's [3, 4]", ops[2].Call, ops[2].Return)
	}
}

func TestHistoryCheck(t *testing.T) {
	dir := t.TempDir()
	h := &History{Spec: Spec{Configs: testConfigs}}
	h.Add(0, apply(a, 0), ok(), 1, 2)
	h.Add(1, infer(a), ran(1, 0), 3, 4)
	path := filepath.Join(dir, "ok.html")
	if res, err := h.Check(path); res != porcupine.Ok || err != nil {
		t.Fatalf("legal history: %s, %v", res, err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a legal history wrote a visualization")
	}
	h.Add(1, infer(a), ran(2, 0), 5, 6)
	path = filepath.Join(dir, "bad.html")
	if res, err := h.Check(path); res != porcupine.Illegal || err != nil {
		t.Fatalf("illegal history: %s, %v", res, err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b), "ok v2 slot 0") {
		t.Errorf("visualization %s does not describe the operation: %v", path, err)
	}
	if _, err := h.Check(filepath.Join(dir, "missing", "bad.html")); err == nil {
		t.Errorf("no error for a visualization that cannot be written")
	}
}

func TestDescribe(t *testing.T) {
	sp := Spec{Configs: testConfigs, Memory: true}
	for _, c := range []struct {
		in   Input
		out  Output
		want string
	}{
		{apply(a, 4), code(core.CodeInvalid), "apply(a, cfg4 slots=17  invalid) -> " + core.CodeInvalid.String()},
		{Input{Kind: Infer, Model: z, Fail: true}, unknown(), "infer(z, fail) -> ?"},
		{Input{Kind: Status}, rows(Row{Model: b, Version: 2, Slots: 3, MemoryMB: 2}), "status(a) -> b:v2/3 2MB "},
		{Input{Kind: BulkMember, Model: b}, Output{Found: true}, "bulk(b) -> found=true"},
	} {
		if got := sp.describeOp(c.in, c.out); got != c.want {
			t.Errorf("describeOp = %q, want %q", got, c.want)
		}
	}
	if got := Kind(99).String(); got != "kind99" {
		t.Errorf("Kind(99) = %q", got)
	}
	if got := Name(-1); got != "?" {
		t.Errorf("Name(-1) = %q", got)
	}
}
