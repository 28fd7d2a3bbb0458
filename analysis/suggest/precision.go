package suggest

import (
	"fmt"
	"strings"
)

// withoutBF16 reports whether a device is an NVIDIA GPU older than Ampere
// (Volta, Turing, Pascal and before): they have no bf16 arithmetic, so
// mixed precision there is fp16 autocast with a gradient scaler. The
// compute capability decides where the file states it (below 8: no bf16;
// AMD's GPUs that PyTorch runs on state 9 and above); else the name (V100,
// T4, P100, GTX, Titan, Quadro, GeForce RTX 20xx). Unknown devices have
// bf16.
func withoutBF16(name string, computeMajor int) bool {
	if computeMajor > 0 {
		return computeMajor < 8
	}
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

// gpuWords names a device in a sentence: "the Tesla V100-SXM2-32GB (compute
// capability 7)", or without what the file does not say.
func gpuWords(name string, computeMajor int) string {
	switch {
	case name != "" && computeMajor > 0:
		return fmt.Sprintf("the %s (compute capability %d)", name, computeMajor)
	case name != "":
		return "the " + name
	case computeMajor > 0:
		return fmt.Sprintf("the device (compute capability %d)", computeMajor)
	}
	return "the device"
}
