package analysis

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// Leak kinds (Leak.Kind).
const (
	// LeakRetainedGraph: the forward's saved tensors — many sites — outlive
	// their step and pile up: an autograd graph kept alive across steps
	// (an evaluation loop under grad mode, total_loss += loss without
	// .item(), outputs kept with their graph, retain_graph=True).
	LeakRetainedGraph = "retained_graph"
	// LeakGrowingList: one site (or a few) leaves a tensor per step that is
	// never freed (outputs.append(logits)).
	LeakGrowingList = "growing_list"
	// LeakStepGrowth: allocated memory at the same point of every step
	// rises, and no finding above explains it.
	LeakStepGrowth = "step_growth"
	// LeakReferenceCycle: the sawtooth — tensors of several steps held
	// together and released in bulk (by Python's garbage collector).
	LeakReferenceCycle = "reference_cycle"
)

// Thresholds of leak detection.
const (
	minLeakSteps     = 4        // complete steps needed to look for leaks at all
	minPatternSteps  = 3        // steps a pattern must be seen in
	minGraphSites    = 4        // sites a step's survivors span to be a graph
	minGrowthBytes   = 64 << 10 // total growth below this is noise
	highLeakBytes    = 1 << 20  // a high-confidence finding holds at least this
	maxGrowingLists  = 5        // growing_list findings per device at most
	explainedGrowth  = 0.7      // share of the drift the specific findings must explain
	forwardShareMin  = 0.6      // share of a graph's bytes allocated in forward
	graphShareMin    = 0.25     // share of the forward's allocations a graph keeps
	patternShareMin  = 0.6      // share of the eligible steps a pattern must be seen in
	highPatternShare = 0.8      // share of the eligible steps for high confidence
)

// DetectLeaks looks for memory that grows step after step on each device
// (hs holds one History per device, from BuildHistory) and returns the
// findings, most certain and largest first. s is the snapshot the histories
// were built from. Steps come from ProfilerStep#N ranges, else from
// optimizer steps, else from Optimizer.step or forward spans of a trace,
// else from the period of the repeating sequence of allocation sites. A block survives its step when it is still
// allocated after the next step ends; survivors that are never freed (or
// only after the last step) make retained_graph (many forward sites per
// step) or growing_list (one site) findings; survivors released together by
// a later step make reference_cycle; a rise of allocated memory at every
// step start that those do not explain makes step_growth. The first step
// (warm-up: optimizer state, workspaces) and the last (still in flight)
// never count as leaking. A rise of reserved memory alone is allocator
// caching or fragmentation, not a leak, and is not reported here.
func DetectLeaks(s *snapshot.Snapshot, hs []*History) []Leak {
	out := []Leak{}
	for _, h := range hs {
		if h == nil || h.Phases == nil || len(h.Device.Events) == 0 {
			continue
		}
		out = append(out, detectDeviceLeaks(h)...)
	}
	rank := map[Confidence]int{High: 0, Medium: 1, Low: 2}
	sort.SliceStable(out, func(a, b int) bool {
		x, y := &out[a], &out[b]
		if x.Device != y.Device {
			return x.Device < y.Device
		}
		if rank[x.Confidence] != rank[y.Confidence] {
			return rank[x.Confidence] < rank[y.Confidence]
		}
		return x.TotalBytes > y.TotalBytes
	})
	return out
}

// leakScan holds what one device's steps tell about survivors.
type leakScan struct {
	h      *History
	plan   *StepPlan
	steps  []stepRange
	stepOf []int32 // step index of every event, −1 outside the steps
	sites  *siteCache
	// kept[k] are the blocks of eligible step k never freed (or freed only
	// after the last step); held[k] the same for every step, the first and
	// the last included (what the end holds); delayed are blocks freed by a
	// later step.
	kept    [][]int
	held    [][]int
	delayed []delayedBlock
	// backward says whether the steps have any backward event.
	backward bool
	// guessed lifetimes (allocations without an address, paired by size).
	guessed bool
}

type delayedBlock struct {
	bi         int
	from, upto int // step indices of the allocation and of the free
}

