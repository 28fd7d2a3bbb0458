package history

import (
	"testing"
)

// TestIsGenerated: what counts as code torch.compile generated.
func TestIsGenerated(t *testing.T) {
	for file, want := range map[string]bool{
		"/tmp/torchinductor_brian/3u/c3uxhj5q2ablsqp5lrlrkd2ig2tub4do54ysdazmtvawnjje2knd.py": true,
		"/scratch/cache/ind/oc/coc6o35wl7af7azzl5r7jqcstkjjafz22meeuznlu5miirctei66.py":       true, // TORCHINDUCTOR_CACHE_DIR
		`C:\Users\a\AppData\Local\Temp\torchinductor_a\ab\cabc.py`:                            true,
		"<eval_with_key>.12": true,
		"/scratch/cache/ind/xx/coc6o35wl7af7azzl5r7jqcstkjjafz22meeuznlu5miirctei66.py": false, // folder is not the hash's
		"/home/u/proj/ca/cache.py": false,
		"/home/u/proj/model.py":    false,
		"/usr/lib/python3/site-packages/torch/_inductor/output_code.py": false,
		"<frozen importlib._bootstrap>":                                 false,
	} {
		if got := IsGenerated(file); got != want {
			t.Errorf("isGenerated(%q) = %v, want %v", file, got, want)
		}
	}
}
