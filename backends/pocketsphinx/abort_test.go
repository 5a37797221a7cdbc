package pocketsphinx

import (
	"context"
	"errors"
	"os"
	"testing"
	"unsafe"

	"github.com/sluice-dev/sluice/backends"
	"github.com/sluice-dev/sluice/backends/catalogue"
	"github.com/sluice-dev/sluice/backends/internal/native"
)

// TestFlatFlagFound: the default checkpoint's decoder exposes its n-gram
// search's pass flags where abort.go looks (so a cancelled decode skips
// the second pass instead of rebuilding the decoder), and the byte
// abortUtt clears is the one -fwdflat sets: a decoder built with
// -fwdflat no has 0 there and 1 in the fwdtree byte before it, and then
// no flag to clear.
func TestFlatFlagFound(t *testing.T) {
	dir := checkpoint(t)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	ss := s.(*session)
	if ss.lib.flatFlag(ss.ps) == nil {
		t.Fatal("the n-gram search's fwdflat flag was not found: a cancelled decode rebuilds the decoder")
	}
	ps := ss.lib.newDecoder(append(ss.cfg.argv(), "-fwdflat", "no"))
	if ps == nil {
		t.Fatal("decoder with -fwdflat no")
	}
	defer ss.lib.freePS(ps)
	search := *(*unsafe.Pointer)(unsafe.Add(ps, psSearch))
	flags := unsafe.Slice((*uint8)(unsafe.Add(search, ngsFwdtree)), 2)
	if flags[0] != 1 || flags[1] != 0 || ss.lib.flatFlag(ps) != nil {
		t.Fatalf("-fwdflat no: flags fwdtree %d fwdflat %d, want 1 0 and no flag found", flags[0], flags[1])
	}
}

// TestCancelSkipsSecondPass (CONTRACT.md engine.cancel): a long decode
// cancelled in its first pass over the start (CMN adaptation) or in the
// real decode ends its utterance without the fwdflat pass over what it
// decoded (the hook sees the flag path), or, when the flag is not found,
// by rebuilding the decoder; either way the session's next answers are
// byte-identical to a freshly opened pool's. On main ps_end_utt ran the
// second pass over every decoded frame, which held the slot for seconds
// after a late cancel.
func TestCancelSkipsSecondPass(t *testing.T) {
	dir := checkpoint(t)
	jfk, err := os.ReadFile(catalogue.DefaultSources("").JFK())
	if err != nil {
		native.SkipUnavailable(t, err) // make deps installs it
	}
	short := speak(t, "Turn on the kitchen lights.")
	fresh := func() []string {
		s, _, err := New().Open(context.Background(), spec(dir, 1))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		return answers(t, s, jfk, short)
	}
	want := fresh()
	defer func() { afterPiece, abortHook, findFlat = nil, nil, (*lib).flatFlag }()
	for _, c := range []struct {
		name     string
		at       int  // the piece after which the context ends
		fallback bool // the flag is not found: the decoder is rebuilt
	}{{"adapt pass", 5, false}, {"decode", 35, false}, {"decode rebuilt", 35, true}} {
		t.Run(c.name, func(t *testing.T) {
			findFlat = (*lib).flatFlag
			if c.fallback {
				findFlat = func(*lib, unsafe.Pointer) *uint8 { return nil }
			}
			s, _, err := New().Open(context.Background(), spec(dir, 1))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			pieces := 0
			afterPiece = func(n int) {
				pieces = n
				if n == c.at {
					cancel()
				}
			}
			var aborts []bool
			abortHook = func(skipped bool) { aborts = append(aborts, skipped) }
			_, err = s.Infer(ctx, backends.Request{Data: jfk}, nil)
			afterPiece, abortHook = nil, nil
			if !errors.Is(err, context.Canceled) || pieces != c.at {
				t.Fatalf("cancelled after piece %d: err %v after %d pieces", c.at, err, pieces)
			}
			if len(aborts) != 1 || aborts[0] != !c.fallback {
				t.Fatalf("aborts %v, want one with skipped=%v", aborts, !c.fallback)
			}
			got := answers(t, s, jfk, short)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("answer %d after the cancel:\n%s\nfresh pool:\n%s", i, got[i], want[i])
				}
			}
		})
	}
}

// answers is the session's JSON answers to each WAV in turn.
func answers(t *testing.T, s backends.Session, wavs ...[]byte) []string {
	t.Helper()
	var out []string
	for _, w := range wavs {
		o, err := s.Infer(context.Background(), backends.Request{Data: w}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(o.JSON))
	}
	return out
}
