package server

import (
	"net/http"
	"regexp"

	"github.com/sluice-dev/sluice/backends/audio"
)

// handleDiarization serves POST /v1/audio/diarization (speaches' route and
// shape): an audio upload with the fields audio.DiarizationFields
// (num_speakers, or min_speakers and max_speakers, each 1..32;
// response_format json or rttm). Every field is checked before a lease is
// taken: an unknown, repeated or nonsense one is 400 naming it
// (diar.fields). The answer is {"duration","segments":[{"start","end",
// "speaker"}]} or, with rttm, text/plain RTTM SPEAKER lines named after
// the upload's file name.
func (s *Server) handleDiarization(w http.ResponseWriter, r *http.Request) error {
	u, err := audioUpload(r)
	if err != nil {
		return err
	}
	defer u.Close()
	p, in, err := audio.ParseDiarization(u.fields, u.input)
	if err != nil {
		return invalidRequest(err)
	}
	var res audio.DiarizationResult
	lease, out, err := s.inferUpload(r, u, p.Model, "diarization", in, &res)
	if err != nil {
		return err
	}
	defer lease.Release(true)
	if p.ResponseFormat == "rttm" {
		return writeTask(w, r, lease, "text/plain; charset=utf-8", []byte(res.RTTM(rttmName(u.filename))))
	}
	return writeTask(w, r, lease, jsonContentType[0], append(out.JSON, '\n'))
}

var rttmUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// rttmName is an RTTM file ID from an upload's file name: its base without
// the extension, unsafe characters as "_", at most 64 bytes; "audio" when
// there is none.
func rttmName(filename string) string {
	base := filename
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == '/' || base[i] == '\\' {
			base = base[i+1:]
			break
		}
	}
	for i := len(base) - 1; i > 0; i-- {
		if base[i] == '.' {
			base = base[:i]
			break
		}
	}
	base = rttmUnsafe.ReplaceAllString(base, "_")
	if len(base) > 64 {
		base = base[:64]
	}
	if base == "" || base == "_" {
		return "audio"
	}
	return base
}
