package history

import (
	"strings"

	"github.com/torchmem/torchmem/snapshot"
)

// RuleCublasWorkspaceFirstMatmul classifies a cuBLAS workspace by when and
// how it was allocated, for stacks that do not name cuBLAS (Python frames
// only, none, or a chrome trace's ops): each thread's cuBLAS handle takes
// one workspace from the caching allocator at its first matmul on a stream
// and keeps it for good — one for the main thread (the first matmul of
// forward) and one for the autograd thread (the first of backward).
const RuleCublasWorkspaceFirstMatmul = "cublas_workspace_first_matmul"

// cublasWorkspaceSizes are the sizes PyTorch's cuBLAS workspaces take with
// CUBLAS_WORKSPACE_CONFIG unset: 32 MiB on Hopper and later (8×4096 KiB),
// 2×4096 KiB + 8×16 KiB before. cublasLtWorkspaceSize is cuBLASLt's own
// (CUBLASLT_WORKSPACE_SIZE, 1024 KiB by default), taken by the same first
// matmul right after the cuBLAS one when the op runs through cuBLASLt.
var cublasWorkspaceSizes = [...]int64{32 << 20, CublasWorkspaceSize}

const cublasLtWorkspaceSize = 1 << 20

// matmulOps are the operators whose first call on a thread creates its
// cuBLAS handle's workspace (a chrome trace's op spans, C++ frames' names).
var matmulOps = []string{"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
	"aten::_scaled_mm", "aten::addmv", "aten::mv", "aten::addbmm", "aten::_addmm_activation"}

// workspaceBlocks finds the cuBLAS workspaces that the frames do not name.
// A block is one when it has a workspace's size, is allocated in the
// recording and kept to its end (or to the OOM), comes right after another
// allocation of the same op (the matmul's output comes first), and is the
// first such block of its thread and stream: the handle's first matmul. A
// thread is a chrome trace's own; in a snapshot the autograd thread is
// backward without Python frames, every other allocation the main thread's.
// An op that ran before (the same stack earlier in the recording) cannot
// be a handle's first matmul; without frames, only the first span of the
// phase can hold it. cuBLASLt's workspace, taken by the same op next, goes
// with it.
// It returns the blocks it found.
func workspaceBlocks(h *History, facts []blockFacts) map[int]bool {
	found := map[int]bool{}
	ev := h.Device.Events
	// The first allocation at each stack (−1 before it), by stack: a slice,
	// not a map, which took some ten times the memory on a long trace, at
	// classification's peak.
	firstOfStack := make([]int, len(h.Snap.Stacks))
	for st := range firstOfStack {
		firstOfStack[st] = -1
	}
	type key struct {
		thread uint16
		stream uint16
	}
	taken := map[key]bool{}
	p := -1 // the allocation before event i
	for i := range ev {
		if ev[i].Action != snapshot.ActionAlloc {
			continue
		}
		if st := int(ev[i].Stack); st < len(firstOfStack) && firstOfStack[st] < 0 {
			firstOfStack[st] = i // a stack past the table has no frames: never read
		}
		prev := p
		p = i
		bi := h.OpenAt(i)
		if bi < 0 {
			continue
		}
		b, f := &h.Blocks[bi], &facts[bi]

		if b.Untracked || f.pre || !f.never || !isWorkspaceSize(b.Requested) ||
			f.m.kvCache || f.m.kvCacheCopy || f.m.moduleInit || f.m.init || f.m.ddpBucket {
			continue
		}
		k := key{stream: ev[i].Stream}
		if h.Snap.Source.Format == snapshot.FormatChromeTrace {
			k.thread = ev[i].Thread
		} else if f.ac == CodeBackward && !f.m.python {
			k.thread = 1 // the autograd thread
		}
		if f.m.cublas {
			taken[k] = true // named by its frames: the thread's handle has its workspace
			continue
		}
		sameOp := prev >= 0 && ev[prev].Stack == ev[i].Stack
		if !sameOp && !innermostIsMatmul(h.Snap, ev[i].Stack) {
			continue
		}
		if taken[k] {
			continue
		}
		if len(h.Snap.StackOf(ev[i].Stack)) > 0 {
			if first := firstOfStack[ev[i].Stack]; first < prev || !sameOp && first < i {
				continue // the op ran before: not the handle's first matmul
			}
		} else if h.Phases.SpanAt(i) != firstSpanOf(h, f.ac) {
			continue
		}
		taken[k] = true
		found[int(bi)] = true
		// cuBLASLt's workspace: the same op's next allocation, kept too.
		if j := nextAllocOf(h, i); j >= 0 && ev[j].Stack == ev[i].Stack {
			if bj := h.OpenAt(j); bj >= 0 && facts[bj].never && h.Blocks[bj].Requested == cublasLtWorkspaceSize {
				found[int(bj)] = true
			}
		}
	}
	return found
}

func isWorkspaceSize(n int64) bool {
	for _, w := range cublasWorkspaceSizes {
		if n == w {
			return true
		}
	}
	return false
}

// innermostIsMatmul reports whether the innermost op of a stack (a chrome
// trace's op span) is a matrix multiplication.
func innermostIsMatmul(s *snapshot.Snapshot, st snapshot.StackID) bool {
	fs := s.StackOf(st)
	if len(fs) == 0 {
		return false
	}
	name := s.Frames[fs[0]].Name
	for _, op := range matmulOps {
		if name == op || strings.HasPrefix(name, op+".") {
			return true
		}
	}
	return false
}

// nextAllocOf is the allocation event after event i (−1).
func nextAllocOf(h *History, i int) int {
	for j := i + 1; j < len(h.Device.Events); j++ {
		if h.Device.Events[j].Action == snapshot.ActionAlloc {
			return j
		}
	}
	return -1
}

// firstSpanOf is the index of the first phase span of a phase code (−1).
func firstSpanOf(h *History, code uint8) int {
	for i, c := range h.Phases.Code {
		if c == code {
			return h.Phases.SpanAt(i)
		}
	}
	return -1
}