func detectDeviceLeaks(h *History) []Leak {
	if h.Steps == nil {
		return nil
	}
	var out []Leak
	for _, steps := range h.Steps.stepGroups() {
		out = append(out, groupLeaks(h, steps)...)
	}
	return out
}

// groupLeaks looks for leaks among one group of complete steps.
func groupLeaks(h *History, steps []stepRange) []Leak {
	if len(steps) < minLeakSteps {
		return nil
	}
	sc := scanSurvivors(h, h.Steps, steps)
	var out []Leak
	out = append(out, sc.keptFindings()...)
	if l, ok := sc.cycleFinding(); ok {
		out = append(out, l)
	}
	if l, ok := sc.growthFinding(out); ok {
		out = append(out, l)
	}
	capacity := h.Device.CapacityBytes
	if capacity > 0 {
		last := sc.steps[len(sc.steps)-1]
		var peak int64
		for i := last.start; i <= last.end; i++ {
			peak = max(peak, h.Allocated[i])
		}
		for i := range out {
			l := &out[i]
			if l.Kind == LeakReferenceCycle || l.BytesPerStep <= 0 {
				continue
			}
			l.StepsUntilFull = stepsUntilFull(capacity, peak, l.BytesPerStep)
			l.Evidence += fmt.Sprintf(" At %s per step the device (%s) is full in %d more steps.", FormatBytes(l.BytesPerStep), FormatBytes(capacity), l.StepsUntilFull)
		}
	}
	return out
}

// stepsUntilFull is how many more steps at rate bytes per step take a step's
// peak from peak to the capacity (at least 1).
func stepsUntilFull(capacity, peak, rate int64) int {
	if rate <= 0 {
		return 0
	}
	room := capacity - peak
	if room <= 0 {
		return 1
	}
	n := (room + rate - 1) / rate
	if n > math.MaxInt32 {
		n = math.MaxInt32
	}
	return int(max(n, 1))
}

// scanSurvivors finds, for every block allocated in a step, whether it
// outlives the next step, and how it ends.
func scanSurvivors(h *History, plan *StepPlan, steps []stepRange) *leakScan {
	n := len(h.Device.Events)
	sc := &leakScan{h: h, plan: plan, steps: steps, stepOf: make([]int32, n), sites: newSiteCache(h.Snap),
		kept: make([][]int, len(steps)), held: make([][]int, len(steps)), guessed: h.anonymous > 0}
	for i := range sc.stepOf {
		sc.stepOf[i] = -1
	}
	for k, st := range steps {
		for i := st.start; i <= st.end && i < n; i++ {
			sc.stepOf[i] = int32(k)
		}
	}
	for _, st := range steps {
		for i := st.start; i <= st.end && i < n && !sc.backward; i++ {
			sc.backward = h.Phases.code[i] == codeBackward
		}
	}
	S := steps
	lastEnd := S[len(S)-1].end
	// nextStep returns the step holding event i, or the first one after it.
	nextStep := func(i int) int {
		if k := sc.stepOf[i]; k >= 0 {
			return int(k)
		}
		return sort.Search(len(S), func(k int) bool { return S[k].start > i })
	}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Alloc < 0 || b.Untracked {
			continue
		}
		k := int(sc.stepOf[b.Alloc])
		if k < 0 {
			continue
		}
		free := b.Free
		if o := h.firstOOM; o >= 0 && b.Alloc < o && free > o {
			free = -1 // freed while the OutOfMemoryError unwound: it lived to the OOM
		}
		if free < 0 || free > lastEnd {
			sc.held[k] = append(sc.held[k], bi)
		}
		if k+1 >= len(S) {
			continue
		}
		if free >= 0 && free <= S[k+1].end {
			continue // freed by the end of the next step: not a survivor
		}
		if free < 0 || free > lastEnd {
			if k >= 1 && k <= len(S)-2 {
				sc.kept[k] = append(sc.kept[k], bi)
			}
			continue
		}
		sc.delayed = append(sc.delayed, delayedBlock{bi: bi, from: k, upto: nextStep(free)})
	}
	return sc
}

// eligible is the number of steps whose survivors count: all but the first
// and the last.
func (sc *leakScan) eligible() int { return len(sc.steps) - 2 }

