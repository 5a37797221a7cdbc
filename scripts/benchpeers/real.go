package main

import (
	"context"
	"encoding/json"
	"strings"
)

// The real-engine pass: workloads (2) and (5) with flite's slt voice
// (checkpoint flite-slt of `make models`), the same designs and clients.

const (
	shortText = `{"text":"Hello."}`
	// longText is about 4 s of speech.
	longText = `{"text":"The quick brown fox jumps over the lazy dog. A scheduler decides who waits. ` +
		`Every request is bounded before work starts, and the answer comes back as audio."}`
)

func fliteModel(engine string, slots int) specBody {
	return specBody{Engine: engine, Checkpoint: "flite-slt", Task: "tts", Slots: slots, Options: json.RawMessage(`{}`)}
}

func realWorkloads() []workload {
	rename := func(figs []figure, err error) ([]figure, error) {
		for i := range figs {
			figs[i].row = strings.Replace(figs[i].row, " ", " flite: ", 1)
		}
		return figs, err
	}
	return []workload{
		{
			name: "2 short-long, flite",
			env: func(e env) env {
				e.models = []modelDef{{"m", fliteModel(e.eng.Name(), 2)}}
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				return rename(shortLong(ctx, c, sz, "m", json.RawMessage(shortText), json.RawMessage(longText)))
			},
		},
		{
			name: "5 alternating, flite",
			env: func(e env) env {
				e.models = []modelDef{{"a", fliteModel(e.eng.Name(), 1)}, {"b", fliteModel(e.eng.Name(), 1)}, {"c", fliteModel(e.eng.Name(), 1)}}
				e.room = 2
				return e
			},
			run: func(ctx context.Context, c *client, e env, sz size) ([]figure, error) {
				return rename(alternating(ctx, c, e, sz, json.RawMessage(shortText)))
			},
		},
	}
}
