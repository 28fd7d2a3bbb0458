package leaks

import (
	"fmt"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/analysis/history"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/result"
)

// This file makes the findings of survivors that are never freed:
// retained_graph (many forward sites per step) and growing_list (one site).

// keptFindings turns the never-freed survivors into retained_graph or
// growing_list findings.
func (sc *leakScan) keptFindings() []result.Leak {
	E := sc.eligible()
	if E < minPatternSteps {
		return nil
	}
	// Retained graph: steps whose survivors span many forward sites.
	var graphSteps []int
	var fwd, all int64
	for k := 1; k <= len(sc.steps)-2; k++ {
		blocks := sc.kept[k]
		if len(blocks) == 0 {
			continue
		}
		groups := sc.bySite(blocks)
		wide := len(groups) >= minGraphSites
		if len(groups) == 1 && strings.HasPrefix(groups[0].site, result.SiteNoFrames[:len(result.SiteNoFrames)-1]) && len(blocks) >= minGraphSites {
			wide = true // no frames to tell sites apart: count the tensors
		}
		if !wide {
			continue
		}
		graphSteps = append(graphSteps, k)
		for _, bi := range blocks {
			all += sc.h.Blocks[bi].Size
			if sc.forwardish(bi) {
				fwd += sc.h.Blocks[bi].Size
			}
		}
	}
	// A graph keeps a good share of what its forward allocated (the saved
	// activations); a list of a few outputs per step keeps little of it.
	// With no phase known, what a step allocates stands for its forward's,
	// the backward's included — the gradients of what forward saved, about
	// as much again — so a graph keeps about half that share of it.
	var fwdAlloc int64
	for _, k := range graphSteps {
		fwdAlloc += sc.forwardAllocated(k)
	}
	share := graphShareMin
	if !sc.backward {
		share /= 2
	}
	if len(graphSteps) >= minPatternSteps && float64(len(graphSteps)) >= patternShareMin*float64(E) &&
		float64(fwd) >= forwardShareMin*float64(all) && float64(fwd) >= share*float64(fwdAlloc) {
		return []result.Leak{sc.graphFinding(graphSteps)}
	}
	// Growing lists: one site leaving tensors step after step.
	type siteSteps struct {
		site   string
		steps  []int
		bytes  []int64
		blocks []int
		total  int64
	}
	m := map[string]*siteSteps{}
	var order []string
	for k := 1; k <= len(sc.steps)-2; k++ {
		var blocks []int
		for _, bi := range sc.kept[k] {
			if sc.h.Blocks[bi].Rule() != history.RuleAutocastWeightCache { // weight copies are no list
				blocks = append(blocks, bi)
			}
		}
		for _, g := range sc.bySite(blocks) {
			a := m[g.site]
			if a == nil {
				a = &siteSteps{site: g.site}
				m[g.site] = a
				order = append(order, g.site)
			}
			a.steps = append(a.steps, k)
			a.bytes = append(a.bytes, g.bytes)
			a.blocks = append(a.blocks, g.blocks)
			a.total += g.bytes
		}
	}
	var cands []*siteSteps
	for _, s := range order {
		a := m[s]
		if len(a.steps) >= minPatternSteps && float64(len(a.steps)) >= patternShareMin*float64(E) {
			cands = append(cands, a)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool { return cands[a].total > cands[b].total })
	var out []result.Leak
	for i, a := range cands {
		if i == maxGrowingLists {
			break
		}
		per := leakMedian64(a.bytes)
		blocks := history.MedianInt(a.blocks)
		held, seen := sc.heldAtEnd(map[string]bool{a.site: true}, false)
		l := result.Leak{Kind: result.LeakGrowingList, Device: sc.h.Device.ID, Site: a.site, BytesPerStep: per, Steps: len(seen), TotalBytes: held, SeenInSteps: seen}
		l.Confidence = sc.patternConfidence(len(a.steps), a.bytes, a.total)
		what := "one tensor"
		if blocks > 1 {
			what = fmt.Sprintf("%d tensors", blocks)
		}
		l.Evidence = fmt.Sprintf("%s leaves %s of %s per step that no later step frees: %s held at the end, from %s of %d.",
			a.site, what, units.FormatBytes(per), units.FormatBytes(held), result.StepNumbers(seen), len(sc.steps))
		l.Explanation = "One site keeping a tensor every step is a list or dict that collects tensors across steps (e.g. outputs.append(logits))."
		if sc.graphAlive(a.steps) {
			l.Explanation += " No backward runs in these steps: if the tensors were made under grad mode, each also keeps its step's autograd graph alive (CPU-side nodes, and any saved tensors)."
		}
		l.Remedy = "Keep a detached copy on the CPU, and only what is needed: outputs.append(logits.detach().cpu()) (or preds.append(logits.argmax(-1).cpu()), losses.append(loss.item())); or clear the list every step."
		l.Fix = l.Remedy + savings(held, per)
		out = append(out, l)
	}
	return out
}

// graphFinding builds the retained_graph finding from the steps whose
// survivors span many sites.
func (sc *leakScan) graphFinding(ks []int) result.Leak {
	var per []int64
	var all []int
	nblocks := []int{}
	for _, k := range ks {
		per = append(per, sc.sumBytes(sc.kept[k]))
		all = append(all, sc.kept[k]...)
		nblocks = append(nblocks, len(sc.kept[k]))
	}
	perStep := leakMedian64(per)
	groups := sc.bySite(all)
	sites := map[string]bool{}
	for _, g := range groups {
		sites[g.site] = true
	}
	total, seen := sc.heldAtEnd(sites, true)
	call := sc.callSite(all)
	if call == "" {
		call = groups[0].site
	}
	l := result.Leak{Kind: result.LeakRetainedGraph, Device: sc.h.Device.ID, Site: call, BytesPerStep: perStep, Steps: len(seen), TotalBytes: total, SeenInSteps: seen}
	l.Confidence = sc.patternConfidence(len(ks), per, total)
	var top []string
	for i, g := range groups {
		if i == 4 {
			break
		}
		top = append(top, fmt.Sprintf("%s %s/step", g.site, units.FormatBytes(g.bytes/int64(len(ks)))))
	}
	alive := sc.graphAlive(ks)
	l.Evidence = fmt.Sprintf("Each step leaves about %d tensors (%s) from %d sites allocated until the end: %s held at the end, from %s of %d; forward called at %s. Largest: %s.",
		history.MedianInt(nblocks), units.FormatBytes(perStep), len(groups), units.FormatBytes(total), result.StepNumbers(seen), len(sc.steps), call, strings.Join(top, ", "))
	if alive {
		l.Explanation = "No backward pass frees them: the autograd graph of every step stays alive with its saved activations."
		l.Remedy = "Do not keep tensors that require grad across steps: if the loop does not train, run it under with torch.no_grad(): (or torch.inference_mode()); accumulate metrics with .item() (total_loss += loss.item()); store outputs with .detach() (.detach().cpu() to free the GPU)."
	} else {
		l.Explanation = "Backward runs but does not free them: the graph is kept (retain_graph=True, or outputs that still require grad kept across steps)."
		l.Remedy = "Let backward free the graph: drop retain_graph=True unless a second backward needs it, and keep nothing that requires grad across steps — .item() for metrics (total_loss += loss.item()), .detach() for outputs (.detach().cpu() to free the GPU)."
	}
	l.Fix = l.Remedy + savings(total, perStep)
	return l
}
