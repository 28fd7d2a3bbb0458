package snapshot

import (
	"fmt"
	"math"
)

// MaxDeviceBytes bounds the byte figures of one device added together —
// every event's size, the baseline, the pre-existing allocations, the
// segments and blocks at the dump, the reserved counter and the capacity:
// 256 PiB, past anything a run allocates in all (a million allocations of
// 141 GB is 2⁵⁷). Within it no sum the analysis makes of these figures —
// a peak, a category, a what-if of eight times the batch — can wrap
// around int64, which printed a peak of −8.00 EiB from three rows of a
// memory timeline.
const MaxDeviceBytes = 1 << 58

// CheckSizes refuses a model whose figures on one device add up past
// maxDeviceBytes, or hold a size no arithmetic can negate (−2⁶³).
func CheckSizes(s *Snapshot) error {
	for _, d := range s.Devices {
		var sum uint64
		add := func(n int64) bool {
			if n == math.MinInt64 {
				return false
			}
			if n < 0 {
				n = -n
			}
			sum += uint64(n)
			return sum <= MaxDeviceBytes
		}
		ok := add(max(d.Baseline, 0)) && add(d.CapacityBytes)
		for i := 0; ok && i < len(d.Events); i++ {
			ok = add(d.Events[i].Size)
		}
		for i := 0; ok && i < len(d.Preexisting); i++ {
			ok = add(d.Preexisting[i].Size)
		}
		for i := 0; ok && i < len(d.Reserved); i++ {
			ok = add(d.Reserved[i].Value)
		}
		for i := 0; ok && i < len(d.Segments); i++ {
			g := &d.Segments[i]
			ok = add(g.TotalSize) && add(g.AllocatedSize) && add(g.ActiveSize) && add(g.RequestedSize)
			for j := 0; ok && j < len(g.Blocks); j++ {
				ok = add(g.Blocks[j].Size) && add(g.Blocks[j].RequestedSize)
			}
		}
		if !ok {
			return &Error{Path: s.Source.Path, Offset: -1, Msg: fmt.Sprintf("the sizes of device %d add up past %d bytes (256 PiB): not a file PyTorch wrote", d.ID, int64(MaxDeviceBytes))}
		}
	}
	return nil
}
