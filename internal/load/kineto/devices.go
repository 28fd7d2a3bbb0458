package kineto

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/torchmem/torchmem/snapshot"
)

// This file makes the devices and their events from the [memory] records.
// What a device's records say beyond the events they become (its baseline,
// its reserved curve, the counts its diagnostics report) is a walk of its
// records in time order. A device whose records come in time order, the
// usual trace, is walked as they are filed, on the recording goroutine,
// beside the lexer (walkMem); build walks again only a device whose records
// do not (or that more than one device type names: their totals were kept
// apart).

// devWalk is the walk of one device's records.
type devWalk struct {
	first devKey  // the key of the device's first record (its kind)
	n     int     // the device's records, walked or not
	recs  []int32 // its records in file order, when there are several devices
	// stale: the walk is not the device's (a record came before the one
	// filed before it, or a second device type has this id); build walks
	// again.
	stale  bool
	lastTS int64 // the time of the last record walked as it was filed

	walked                                                 int   // records walked: the next event's index
	baseline                                               int64 // the allocated bytes before the first record, −1 when unknown
	baselineSet, havePrevTA                                bool
	prevTA                                                 int64
	reserved                                               []snapshot.CounterPoint
	live                                                   map[uint64]int64 // live blocks: address → bytes
	noAddr, orphans, reuse, sizeMismatch, taMismatch, ooms int
	oomMsgs                                                []string // the first ten out-of-memory diagnostics
}

func newDevWalk(first devKey) *devWalk {
	return &devWalk{first: first, baseline: -1, live: map[uint64]int64{}}
}

// id is the device's ID (−1: the CPU).
func (w *devWalk) id() int {
	id, _ := deviceOf(w.first, false)
	return id
}

// step walks the next record: its address, Bytes and flags, and its Total
// Allocated and Total Reserved (read only where its flags say it has them).
func (w *devWalk) step(addr uint64, nbytes int64, flags uint8, ta, trv int64) {
	k := w.walked
	w.walked++
	if flags&memHasTR != 0 && (len(w.reserved) == 0 || w.reserved[len(w.reserved)-1].Value != trv) {
		w.reserved = append(w.reserved, snapshot.CounterPoint{Event: k, Value: trv})
	}
	if flags&memOOM != 0 {
		w.ooms++
		if w.ooms <= 10 {
			msg := fmt.Sprintf("device %d: out of memory: %d bytes requested", w.id(), nbytes)
			if flags&memHasTA != 0 {
				msg += fmt.Sprintf(" with %d allocated", ta)
			}
			if flags&memHasTR != 0 {
				msg += fmt.Sprintf(" and %d reserved", trv)
			}
			w.oomMsgs = append(w.oomMsgs, msg)
		}
		return
	}
	if !w.baselineSet {
		w.baselineSet = true
		if flags&memHasTA != 0 {
			w.baseline = ta - nbytes
		}
	}
	if flags&memHasTA != 0 {
		if w.havePrevTA && ta-w.prevTA != nbytes {
			w.taMismatch++
		}
		w.prevTA, w.havePrevTA = ta, true
	}
	if flags&memHasAddr == 0 {
		w.noAddr++
		return
	}
	if nbytes > 0 {
		if _, ok := w.live[addr]; ok {
			w.reuse++
		}
		w.live[addr] = nbytes
	} else if sz, ok := w.live[addr]; ok {
		if sz != -nbytes {
			w.sizeMismatch++
		}
		delete(w.live, addr)
	} else {
		w.orphans++
	}
}

// walkMem files the record just kept on device dev (tr.devKeys) in its
// device's walk: at its time ts (relative), with its address, Bytes, flags
// and totals.
func (tr *traceReader) walkMem(dev uint16, ts int64, addr uint64, n int64, flags uint8, ta, trv int64) {
	if int(dev) == len(tr.devWalks) { // the device's first record
		k := tr.devKeys[dev]
		var w *devWalk
		for _, o := range tr.devWalks {
			if o.first.id == k.id {
				w = o
				w.stale = true
			}
		}
		if w == nil {
			w = newDevWalk(k)
		}
		tr.devWalks = append(tr.devWalks, w)
	}
	w := tr.devWalks[dev]
	w.n++
	if w.stale {
		return
	}
	if w.n > 1 && ts < w.lastTS {
		w.stale, w.live = true, nil
		return
	}
	w.lastTS = ts
	w.step(addr, n, flags, ta, trv)
}

