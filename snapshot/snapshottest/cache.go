package snapshottest

import (
	"fmt"
	"os"
	"path/filepath"
)

// GeneratedFile returns the path of a generated input of about size bytes —
// kind "snapshot" (WriteBig) or "trace" (WriteBigTrace) — writing it once
// into a cache folder (TORCHMEM_BENCH_DIR, default the system temp folder).
// Benchmarks use it so that large inputs are made by the project's own code.
func GeneratedFile(kind string, size int64) (string, error) {
	dir := os.Getenv("TORCHMEM_BENCH_DIR")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "torchmem-bench")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	ext := map[string]string{"snapshot": "pickle", "trace": "json"}[kind]
	if ext == "" {
		return "", fmt.Errorf("unknown kind %q", kind)
	}
	path := filepath.Join(dir, fmt.Sprintf("gen_%s_%d.%s", kind, size, ext))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	if kind == "snapshot" {
		_, err = WriteBig(f, BigConfig{TargetBytes: size, Seed: 1})
	} else {
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
