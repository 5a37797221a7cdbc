package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/core"
)

// serviceTimes reads a trace and returns, per model, every granted
// request's service time: its Grant effect to its Release event, the time
// the what-if replay holds a slot for the same request (sim.WhatIfTrace),
// sorted.
func serviceTimes(path string) (map[string][]time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("service times: %w", err)
	}
	defer f.Close()
	modelOf := map[uint64]string{}
	granted := map[uint64]int64{}
	out := map[string][]time.Duration{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		var r core.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("service times: %s: %w", path, err)
		}
		switch {
		case r.Ev == core.EvSubmitRequest.String():
			modelOf[r.Ticket] = r.Model
		case r.Ef == core.EfGrant.String():
			granted[r.Ticket] = r.T
		case r.Ev == core.EvRelease.String():
			if at, ok := granted[r.Ticket]; ok {
				m := modelOf[r.Ticket]
				out[m] = append(out[m], time.Duration(r.T-at))
				delete(granted, r.Ticket)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("service times: %w", err)
	}
	for _, ds := range out {
		slices.Sort(ds)
	}
	return out, nil
}
