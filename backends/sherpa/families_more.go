package sherpa

import (
	"os"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/backends"
)

// checkMoreFamilies checks the families added after the first fourteen
// (Kitten, the Vocos vocoder's Matcha, Moonshine v2, the streaming
// Paraformer and NeMo CTC), each against what its sherpa-onnx model class
// reads without checking.
func (c *config) checkMoreFamilies() error {
	switch c.fam.name {
	case FamilyKitten:
		return c.checkKitten()
	}
	return nil
}

// checkKitten: offline-tts-kitten-model.cc exits unless model_type is
// kitten-tts, has_espeak is 1, style_dim is "rows,dim" and voices.bin
// holds n_speakers x rows x dim floats; it feeds the graph's three inputs
// by position (the phoneme IDs, the style row, the speed).
func (c *config) checkKitten() error {
	m := c.infos["model"]
	if mt := m.Meta["model_type"]; mt != "kitten-tts" {
		return backends.Invalidf("sherpa: model: metadata model_type %q, want kitten-tts", mt)
	}
	if metaInt(m, "has_espeak") != 1 {
		return backends.Invalidf("sherpa: model: metadata has_espeak must be 1 (Kitten is phonemized by espeak-ng)")
	}
	if len(m.Inputs) != 3 || len(m.Outputs) < 1 {
		return backends.Invalidf("sherpa: model: %d inputs and %d outputs, want phoneme IDs, style and speed in, audio out", len(m.Inputs), len(m.Outputs))
	}
	c.rate = metaInt(m, "sample_rate")
	if c.rate < 8000 || c.rate > 48000 {
		return backends.Invalidf("sherpa: model: metadata sample_rate %d outside 8000..48000", c.rate)
	}
	c.speakers = metaInt(m, "n_speakers")
	if c.speakers < 1 || c.speakers > 4096 {
		return backends.Invalidf("sherpa: model: metadata n_speakers %d outside 1..4096", c.speakers)
	}
	d, err := dimList(m.Meta["style_dim"], 2)
	if err != nil {
		return backends.Invalidf("sherpa: model: metadata style_dim %q: want rows,dim (%v)", m.Meta["style_dim"], err)
	}
	st, err := os.Stat(c.files["voices"])
	if err != nil {
		return backends.Invalidf("sherpa: voices: %v", err)
	}
	if want := int64(4 * d[0] * d[1] * c.speakers); st.Size() != want {
		return backends.Invalidf("sherpa: voices %s is %d bytes; style_dim %s x %d speakers is %d", c.opts.Voices, st.Size(), m.Meta["style_dim"], c.speakers, want)
	}
	if p := m.Meta["speaker_speed_priors"]; p != "" {
		if n := len(strings.Split(p, ",")); n != c.speakers {
			return backends.Invalidf("sherpa: model: metadata speaker_speed_priors has %d values for %d speakers", n, c.speakers)
		}
	}
	if names := m.Meta["speaker_names"]; names != "" && len(c.opts.Speakers) == 0 {
		c.opts.Speakers = strings.Split(names, ",")
	}
	if len(c.opts.Speakers) > 0 && len(c.opts.Speakers) != c.speakers {
		return backends.Invalidf("sherpa: %d speaker names for %d speakers", len(c.opts.Speakers), c.speakers)
	}
	if c.files["data_dir"] == "" {
		return backends.Invalidf("sherpa: family kitten needs option data_dir (espeak-ng-data)")
	}
	return nil
}

// dimList parses n comma-separated dimensions, each in 1..4096.
func dimList(s string, n int) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, backends.Invalidf("%d values, want %d", len(parts), n)
	}
	out := make([]int, n)
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v > 4096 {
			return nil, backends.Invalidf("%q is not in 1..4096", p)
		}
		out[i] = v
	}
	return out, nil
}
