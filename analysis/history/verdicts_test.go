package history

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/torchmem/torchmem/result"
)

// TestVerdictsFit counts the package's Rule constants: with the three
// confidences and the unclassified verdict, every verdict a block can get
// must have an id, whatever the input selects.
func TestVerdictsFit(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	rules := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if strings.HasPrefix(n.Name, "Rule") && len(n.Name) > len("Rule") {
						rules++
					}
				}
			}
		}
	}
	if rules < 40 {
		t.Fatalf("found %d Rule constants: the count is wrong", rules)
	}
	if most, room := 3*rules+1, int(^verdictID(0))+1; most > room {
		t.Errorf("%d rules make up to %d verdicts, more than the %d a verdictID holds", rules, most, room)
	}
	if size := unsafe.Sizeof(Block{}); size > 48 {
		t.Errorf("a Block takes %d bytes, more than 48", size)
	}
}

// TestVerdictRoundTrip sets verdicts from several goroutines at once (the
// analysis classifies histories side by side) and reads each back.
func TestVerdictRoundTrip(t *testing.T) {
	rules := []string{RuleModuleInit, RuleDDPBucket, RuleFreedByZeroGrad, RuleOptimizerScratch, RuleBaselineRest}
	confs := []result.Confidence{result.High, result.Medium, result.Low}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				rule, conf := rules[(k+g)%len(rules)], confs[(k/len(rules)+g)%len(confs)]
				var b Block
				b.classify(result.Gradient, rule, conf)
				if b.Rule() != rule || b.Confidence() != conf || b.Category != result.Gradient {
					t.Errorf("classified %s (%s), read back %s (%s)", rule, conf, b.Rule(), b.Confidence())
					return
				}
			}
		}()
	}
	wg.Wait()
	var b Block
	if b.Rule() != "" || b.Confidence() != "" {
		t.Errorf("an unclassified block reads %q (%q)", b.Rule(), b.Confidence())
	}
}