// buildDevices makes the devices and their events from the memory records.
func (tr *traceReader) buildDevices(b *snapshot.Builder, tmap []uint16) {
	s := b.Snap
	if len(tr.mem) == 0 {
		return
	}
	// The devices by ID; each one's records, in lists of the exact size
	// (grown by append, the copies left behind would be several times the
	// records); none for a single device, whose records are all of them.
	var walks []*devWalk
	for _, w := range tr.devWalks {
		if !slices.Contains(walks, w) {
			walks = append(walks, w)
		}
	}
	slices.SortFunc(walks, func(x, y *devWalk) int { return cmp.Compare(x.first.id, y.first.id) })
	if len(walks) > 1 {
		for _, w := range walks {
			w.recs = make([]int32, 0, w.n)
		}
		for i := range tr.mem {
			w := tr.devWalks[tr.mem[i].dev]
			w.recs = append(w.recs, int32(i))
		}
	}
	for _, w := range walks {
		// rec is the device's k-th record.
		rec := func(k int) int32 {
			if w.recs == nil {
				return int32(k)
			}
			return w.recs[k]
		}
		// perm: the records' positions in time order, nil when they came
		// in that order.
		var perm []int32
		if w.stale {
			w, perm = tr.rewalk(w, rec)
		}
		id, kind := deviceOf(w.first, tr.rocm)
		d := &snapshot.Device{ID: id, Kind: kind, Baseline: w.baseline, Reserved: w.reserved} // ids are sorted: no Builder.Device lookups
		s.Devices = append(s.Devices, d)
		if kind != snapshot.DeviceCPU {
			if p, ok := tr.devProps[int64(id)]; ok {
				d.Name, d.CapacityBytes, d.ComputeMajor = p.name, p.mem, p.major
			}
		}
		if kind == snapshot.DeviceOther {
			s.Diag("unknown_device_type", id, fmt.Sprintf("device %d: [memory] events of an unknown Device Type", id))
		}
		// One device whose records came in time order (the usual trace):
		// each record becomes the event in its own slot, read before it is
		// written.
		if len(walks) == 1 && perm == nil {
			d.Events = tr.memEv[:0:len(tr.memEv)]
		} else {
			d.Events = make([]snapshot.Event, 0, w.n)
		}
		for k := range w.n {
			ri := rec(k)
			if perm != nil {
				ri = rec(int(perm[k]))
			}
			m := &tr.mem[ri]
			raw := tr.memEv[ri] // a copy: d.Events may write its slot
			e := snapshot.Event{Addr: raw.Addr, TimeNS: tr.abs(raw.TimeNS), Stack: raw.Stack, Thread: tmap[m.thread], Meta: raw.Meta}
			switch {
			case m.flags&memOOM != 0:
				e.Action, e.Size, e.Addr = snapshot.ActionOOM, raw.Size, 0
			case raw.Size > 0:
				e.Action, e.Size = snapshot.ActionAlloc, raw.Size
			default:
				e.Action, e.Size = snapshot.ActionFreeCompleted, -raw.Size
			}
			d.Events = append(d.Events, e)
		}
		for _, msg := range w.oomMsgs {
			s.Diag("oom", id, msg)
		}
		if w.noAddr > 0 {
			s.Diag("bytes_only", id, fmt.Sprintf("device %d: %d of %d [memory] events carry Bytes only, no Addr (PyTorch < 1.10): the curve is right but block lifetimes are unknown", id, w.noAddr, len(d.Events)-w.ooms))
		}
		if w.orphans > 0 {
			s.Diag("unmatched_frees", id, fmt.Sprintf("device %d: %d frees of blocks allocated before the trace began", id, w.orphans))
		}
		if w.reuse > 0 {
			s.Diag("address_reuse", id, fmt.Sprintf("device %d: %d allocations at an address that was still live (a free is missing)", id, w.reuse))
		}
		if w.sizeMismatch > 0 {
			s.Diag("size_mismatch", id, fmt.Sprintf("device %d: %d frees whose size differs from their allocation", id, w.sizeMismatch))
		}
		if w.taMismatch > 0 {
			s.Diag("total_allocated_mismatch", id, fmt.Sprintf("device %d: %d events where Total Allocated does not step by Bytes (events out of order or lost)", id, w.taMismatch))
		}
	}
	tr.devWalks = nil
}

// rewalk walks a device's records (its k-th: rec(k)) in time order, their
// totals read first in file order (readCounters), and returns the walk and
// the records' positions in time order (nil when that is the file order).
func (tr *traceReader) rewalk(stale *devWalk, rec func(int) int32) (*devWalk, []int32) {
	n := stale.n
	byTime := func(x, y int32) int { return cmp.Compare(tr.memEv[x].TimeNS, tr.memEv[y].TimeNS) }
	inOrder := true
	for k := 1; k < n && inOrder; k++ {
		inOrder = byTime(rec(k), rec(k-1)) >= 0
	}
	var c counters
	totals := make([][2]int64, n)
	for k := range n {
		ri := rec(k)
		totals[k][0], totals[k][1] = tr.readCounters(&c, ri, tr.memEv[ri].Size, tr.mem[ri].flags)
	}
	var perm []int32
	if !inOrder {
		perm = make([]int32, n)
		for k := range perm {
			perm[k] = int32(k)
		}
		slices.SortStableFunc(perm, func(x, y int32) int { return byTime(rec(int(x)), rec(int(y))) })
	}
	w := newDevWalk(stale.first)
	w.n, w.recs = n, stale.recs
	for k := range n {
		p := int32(k)
		if perm != nil {
			p = perm[k]
		}
		ri := rec(int(p))
		w.step(tr.memEv[ri].Addr, tr.memEv[ri].Size, tr.mem[ri].flags, totals[p][0], totals[p][1])
	}
	w.live = nil
	return w, perm
}
