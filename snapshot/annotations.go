package snapshot

import "strings"

// PyTorchMarker recognises the record_function names PyTorch itself emits
// (torch.profiler's steps, the optimizer's step and zero_grad, the data
// loader), in snapshots and chrome traces alike; false for any other name.
func PyTorchMarker(name string) (AnnotationKind, bool) {
	switch {
	case strings.HasPrefix(name, "ProfilerStep#"):
		return AnnotationStep, true
	case strings.HasPrefix(name, "Optimizer.step#"):
		return AnnotationOptStep, true
	case strings.HasPrefix(name, "Optimizer.zero_grad#"):
		return AnnotationZeroGrad, true
	case strings.HasPrefix(name, "enumerate(DataLoader)#"), strings.HasPrefix(name, "enumerate(DataPipe)#"):
		return AnnotationData, true
	}
	return AnnotationUser, false
}
