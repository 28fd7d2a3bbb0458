package snapshottest

import (
	"fmt"
	"os"
	"path/filepath"
)

// GeneratedFile returns the path of a generated input of about size bytes —
// kind "snapshot" (WriteBig), "trace" (WriteBigTrace), "training"
// (WriteTraining: a training run whose iterations repeat, frames lists
// fresh as PyTorch writes them) or "dense" (the same with frames lists
// shared through the memo, PyTorch 2.5's keys: the densest real shape) —
// writing it once into a cache folder (TORCHMEM_BENCH_DIR, default the
// system temp folder). Benchmarks use it so that large inputs are made by
// the project's own code.
func GeneratedFile(kind string, size int64) (string, error) {
	dir := os.Getenv("TORCHMEM_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "torchmem-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ext := map[string]string{"snapshot": "pickle", "trace": "json", "training": "pickle", "dense": "pickle"}[kind]
	if ext == "" {
		return "", fmt.Errorf("unknown kind %q", kind)
	}
	name := kind
	if kind == "training" || kind == "dense" {
		name += trainingVersion // a changed generator writes new files
	}
	path := filepath.Join(dir, fmt.Sprintf("gen_%s_%d.%s", name, size, ext))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	switch kind {
	case "snapshot":
		_, err = WriteBig(f, BigConfig{TargetBytes: size, Seed: 1})
	case "training":
		_, err = WriteTraining(f, TrainingConfig{TargetBytes: size})
	case "dense":
		_, err = WriteTraining(f, TrainingConfig{TargetBytes: size, SharedStacks: true, Gen: 'E'})
	default:
		_, err = WriteBigTrace(f, size, 1)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// GeneratedRanks returns a folder of n generated snapshots of about size
// bytes each, rank000.pickle …, as the ranks of one job would leave them
// (WriteBig, each with its own seed: peaks and sites differ a little), made
// once into the cache folder of GeneratedFile.
func GeneratedRanks(n int, size int64) (string, error) {
	root := os.Getenv("TORCHMEM_BENCH_DIR")
	if root == "" {
		root = filepath.Join(os.TempDir(), "torchmem-bench")
	}
	dir := filepath.Join(root, fmt.Sprintf("ranks_%d_%d", n, size))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for r := 0; r < n; r++ {
		path := filepath.Join(dir, fmt.Sprintf("rank%03d.pickle", r))
		if _, err := os.Stat(path); err == nil {
			continue
		}
		tmp := path + ".tmp"
		f, err := os.Create(tmp)
		if err != nil {
			return "", err
		}
		_, err = WriteBig(f, BigConfig{TargetBytes: size, Seed: int64(r + 1)})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			return "", err
		}
	}
	return dir, nil
}
