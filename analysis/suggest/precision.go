package suggest

import "strings"

// withoutBF16 reports whether a device name is an NVIDIA GPU older than
// Ampere (Volta, Turing, Pascal and before: V100, T4, P100, GTX, Titan,
// Quadro, GeForce RTX 20xx): they have no bf16 arithmetic, so mixed
// precision there is fp16 autocast with a gradient scaler. Unknown names
// (and every AMD or newer NVIDIA GPU) have bf16.
func withoutBF16(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	for i, w := range words {
		switch w {
		case "v100", "t4", "p100", "p40", "p4", "p6", "k80", "k40", "m60", "m40", "gtx", "titan", "quadro":
			return true
		case "rtx":
			if i+1 < len(words) && len(words[i+1]) == 4 && strings.HasPrefix(words[i+1], "20") {
				return true // GeForce RTX 2060–2080 (Turing)
			}
		}
	}
	return false
}
