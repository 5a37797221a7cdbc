package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
)

// EvidenceFile is where the in-process conformance run (TestConformance,
// `make contract`) records what ran and passed, relative to the module
// root. CONTRACT.md's labels come from it: a case earns its cells a label
// only when this file says it passed; a skipped or failed case earns
// nothing (U).
const EvidenceFile = "conformance/evidence.json"

// RunEvidence is what one complete conformance run showed: the verdict
// (Pass, Fail or Skip) of every case by name.
type RunEvidence struct {
	Cases map[string]string `json:"cases"`
}

// NewRunEvidence returns the evidence of a report's results.
func NewRunEvidence(rs []Result) *RunEvidence {
	e := &RunEvidence{Cases: make(map[string]string, len(rs))}
	for _, r := range rs {
		e.Cases[r.Case] = r.Verdict
	}
	return e
}

// ReadRunEvidence reads an evidence file.
func ReadRunEvidence(path string) (*RunEvidence, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("conformance: run evidence: %w", err)
	}
	var e RunEvidence
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("conformance: run evidence %s: %w", path, err)
	}
	if e.Cases == nil {
		e.Cases = map[string]string{}
	}
	return &e, nil
}

// Write writes the evidence as indented JSON (keys sorted, so a rerun with
// the same verdicts rewrites the same bytes).
func (e *RunEvidence) Write(path string) error {
	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("conformance: %w", err)
	}
	return nil
}

// passed reports whether the evidence says case name passed.
func (e *RunEvidence) passed(name string) bool { return e != nil && e.Cases[name] == Pass }

// Stale returns why the evidence does not describe a complete run of s: a
// case it lacks, or a case it names that s does not have (nil when it does).
func (e *RunEvidence) Stale(s *Suite) error {
	var errs []string
	known := map[string]bool{}
	for _, c := range s.Cases {
		known[c.Name] = true
		if _, ok := e.Cases[c.Name]; !ok {
			errs = append(errs, "no verdict for case "+c.Name)
		}
	}
	for name := range e.Cases {
		if !known[name] {
			errs = append(errs, "a verdict for "+name+", which is no case of the suite")
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Sprintf("and %d more", len(errs)-5))
	}
	return errors.New("conformance: " + EvidenceFile + " is stale (run `make contract`): " + strings.Join(errs, "; "))
}

// Drift compares the verdicts of a run (only the cases it ran) with the
// evidence: nil when each is the recorded one.
func (e *RunEvidence) Drift(ran map[string]string) error {
	var errs []string
	for name, v := range ran {
		if was, ok := e.Cases[name]; !ok || was != v {
			errs = append(errs, fmt.Sprintf("%s %s (recorded: %q)", name, v, was))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	sort.Strings(errs)
	return errors.New("conformance: verdicts differ from " + EvidenceFile + " (run `make contract` and review CONTRACT.md): " + strings.Join(errs, "; "))
}