// heldAtEnd sums the blocks of every step, the first and the last
// included, that are still held at the end of the last step and were
// allocated at one of sites: what a pattern holds at the end (a list that
// keeps an output per step over 6 steps holds 6 outputs); autocast's weight
// copies count only with copies (a graph keeps those it saved, a list
// does not). It returns the bytes and the step numbers that hold some.
func (sc *leakScan) heldAtEnd(sites map[string]bool, copies bool) (int64, []int) {
	var total int64
	steps := []int{}
	for k, blocks := range sc.held {
		var t int64
		for _, bi := range blocks {
			if sites[sc.site(bi)] && (copies || sc.h.Blocks[bi].Rule != RuleAutocastWeightCache) {
				t += sc.h.Blocks[bi].Size
			}
		}
		if t > 0 {
			total += t
			steps = append(steps, sc.steps[k].n)
		}
	}
	return total, steps
}

// stepNumbers names steps by index.
func (sc *leakScan) stepNumbers(ks []int) []int {
	out := make([]int, len(ks))
	for i, k := range ks {
		out[i] = sc.steps[k].n
	}
	return out
}

// site names a block's allocation site (its first user frame).
func (sc *leakScan) site(bi int) string { return sc.h.blockSite(sc.sites, &sc.h.Blocks[bi]) }

// forwardish reports whether block bi was allocated in forward (or, in
// steps without any backward, in an unknown phase: an inference or
// evaluation loop whose phases were not recorded).
func (sc *leakScan) forwardish(bi int) bool {
	switch sc.h.Phases.At(sc.h.Blocks[bi].Alloc) {
	case PhaseForward:
		return true
	case PhaseUnknown:
		return !sc.backward
	}
	return false
}

// siteBytes is the bytes one site leaves per step.
type siteBytes struct {
	site   string
	bytes  int64
	blocks int
}

// bySite groups blocks by site, largest first.
func (sc *leakScan) bySite(blocks []int) []siteBytes {
	m := map[string]*siteBytes{}
	var order []string
	for _, bi := range blocks {
		s := sc.site(bi)
		a := m[s]
		if a == nil {
			a = &siteBytes{site: s}
			m[s] = a
			order = append(order, s)
		}
		a.bytes += sc.h.Blocks[bi].Size
		a.blocks++
	}
	out := make([]siteBytes, 0, len(m))
	for _, s := range order {
		out = append(out, *m[s])
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].bytes != out[b].bytes {
			return out[a].bytes > out[b].bytes
		}
		return out[a].site < out[b].site
	})
	return out
}

func (sc *leakScan) sumBytes(blocks []int) int64 {
	var t int64
	for _, bi := range blocks {
		t += sc.h.Blocks[bi].Size
	}
	return t
}

