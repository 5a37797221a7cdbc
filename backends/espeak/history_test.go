package espeak

import (
	"bytes"
	"context"
	"testing"

	"github.com/sluice-dev/sluice/backends"
)

// TestHistoryIndependent: the same request gives the same bytes whatever
// the request before it said (contract E1). eSpeak NG kept generator
// state across calls: "Sure, I will open it after the news." came out
// another length right after "Good, we can leave in ten minutes then.".
func TestHistoryIndependent(t *testing.T) {
	dir := checkpoint(t, nil)
	s, _, err := New().Open(context.Background(), spec(dir, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	const probe = "Sure, I will open it after the news."
	want := say(t, s, probe, "")
	for _, before := range []string{
		"Good, we can leave in ten minutes then.",
		"Turn on the kitchen lights.",
		"What is the weather like today?",
		"Hello!",
		"Call my sister at six o'clock.",
	} {
		say(t, s, before, "")
		if got := say(t, s, probe, ""); !bytes.Equal(got, want) {
			t.Errorf("after %q: %d bytes, alone %d bytes", before, len(got), len(want))
		}
	}
}

// BenchmarkScrub is the measured cost the history fix adds to every
// synthesis (one translation of scrubText, no audio), beside
// BenchmarkSayCommand, a whole short request.
func BenchmarkScrub(b *testing.B) {
	s := benchSession(b)
	defer s.Close(context.Background())
	l := s.(*session).lib
	for b.Loop() {
		l.mu.Lock()
		l.scrub()
		l.mu.Unlock()
	}
}

// BenchmarkSayCommand is one short request ("Turn on the kitchen lights.").
func BenchmarkSayCommand(b *testing.B) {
	s := benchSession(b)
	defer s.Close(context.Background())
	in := []byte(`{"text":"Turn on the kitchen lights."}`)
	for b.Loop() {
		if _, err := s.Infer(context.Background(), backends.Request{Input: in}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func benchSession(b *testing.B) backends.Session {
	s, _, err := New().Open(context.Background(), spec(checkpoint(b, nil), 1))
	if err != nil {
		b.Fatal(err)
	}
	return s
}
