package leaks

import (
	"fmt"
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/snapshot"
)

// This file names where a leak comes from (the call site, cache or model
// code) and writes the texts that explain a finding's fix.

// callSite names where the leaking forward was called: following the
// stacks of the blocks from the outermost frame in, as long as one frame
// holds most of the bytes, it returns the user frame just outside the first
// model frame (an nn.Module call or a model's forward: the line of the loop
// that runs the model), else the shared frame of the loop whose iterations
// are the steps or of the function whose call was the forward (a model
// written as functions: its layer loop lies deeper), else the innermost
// user frame shared. "" when the stacks share no user frame.
func (sc *leakScan) callSite(blocks []int) string {
	s := sc.h.Snap
	type path struct {
		frames []snapshot.FrameID // outermost first, noise dropped
		bytes  int64
	}
	var paths []path
	var total int64
	for _, bi := range blocks {
		b := &sc.h.Blocks[bi]
		st := s.StackOf(b.Stack)
		p := path{bytes: b.Size}
		for i := len(st) - 1; i >= 0; i-- {
			if !history.IsNoise(&s.Frames[st[i]]) {
				p.frames = append(p.frames, st[i])
			}
		}
		total += b.Size
		paths = append(paths, p)
	}
	if total == 0 {
		return ""
	}
	var chain []snapshot.FrameID
	for depth := 0; ; depth++ {
		by := map[snapshot.FrameID]int64{}
		for _, p := range paths {
			if depth < len(p.frames) {
				by[p.frames[depth]] += p.bytes
			}
		}
		var best snapshot.FrameID
		var bv int64 = -1
		for f, v := range by {
			if v > bv || v == bv && f < best {
				best, bv = f, v
			}
		}
		if bv*10 < total*6 {
			break
		}
		chain = append(chain, best)
		keep := paths[:0]
		for _, p := range paths {
			if depth < len(p.frames) && p.frames[depth] == best {
				keep = append(keep, p)
			}
		}
		paths = keep
	}
	lastUser, loopCall := "", ""
	for _, id := range chain {
		f := &s.Frames[id]
		if history.IsModelFrame(f) && lastUser != "" {
			return lastUser
		}
		if history.IsPython(f) && !history.IsLibrary(f.Filename) && !history.IsModelFrame(f) {
			lastUser = history.FrameString(f)
			if fk := (history.FuncKey{File: f.Filename, Name: f.Name}); sc.plan.Loop == fk || sc.h.Phases.Callers[fk] {
				loopCall = lastUser
			}
		}
	}
	if loopCall != "" {
		return loopCall // no model frame: the call in the loop that cut the steps
	}
	return lastUser
}

// savings is the end of a fix: what it saves now and at every further step.
func savings(now, perStep int64) string {
	return fmt.Sprintf(" Saves %s now and %s for every further step.", units.FormatBytes(now), units.FormatBytes(perStep))
}

// stackInCache reports whether a stack runs through cache code (a frame
// whose file or function names a cache: transformers' cache_utils.py
// DynamicCache.update, kv_cache, past_key_values…).
func stackInCache(s *snapshot.Snapshot, st snapshot.StackID) bool {
	for _, id := range s.StackOf(st) {
		f := &s.Frames[id]
		if strings.Contains(strings.ToLower(f.Filename), "cache") || strings.Contains(strings.ToLower(f.Name), "cache") {
			return true
		}
	}
	return false
}

// stackInModel reports whether a stack runs inside a model call (a module
// call or a model's forward).
func stackInModel(s *snapshot.Snapshot, st snapshot.StackID) bool {
	for _, id := range s.StackOf(st) {
		if history.IsModelFrame(&s.Frames[id]) {
			return true
		}
	}
	return false
}

func leakOrUnknown(s string) string {
	if s == "" {
		return "an unknown site"
	}
	return s
}