// keptFindings turns the never-freed survivors into retained_graph or
// growing_list findings.
func (sc *leakScan) keptFindings() []Leak {
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
		if len(groups) == 1 && strings.HasPrefix(groups[0].site, SiteNoFrames[:len(SiteNoFrames)-1]) && len(blocks) >= minGraphSites {
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
	var fwdAlloc int64
	for _, k := range graphSteps {
		fwdAlloc += sc.forwardAllocated(k)
	}
	if len(graphSteps) >= minPatternSteps && float64(len(graphSteps)) >= patternShareMin*float64(E) &&
		float64(fwd) >= forwardShareMin*float64(all) && float64(fwd) >= graphShareMin*float64(fwdAlloc) {
		return []Leak{sc.graphFinding(graphSteps)}
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
			if sc.h.Blocks[bi].Rule != RuleAutocastWeightCache { // weight copies are no list
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
	var out []Leak
	for i, a := range cands {
		if i == maxGrowingLists {
			break
		}
		per := leakMedian64(a.bytes)
		blocks := leakMedianInt(a.blocks)
		held, seen := sc.heldAtEnd(map[string]bool{a.site: true}, false)
		l := Leak{Kind: LeakGrowingList, Device: sc.h.Device.ID, Site: a.site, BytesPerStep: per, Steps: len(seen), TotalBytes: held, SeenInSteps: seen}
		l.Confidence = sc.patternConfidence(len(a.steps), a.bytes, a.total)
		what := "one tensor"
		if blocks > 1 {
			what = fmt.Sprintf("%d tensors", blocks)
		}
		l.Evidence = fmt.Sprintf("%s leaves %s of %s per step that no later step frees: %s held at the end, from %s of %d.",
			a.site, what, FormatBytes(per), FormatBytes(held), StepNumbers(seen), len(sc.steps))
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

// forwardAllocated is the bytes allocated in forward during step k.
func (sc *leakScan) forwardAllocated(k int) int64 {
	var t int64
	st := sc.steps[k]
	for i := st.start; i <= st.end; i++ {
		if bi := sc.h.openAt[i]; bi >= 0 && sc.forwardish(int(bi)) {
			t += sc.h.Blocks[bi].Size
		}
	}
	return t
}

// graphAlive reports whether the steps ran no backward (so tensors kept
// from them hold their graph too).
func (sc *leakScan) graphAlive(ks []int) bool {
	for _, k := range ks {
		st := sc.steps[k]
		for i := st.start; i <= st.end; i++ {
			if sc.h.Phases.code[i] == codeBackward {
				return false
			}
		}
	}
	return true
}

// patternConfidence grades a pattern seen in seen eligible steps with
// per-step bytes and total bytes.
func (sc *leakScan) patternConfidence(seen int, per []int64, total int64) Confidence {
	E := sc.eligible()
	share := float64(seen) / float64(E)
	c := Low
	switch {
	case seen >= minPatternSteps+1 && share >= highPatternShare && leakCV(per) <= 0.35 && total >= highLeakBytes:
		c = High
	case seen >= minPatternSteps && share >= patternShareMin:
		c = Medium
	}
	return sc.capConfidence(c)
}

// capConfidence lowers a finding's confidence to what the steps support:
// steps found only from the period of allocation sites give medium at
// most, lifetimes paired by size (survivors are guesses) low.
func (sc *leakScan) capConfidence(c Confidence) Confidence {
	if c == High && !sc.plan.HighConfidence() {
		c = Medium
	}
	if sc.guessed && c != Low {
		c = Low
	}
	return c
}

// graphFinding builds the retained_graph finding from the steps whose
// survivors span many sites.
func (sc *leakScan) graphFinding(ks []int) Leak {
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
	l := Leak{Kind: LeakRetainedGraph, Device: sc.h.Device.ID, Site: call, BytesPerStep: perStep, Steps: len(seen), TotalBytes: total, SeenInSteps: seen}
	l.Confidence = sc.patternConfidence(len(ks), per, total)
	var top []string
	for i, g := range groups {
		if i == 4 {
			break
		}
		top = append(top, fmt.Sprintf("%s %s/step", g.site, FormatBytes(g.bytes/int64(len(ks)))))
	}
	alive := sc.graphAlive(ks)
	l.Evidence = fmt.Sprintf("Each step leaves about %d tensors (%s) from %d sites allocated until the end: %s held at the end, from %s of %d; forward called at %s. Largest: %s.",
		leakMedianInt(nblocks), FormatBytes(perStep), len(groups), FormatBytes(total), StepNumbers(seen), len(sc.steps), call, strings.Join(top, ", "))
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
			if !isNoise(&s.Frames[st[i]]) {
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
		if isModelFrame(f) && lastUser != "" {
			return lastUser
		}
		if isPython(f) && !isLibrary(f.Filename) && !isModelFrame(f) {
			lastUser = frameString(f)
			if fk := (funcKey{f.Filename, f.Name}); sc.plan.loop == fk || sc.h.Phases.callers[fk] {
				loopCall = lastUser
			}
		}
	}
	if loopCall != "" {
		return loopCall // no model frame: the call in the loop that cut the steps
	}
	return lastUser
}

// cycleFinding looks for the sawtooth: survivors of several steps released
// together by a later step.
func (sc *leakScan) cycleFinding() (Leak, bool) {
	if len(sc.delayed) == 0 {
		return Leak{}, false
	}
	type release struct {
		from       map[int]bool
		blocks     []int
		bytes      int64
		first, end int // event range of the frees
	}
	rel := map[int]*release{}
	var delayedBytes int64
	for _, d := range sc.delayed {
		r := rel[d.upto]
		if r == nil {
			r = &release{from: map[int]bool{}, first: math.MaxInt, end: -1}
			rel[d.upto] = r
		}
		b := &sc.h.Blocks[d.bi]
		r.from[d.from] = true
		r.blocks = append(r.blocks, d.bi)
		r.bytes += b.Size
		r.first, r.end = min(r.first, b.Free), max(r.end, b.Free)
		delayedBytes += b.Size
	}
	var collections []int
	var collected int64
	maxFrom := 0
	bulk := true
	for m, r := range rel {
		if len(r.from) < 2 {
			continue
		}
		collections = append(collections, m)
		collected += r.bytes
		maxFrom = max(maxFrom, len(r.from))
		allocs := 0
		for i := r.first; i <= r.end; i++ {
			if sc.h.Device.Events[i].Action == snapshot.ActionAlloc {
				allocs++
			}
		}
		if allocs > len(r.blocks)/4+2 {
			bulk = false
		}
	}
	sort.Ints(collections)
	if len(collections) == 0 || len(collections) == 1 && maxFrom < 3 {
		return Leak{}, false
	}
	if float64(collected) < explainedGrowth*float64(delayedBytes) || collected < minGrowthBytes {
		return Leak{}, false
	}
	// The blocks of each release: the survivors it frees and, in the same
	// burst, those of the step just before (too young to be survivors).
	isColl := map[int]bool{}
	for _, m := range collections {
		isColl[m] = true
	}
	perFrom := map[int]int64{}
	var blocks []int
	for _, d := range sc.delayed {
		if isColl[d.upto] {
			perFrom[d.from] += sc.h.Blocks[d.bi].Size
			blocks = append(blocks, d.bi)
		}
	}
	ev := sc.h.Device.Events
	for _, m := range collections {
		r := rel[m]
		sites := map[string]bool{}
		for _, bi := range r.blocks {
			sites[sc.site(bi)] = true
		}
		// The burst: the frees around the survivors' frees, up to the
		// nearest allocations.
		lo, hi := r.first, r.end
		for lo > 0 && ev[lo-1].Action != snapshot.ActionAlloc {
			lo--
		}
		for hi+1 < len(ev) && ev[hi+1].Action != snapshot.ActionAlloc {
			hi++
		}
		for i := lo; i <= hi; i++ {
			bi := sc.h.closeAt[i]
			if bi < 0 {
				continue
			}
			b := &sc.h.Blocks[bi]
			if b.Alloc >= 0 && int(sc.stepOf[b.Alloc]) == m-1 && sites[sc.site(int(bi))] {
				perFrom[m-1] += b.Size
				blocks = append(blocks, int(bi))
				r.bytes += b.Size
				r.from[m-1] = true
			}
		}
	}
	var per []int64
	for _, v := range perFrom {
		per = append(per, v)
	}
	held := sc.maxLiveAtStepEnds(blocks)
	groups := sc.bySite(blocks)
	perStep := leakMedian64(per)
	var from []int
	for k := range perFrom {
		from = append(from, k)
	}
	sort.Ints(from)
	l := Leak{Kind: LeakReferenceCycle, Device: sc.h.Device.ID, Site: groups[0].site, BytesPerStep: perStep, Steps: len(perFrom), TotalBytes: held,
		SeenInSteps: sc.stepNumbers(from)}
	switch {
	case len(collections) >= 2 && bulk && leakCV(per) <= 0.5 && held >= highLeakBytes:
		l.Confidence = High
	case len(collections) >= 2 || maxFrom >= 3:
		l.Confidence = Medium
	default:
		l.Confidence = Low
	}
	l.Confidence = sc.capConfidence(l.Confidence)
	var at []string
	for _, m := range collections {
		r := rel[m]
		at = append(at, fmt.Sprintf("step %d freed %s from %d earlier steps", sc.steps[m].n, FormatBytes(r.bytes), len(r.from)))
	}
	how := "together"
	if bulk {
		how = "in one burst of frees"
	}
	l.Evidence = fmt.Sprintf("Tensors allocated at %s (%s per step) stay allocated across several steps and are then released %s: %s. Up to %s is held at once.",
		groups[0].site, FormatBytes(perStep), how, strings.Join(at, "; "), FormatBytes(held))
	l.Explanation = "A sawtooth: tensors freed in bulk long after their step are kept by objects in a reference cycle, which only Python's garbage collector (gc.collect) frees."
	l.Remedy = "Break the cycle so that reference counting frees the tensors at the end of each step: do not store tensors on objects that reference themselves (self.cache = {..., 'owner': self}, closures or hooks capturing the module, a kept exception with its traceback); use weakref or del the references each step; store .detach() copies. As a stopgap, call gc.collect() every step."
	l.Fix = l.Remedy + fmt.Sprintf(" Saves up to %s at the peak.", FormatBytes(held))
	return l, true
}

// maxLiveAtStepEnds is the most bytes of the given blocks live at the end
// of any step.
func (sc *leakScan) maxLiveAtStepEnds(blocks []int) int64 {
	type delta struct {
		at   int
		size int64
	}
	ds := make([]delta, 0, 2*len(blocks))
	for _, bi := range blocks {
		b := &sc.h.Blocks[bi]
		ds = append(ds, delta{b.Alloc, b.Size})
		if b.Free >= 0 {
			ds = append(ds, delta{b.Free, -b.Size})
		}
	}
	sort.Slice(ds, func(a, b int) bool { return ds[a].at < ds[b].at })
	var live, held int64
	j := 0
	for _, st := range sc.steps {
		for j < len(ds) && ds[j].at <= st.end {
			live += ds[j].size
			j++
		}
		held = max(held, live)
	}
	return held
}

// growthFinding measures allocated memory at the start of every step after
// the first (and at the end of the last): a steady rise that the findings
// so far do not explain is step_growth. The rise is judged on the requested
// bytes, what the program holds (the allocator's unsplit rests of up to
// 1 MiB a block come and go with the layout, not with the program), and
// measured in allocator blocks.
func (sc *leakScan) growthFinding(found []Leak) (Leak, bool) {
	h := sc.h
	S := sc.steps
	var vals []int64
	at := []int{}
	for k := 1; k < len(S); k++ {
		at = append(at, S[k].start-1)
	}
	at = append(at, S[len(S)-1].end)
	for _, i := range at {
		vals = append(vals, h.RequestedAt(i))
	}
	if len(vals) < minPatternSteps+1 {
		return Leak{}, false
	}
	var diffs []int64
	rises := 0
	var worstDrop int64
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		diffs = append(diffs, d)
		if d > 0 {
			rises++
		}
		worstDrop = min(worstDrop, d)
	}
	total := vals[len(vals)-1] - vals[0]
	if total < minGrowthBytes || rises*4 < 3*len(diffs) || -worstDrop*4 > total {
		return Leak{}, false
	}
	if total = h.AllocatedAt(at[len(at)-1]) - h.AllocatedAt(at[0]); total <= 0 {
		return Leak{}, false
	}
	slope := total / int64(len(diffs))
	var explained int64
	for _, l := range found {
		if l.Kind == LeakRetainedGraph || l.Kind == LeakGrowingList {
			explained += l.BytesPerStep
		}
	}
	if float64(explained) >= explainedGrowth*float64(slope) {
		return Leak{}, false
	}
	// Which site grew most between the first and the last measure.
	from, to := S[1].start-1, S[len(S)-1].end
	grow := map[string]int64{}
	cacheGrow := map[string]int64{}
	cacheStack := map[snapshot.StackID]bool{}
	modelGrow := map[string]int64{} // grown inside a model call
	modelStack := map[snapshot.StackID]bool{}
	for bi := range h.Blocks {
		b := &h.Blocks[bi]
		if b.Untracked {
			continue
		}
		a, z := b.LiveAt(from), b.LiveAt(to)
		if a == z {
			continue
		}
		s := sc.site(bi)
		if z {
			grow[s] += b.Size
			c, ok := cacheStack[b.Stack]
			if !ok {
				c = stackInCache(h.Snap, b.Stack)
				cacheStack[b.Stack] = c
			}
			if c {
				cacheGrow[s] += b.Size
			}
			in, ok := modelStack[b.Stack]
			if !ok {
				in = stackInModel(h.Snap, b.Stack)
				modelStack[b.Stack] = in
			}
			if in {
				modelGrow[s] += b.Size
			}
		} else {
			grow[s] -= b.Size
		}
	}
	site, best := "", int64(0)
	for s, v := range grow {
		if v > best || v == best && s < site {
			site, best = s, v
		}
	}
	var ks []int
	for k := 1; k < len(S); k++ {
		ks = append(ks, k)
	}
	l := Leak{Kind: LeakStepGrowth, Device: h.Device.ID, Site: site, BytesPerStep: slope, Steps: len(diffs), TotalBytes: total,
		SeenInSteps: sc.stepNumbers(ks)}
	switch {
	case rises == len(diffs) && len(diffs) >= minPatternSteps+1 && total >= highLeakBytes && leakCV(diffs) <= 0.5:
		l.Confidence = High
	case total >= highLeakBytes:
		l.Confidence = Medium
	default:
		l.Confidence = Low
	}
	if l.Confidence == High && !sc.plan.HighConfidence() {
		l.Confidence = Medium // steps from the period of sites (allocated totals are exact even when lifetimes are guessed)
	}
	kvCache := site != "" && cacheGrow[site]*2 >= best
	// Without a backward, memory that grows inside the model's forward
	// step after step is what a key/value cache does while generating
	// (the user's own cache code need not say "cache").
	inModel := site != "" && !kvCache && !sc.backward && modelGrow[site]*2 >= best
	if kvCache || inModel {
		l.Confidence = Low // a cache growing with the sequence: expected while generating
	}
	first, last := S[1].n, S[len(S)-1].n
	l.Evidence = fmt.Sprintf("Allocated memory at the start of each step rose from %s at step %d to %s after step %d: %s per step, rising in %d of %d steps.",
		FormatBytes(vals[0]), first, FormatBytes(vals[len(vals)-1]), last, FormatBytes(slope), rises, len(diffs))
	if site != "" {
		l.Evidence += fmt.Sprintf(" Most of it (%s) is memory allocated at %s.", FormatBytes(best), site)
	}
	l.Explanation = "Memory rises at every step and no graph or list found above explains it: something keeps tensors alive from one step to the next."
	switch {
	case kvCache:
		l.Explanation = "It is allocated in cache code: a key/value cache that grows with the generated sequence is expected, not a leak, unless it is never reset between sequences."
	case inModel:
		l.Explanation = "It grows inside the model's forward in a loop without backward: a key/value cache that grows with the generated sequence is expected, not a leak, unless it is never reset between sequences."
	}
	l.Remedy = fmt.Sprintf("Find what keeps tensors alive from one step to the next (allocated at %s): a tensor accumulated with its graph (use .item() or .detach()), a list or dict of GPU tensors (.detach().cpu()), a buffer grown with torch.cat (preallocate or bound it), a cache that grows by design (cap it).",
		leakOrUnknown(site))
	l.Fix = l.Remedy + fmt.Sprintf(" Saves %s per step, %s so far.", FormatBytes(slope), FormatBytes(total))
	return l, true
}

// savings is the end of a fix: what it saves now and at every further step.
func savings(now, perStep int64) string {
	return fmt.Sprintf(" Saves %s now and %s for every further step.", FormatBytes(now), FormatBytes(perStep))
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
		if isModelFrame(&s.Frames[id]) {
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

// leakMedian64 returns the median (the upper one of an even count).
func leakMedian64(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]int64(nil), v...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	return s[len(s)/2]
}

func leakMedianInt(v []int) int {
	if len(v) == 0 {
		return 0
	}
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}

// leakCV is the coefficient of variation of v (0 for fewer than two values or
// a zero mean).
func leakCV(v []int64) float64 {
	if len(v) < 2 {
		return 0
	}
	var sum float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / float64(len(v))
	if mean == 0 {
		return 0
	}
	var ss float64
	for _, x := range v {
		d := float64(x) - mean
		ss += d * d
	}
	return math.Sqrt(ss/float64(len(v))) / math.Abs(mean)
}
