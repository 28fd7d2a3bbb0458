package rollup

import (
	"cmp"
	"slices"

	"github.com/torchmem/torchmem/result"
)

// keepEach is how many candidates a Keeper keeps for each choice it may be
// asked about (the worst rank, the first OOM by time, the first by rank).
const keepEach = 4

// Detail is a result a report shows in full, with its input number.
type Detail struct {
	Input  int
	Result *result.Result
}

// Keeper keeps the few results a report shows in full after the roll-up,
// while the results stream by: those that can turn out to be the worst
// rank's or the first OOM's, and those of the ranks asked for. Unless All
// is set, what it keeps is bounded by the ranks asked for, whatever the
// number of inputs.
type Keeper struct {
	// Ranks are the ranks to show in full besides the worst and the first
	// OOM; All shows every input.
	Ranks map[int]bool
	All   bool

	n                     int
	asked                 []Detail
	peak, oomTime, oomRnk []candidate
}

// candidate is a result kept for one choice, with the key it is chosen by.
type candidate struct {
	input int
	key   [3]int64 // compared in order, smallest first
	r     *result.Result
}

// Offer shows the Keeper the next input's result (inputs in order).
func (k *Keeper) Offer(r *result.Result) {
	idx := k.n
	k.n++
	rank, _ := Identify(r.Input, idx)
	if k.All || k.Ranks[rank] {
		k.asked = append(k.asked, Detail{idx, r})
	}
	for _, d := range accelerators(r.Devices) {
		k.peak = keepBest(k.peak, candidate{idx, [3]int64{-d.Peak.AllocatedBytes, int64(rank), int64(d.Device)}, r})
		if o := d.OOM; o != nil {
			k.oomTime = keepBest(k.oomTime, candidate{idx, [3]int64{o.TimeUS, int64(rank), int64(d.Device)}, r})
			k.oomRnk = keepBest(k.oomRnk, candidate{idx, [3]int64{int64(rank), int64(d.Device), 0}, r})
		}
	}
}

// keepBest adds c to the keepEach smallest candidates of list.
func keepBest(list []candidate, c candidate) []candidate {
	for _, x := range list {
		if x.input == c.input && x.key == c.key {
			return list
		}
	}
	list = append(list, c)
	slices.SortStableFunc(list, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.key[0], b.key[0]), cmp.Compare(a.key[1], b.key[1]), cmp.Compare(a.key[2], b.key[2]), cmp.Compare(a.input, b.input))
	})
	return list[:min(len(list), keepEach)]
}

// Details returns the results to show in full after ru, the roll-up of the
// results offered, in input order: the worst rank's, the first OOM's and
// those asked for (each a row of ru: another file of a row's process is
// not shown).
func (k *Keeper) Details(ru *Rollup) []Detail {
	want := map[int]bool{}
	if ru.Worst != nil {
		want[ru.Worst.Input] = true
	}
	if ru.FirstOOM != nil {
		want[ru.FirstOOM.Input] = true
	}
	rows := map[int]bool{} // inputs with rows: not another file of a row's process
	for _, r := range ru.Ranks {
		rows[r.Input] = true
	}
	seen := map[int]bool{}
	var out []Detail
	for _, d := range k.asked {
		if rows[d.Input] {
			seen[d.Input] = true
			out = append(out, d)
		}
	}
	for _, list := range [][]candidate{k.peak, k.oomTime, k.oomRnk} {
		for _, c := range list {
			if want[c.input] && !seen[c.input] {
				seen[c.input] = true
				out = append(out, Detail{c.input, c.r})
			}
		}
	}
	slices.SortFunc(out, func(a, b Detail) int { return cmp.Compare(a.Input, b.Input) })
	return out
}
