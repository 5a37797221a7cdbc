package server

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/server/internal/edge"
	"github.com/sluice-dev/sluice/server/internal/openai"
)

// A multipart upload that fails after its file part was spooled (a later
// field over its limit, a second file) leaves no spool file behind
// (edge.upload-spool; edgemutants spool-kept-on-multipart-error).
func TestUploadSpoolRemovedOnMultipartError(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte{1}, 2<<20) // over the spool threshold
	for _, tc := range []struct {
		name  string
		after func(*multipart.Writer)
	}{
		{"field over its limit", func(mw *multipart.Writer) {
			_ = mw.WriteField("language", strings.Repeat("x", edge.MaxFormField+1))
		}},
		{"a second file", func(mw *multipart.Writer) {
			fw, _ := mw.CreateFormFile("file", "b.wav")
			_, _ = fw.Write([]byte("RIFF"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			mw := multipart.NewWriter(&buf)
			_ = mw.WriteField("model", "asr")
			fw, err := mw.CreateFormFile("file", "a.wav")
			if err != nil {
				t.Fatal(err)
			}
			_, _ = fw.Write(payload)
			tc.after(mw)
			_ = mw.Close()
			ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions", buf.String(), "Content-Type", mw.FormDataContentType())
			if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
				t.Fatalf("spool files left: %v", ents)
			}
		})
	}
}

// A raw upload refused for its query (too many parameters) after its body
// was spooled leaves no spool file behind (edge.upload-spool; edgemutants
// spool-kept-on-query-refusal).
func TestUploadSpoolRemovedOnQueryRefusal(t *testing.T) {
	ts, eng := startBlobServer(t, nil)
	payload := bytes.Repeat([]byte{1}, 2<<20) // over the spool threshold
	q := "model=asr"
	for i := range openai.MaxFormFields {
		q += "&p" + strings.Repeat("x", i%3) + string(rune('a'+i%26)) + "=1"
	}
	ts.must(http.StatusBadRequest, "POST", "/v1/audio/transcriptions?"+q, string(payload), "Content-Type", "audio/wav")
	if ents, _ := os.ReadDir(eng.dir); len(ents) != 0 {
		t.Fatalf("spool files left: %v", ents)
	}
}
