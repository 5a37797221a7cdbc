package sndfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/sluice-dev/sluice/backends/internal/native"
)

// TestEncodeDeterministic: two encodings of the same samples are the same
// bytes in every format (libsndfile draws an Ogg file's serial at random;
// Close replaces it). The hashes are logged so two processes can be
// compared by hand (go test -v -run TestEncodeDeterministic twice).
func TestEncodeDeterministic(t *testing.T) {
	native.SkipUnavailable(t, Load())
	for _, c := range []struct {
		name         string
		format, rate int
		pieces       bool // Encoder's pieces change nothing (not so for Vorbis, whose pages follow the writes; no speech answer is Vorbis)
	}{
		{"wav", FormatWAV | SubPCM16, 16000, true},
		{"flac", FormatFLAC | SubPCM16, 22050, true},
		{"vorbis", FormatOGG | SubVorbis, 22050, false},
		{"opus", FormatOGG | SubOpus, 24000, true},
		{"opus48k", FormatOGG | SubOpus, 48000, true},
		{"mp3", FormatMPEG | SubMP3, 22050, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := tone(c.rate, 3)
			a, err := Encode(context.Background(), in, c.rate, c.format, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			again, err := Encode(context.Background(), in, c.rate, c.format, 1<<24)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d bytes, sha256 %x", c.name, len(a), sha256.Sum256(a))
			if !bytes.Equal(a, again) {
				t.Fatalf("two encodings differ: %s", firstDiff(a, again))
			}
			if !c.pieces {
				return
			}
			// The third in pieces, through an Encoder, as a streamed
			// speech answer is written.
			e, err := NewEncoder(context.Background(), c.rate, c.format, 1<<24, 0)
			if err != nil {
				t.Fatal(err)
			}
			for p := in; len(p) > 0; {
				n := min(len(p), 1000)
				if err := e.Write(p[:n]); err != nil {
					t.Fatal(err)
				}
				p = p[n:]
			}
			b, err := e.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				t.Fatalf("the encoding in pieces differs: %s", firstDiff(a, b))
			}
		})
	}
}

func firstDiff(a, b []byte) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("byte %d of %d/%d", i, len(a), len(b))
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// TestOggChecksum: the page CRC recomputed here is libogg's (checked on
// pages libogg wrote, before any rewrite), and a rewritten file's pages
// all carry one serial and a CRC that matches.
func TestOggChecksum(t *testing.T) {
	native.SkipUnavailable(t, Load())
	e, err := NewEncoder(context.Background(), 24000, FormatOGG|SubOpus, 1<<24, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.format = 0 // keep libsndfile's bytes as written
	if err := e.Write(tone(24000, 2)); err != nil {
		t.Fatal(err)
	}
	raw, err := e.Close()
	if err != nil {
		t.Fatal(err)
	}
	check := func(b []byte, what string) map[uint32]bool {
		serials := map[uint32]bool{}
		pages := 0
		ok := oggPages(b, func(p []byte) {
			pages++
			want := binary.LittleEndian.Uint32(p[22:])
			q := bytes.Clone(p)
			binary.LittleEndian.PutUint32(q[22:], 0)
			if got := oggChecksum(q); got != want {
				t.Errorf("%s: page %d: crc %08x, stored %08x", what, pages, got, want)
			}
			serials[binary.LittleEndian.Uint32(p[14:])] = true
		})
		if !ok || pages < 3 {
			t.Fatalf("%s: %d pages, well-formed %v", what, pages, ok)
		}
		return serials
	}
	before := check(raw, "libogg's")
	fixed := bytes.Clone(raw)
	fixOggSerials(fixed)
	after := check(fixed, "rewritten")
	if len(before) != 1 || len(after) != 1 {
		t.Fatalf("serials %v then %v, want one stream", before, after)
	}
	// Damaged input is left alone.
	cut := bytes.Clone(raw[:len(raw)-3])
	fixOggSerials(cut)
	if !bytes.Equal(cut, raw[:len(raw)-3]) {
		t.Error("a truncated file was rewritten")
	}
}
