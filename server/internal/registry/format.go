package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
)

// The file formats (the package comment shows both).

// readSnapshot parses a snapshot file and returns it with its size; a
// missing file is an empty state of generation 0.
func readSnapshot(path string) (State, int64, error) {
	b, err := readFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return State{Models: []Model{}}, 0, nil
	}
	if err != nil {
		return State{}, 0, fmt.Errorf("state file %s: %w", path, err)
	}
	st, err := parseSnapshot(b)
	if err != nil {
		return State{}, 0, fmt.Errorf("state file %s is corrupt (%w); it is kept as it is: repair or remove it to start", path, err)
	}
	return st, int64(len(b)), nil
}

// EncodeSnapshot is the snapshot file's bytes for st.
func EncodeSnapshot(st State) ([]byte, error) {
	if st.Models == nil {
		st.Models = []Model{}
	}
	body, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	out := fmt.Appendf(nil, "%s %d crc32c=%08x len=%d\n", snapshotMagic, snapshotFormat, crc32.Checksum(body, crc32c), len(body))
	return append(out, body...), nil
}

// parseSnapshot checks the header, the length and the checksum, then
// decodes the body strictly. Format 1 is format 2 without a journal.
func parseSnapshot(b []byte) (State, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 200 {
		return State{}, errors.New("no header line")
	}
	var format, n int
	var sum uint32
	var magic string
	if _, err := fmt.Sscanf(string(b[:nl]), "%s %d crc32c=%x len=%d", &magic, &format, &sum, &n); err != nil || magic != snapshotMagic {
		return State{}, fmt.Errorf("bad header %q", b[:nl])
	}
	if format != 1 && format != snapshotFormat {
		return State{}, fmt.Errorf("format %d, this build reads formats 1 and %d", format, snapshotFormat)
	}
	body := b[nl+1:]
	if len(body) != n {
		return State{}, fmt.Errorf("body is %d bytes, the header says %d", len(body), n)
	}
	if got := crc32.Checksum(body, crc32c); got != sum {
		return State{}, fmt.Errorf("checksum mismatch: crc32c %08x, the header says %08x", got, sum)
	}
	var st State
	if err := decodeStrict(body, &st); err != nil {
		return State{}, fmt.Errorf("body: %w", err)
	}
	if format == 1 && st.Journal != 0 {
		return State{}, errors.New("body: a format 1 snapshot has no journal")
	}
	if err := checkModels(st.Models, true); err != nil {
		return State{}, err
	}
	if err := checkModels(st.Intents, true); err != nil {
		return State{}, fmt.Errorf("intents: %w", err)
	}
	if st.Models == nil {
		st.Models = []Model{}
	}
	return st, nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}

// checkModels checks the records' IDs and versions; unique: an ID may be
// listed once (a snapshot; a journal record may not repeat one either).
func checkModels(models []Model, unique bool) error {
	seen := map[string]bool{}
	for k, m := range models {
		if !validID(m.ID) {
			return fmt.Errorf("model %d: model id %q must match [A-Za-z0-9._-]{1,128}", k, m.ID)
		}
		if unique && seen[m.ID] {
			return fmt.Errorf("model %q listed twice", m.ID)
		}
		seen[m.ID] = true
		if m.ConfigVersion < 1 { // the upper bound is the spec validator's, at restore
			return fmt.Errorf("model %q: config_version must be at least 1", m.ID)
		}
	}
	return nil
}

// validID is the model ID rule of the API ([A-Za-z0-9._-]{1,128}, not "."
// or "..").
func validID(s string) bool {
	if len(s) == 0 || len(s) > 128 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// encodeRecord frames one journal record: its header line, then its body
// and a newline.
func encodeRecord(c change) ([]byte, error) {
	body, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	out := fmt.Appendf(nil, "r crc32c=%08x len=%d\n", crc32.Checksum(body, crc32c), len(body))
	out = append(out, body...)
	return append(out, '\n'), nil
}

// parseJournal parses a journal: its generation, its records, the length
// of its complete prefix, and whether a torn last record follows that
// prefix (one a crash cut short: its header line without its newline, or
// fewer bytes than its header says). Anything else is an error: a bad
// header, a complete record whose checksum fails or that does not decode.
func parseJournal(b []byte) (gen uint64, recs []change, good int, torn bool, err error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 || nl > 200 { // a journal is created whole (Store.replace): never torn here
		return 0, nil, 0, false, errors.New("no header line")
	}
	var format int
	var magic string
	if _, err := fmt.Sscanf(string(b[:nl]), "%s %d gen=%d", &magic, &format, &gen); err != nil || magic != journalMagic {
		return 0, nil, 0, false, fmt.Errorf("bad header %q", b[:nl])
	}
	if format != journalFormat {
		return 0, nil, 0, false, fmt.Errorf("format %d, this build reads format %d", format, journalFormat)
	}
	off := nl + 1
	for k := 1; off < len(b); k++ {
		rest := b[off:]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if len(rest) <= 40 && bytes.HasPrefix([]byte("r crc32c=00000000 len="), rest[:min(len(rest), 9)]) {
				return gen, recs, off, true, nil // a header line cut short
			}
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: no header line", k, off)
		}
		var sum uint32
		var n int
		if _, err := fmt.Sscanf(string(rest[:nl]), "r crc32c=%x len=%d", &sum, &n); err != nil || n < 0 || n > maxStateBytes {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: bad header %q", k, off, rest[:min(nl, 80)])
		}
		body := rest[nl+1:]
		if len(body) < n+1 {
			return gen, recs, off, true, nil // cut short by a crash
		}
		if body[n] != '\n' {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: no newline after its %d bytes", k, off, n)
		}
		body = body[:n]
		if got := crc32.Checksum(body, crc32c); got != sum {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: checksum mismatch: crc32c %08x, the header says %08x", k, off, got, sum)
		}
		var c change
		if err := decodeStrict(body, &c); err != nil {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: %w", k, off, err)
		}
		if err := checkModels(c.Models, true); err != nil {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: %w", k, off, err)
		}
		if err := checkModels(c.Intents, true); err != nil {
			return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: intents: %w", k, off, err)
		}
		for _, id := range c.Settled {
			if !validID(id) {
				return 0, nil, 0, false, fmt.Errorf("record %d at offset %d: settled: model id %q must match [A-Za-z0-9._-]{1,128}", k, off, id)
			}
		}
		recs = append(recs, c)
		off += nl + 1 + n + 1
	}
	return gen, recs, off, false, nil
}
