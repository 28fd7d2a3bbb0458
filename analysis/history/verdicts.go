package history

import (
	"sync"
	"sync/atomic"

	"github.com/torchmem/torchmem/result"
)

// verdictID names a block's classification (its rule and confidence) in
// the process-wide verdict table: one byte a block instead of two strings'
// thirty-two, on the record the analysis keeps for every allocation of a
// history (millions of them in a long snapshot), which it keeps within 64
// bytes. The rules are the package's constants and the confidences
// result's three, so the table holds at most three verdicts a rule and
// one unclassified, whatever the input (TestVerdictsFit counts them).
type verdictID uint8

// verdict is one entry of the verdict table.
type verdict struct {
	rule string
	conf result.Confidence
}

// verdicts is the verdict table. Readers load the list without a lock
// (histories are classified on several goroutines); a new verdict is added
// under mu to a copy of the list and the map. Entry 0 is the verdict of a
// block not yet classified (no rule, no confidence).
var verdicts struct {
	mu   sync.Mutex
	ids  atomic.Pointer[map[verdict]verdictID]
	list atomic.Pointer[[]verdict]
}

func init() {
	list := []verdict{{}}
	ids := map[verdict]verdictID{{}: 0}
	verdicts.list.Store(&list)
	verdicts.ids.Store(&ids)
}

// verdictOf is the id of the verdict (rule, conf), added to the table the
// first time it is seen.
func verdictOf(rule string, conf result.Confidence) verdictID {
	v := verdict{rule, conf}
	if id, ok := (*verdicts.ids.Load())[v]; ok {
		return id
	}
	verdicts.mu.Lock()
	defer verdicts.mu.Unlock()
	old := *verdicts.ids.Load()
	if id, ok := old[v]; ok {
		return id
	}
	list := append([]verdict(nil), *verdicts.list.Load()...)
	if len(list) > int(^verdictID(0)) {
		// Unreachable while TestVerdictsFit passes: a bug, not bad input.
		panic("analysis: more classification verdicts than a verdictID holds")
	}
	id := verdictID(len(list))
	list = append(list, v)
	ids := make(map[verdict]verdictID, len(old)+1)
	for k, x := range old {
		ids[k] = x
	}
	ids[v] = id
	// The list first: a reader that finds the id in the map finds its entry.
	verdicts.list.Store(&list)
	verdicts.ids.Store(&ids)
	return id
}

// Rule is the classification rule that decided the block's category (one
// of the Rule constants; "" before classification).
func (b *Block) Rule() string { return (*verdicts.list.Load())[b.verdict].rule }

// Confidence is how sure the classification is of the block's category
// ("" before classification).
func (b *Block) Confidence() result.Confidence { return (*verdicts.list.Load())[b.verdict].conf }

// classify sets the block's category and the verdict that decided it.
func (b *Block) classify(cat result.Category, rule string, conf result.Confidence) {
	b.Category, b.verdict = cat, verdictOf(rule, conf)
}
