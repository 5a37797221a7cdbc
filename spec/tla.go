package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// Names are the action and invariant names a TLA+ module declares.
type Names struct {
	// Events are the event actions: the operators named in Next whose
	// definition is built on Event(...), in order of first mention.
	Events []string
	// Internal are the operators named in the definition of Internal.
	Internal []string
	// Invariants are the conjuncts of the definition of Invariants.
	Invariants []string
	// Defined lists every top-level definition.
	Defined map[string]string
}

var (
	lineComment  = regexp.MustCompile(`\\\*[^\n]*`)
	blockComment = regexp.MustCompile(`(?s)\(\*.*?\*\)`)
	topDef       = regexp.MustCompile(`(?m)^([A-Za-z][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*==`)
	ident        = regexp.MustCompile(`[A-Za-z][A-Za-z0-9_]*`)
)

// StripComments removes TLA+ comments.
func StripComments(src string) string {
	src = blockComment.ReplaceAllString(src, "")
	return lineComment.ReplaceAllString(src, "")
}

// TLANames reads the names of a TLA+ module's source.
func TLANames(src string) (*Names, error) {
	src = StripComments(src)
	n := &Names{Defined: map[string]string{}}
	locs := topDef.FindAllStringSubmatchIndex(src, -1)
	for k, loc := range locs {
		end := len(src)
		if k+1 < len(locs) {
			end = locs[k+1][0]
		}
		name := src[loc[2]:loc[3]]
		n.Defined[name] = src[loc[1]:end]
	}
	body := func(name string) (string, error) {
		b, ok := n.Defined[name]
		if !ok {
			return "", fmt.Errorf("spec: no definition of %s", name)
		}
		return b, nil
	}
	mentioned := func(b string) []string {
		var out []string
		seen := map[string]bool{}
		for _, id := range ident.FindAllString(b, -1) {
			if _, def := n.Defined[id]; def && !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
		return out
	}
	next, err := body("Next")
	if err != nil {
		return nil, err
	}
	for _, id := range mentioned(next) {
		if strings.Contains(n.Defined[id], "Event(") && id != "Event" {
			n.Events = append(n.Events, id)
		}
	}
	internal, err := body("Internal")
	if err != nil {
		return nil, err
	}
	n.Internal = mentioned(internal)
	invs, err := body("Invariants")
	if err != nil {
		return nil, err
	}
	n.Invariants = mentioned(invs)
	return n, nil
}

var cfgInvariant = regexp.MustCompile(`(?m)^\s*INVARIANTS?\s+([A-Za-z0-9_ \t]+)$`)

// CfgInvariants returns the invariants a TLC .cfg file checks, in order.
func CfgInvariants(cfg string) []string {
	var out []string
	for _, m := range cfgInvariant.FindAllStringSubmatch(StripComments(cfg), -1) {
		out = append(out, strings.Fields(m[1])...)
	}
	return out
}
