package edge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/sluice-dev/sluice/backends"
)

// Spooled is an upload's payload: in memory up to the spool threshold,
// else in a temporary file removed by Close.
type Spooled struct {
	Data []byte   // the payload when it is in memory; nil when spooled
	f    *os.File // the spool file otherwise
	size int64
}

// fileBlob is a spool file as a backends.Blob.
type fileBlob struct {
	*os.File
	size int64
}

func (f fileBlob) Size() int64 { return f.size }

// Blob returns the payload as a backends.Blob.
func (s *Spooled) Blob() backends.Blob {
	if s.f != nil {
		return fileBlob{File: s.f, size: s.size}
	}
	return bytes.NewReader(s.Data)
}

// Close removes the spool file, if any; it is safe to call twice.
func (s *Spooled) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	name := s.f.Name()
	err := s.f.Close()
	if rerr := os.Remove(name); rerr != nil && err == nil {
		err = rerr
	}
	s.f = nil
	return err
}

// Spool reads r to its end: up to threshold bytes stay in memory, a
// longer payload goes to a temporary file in dir (edge.upload-spool). The
// caller closes the result, which removes the file; on error nothing is
// left behind.
func Spool(r io.Reader, threshold int64, dir string) (*Spooled, error) {
	data, err := io.ReadAll(io.LimitReader(r, threshold+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) <= threshold {
		return &Spooled{Data: data, size: int64(len(data))}, nil
	}
	f, err := os.CreateTemp(dir, "sluice-body-*")
	if err != nil {
		return nil, &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "cannot spool the upload",
			Err: fmt.Errorf("edge: spool: %w", err)}
	}
	s := &Spooled{f: f}
	n, err := f.Write(data)
	data = nil
	if err == nil {
		var m int64
		m, err = io.Copy(f, r)
		s.size = int64(n) + m
	}
	if err != nil {
		_ = s.Close()
		var pe *os.PathError
		if errors.As(err, &pe) { // the spool's own write failed (disk full)
			return nil, &Error{Status: http.StatusInternalServerError, Type: "internal_error", Message: "cannot spool the upload",
				Err: fmt.Errorf("edge: spool: %w", err)}
		}
		return nil, err
	}
	return s, nil
}
