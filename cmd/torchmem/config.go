package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/torchmem/torchmem/internal/units"
	"go.yaml.in/yaml/v4"
)

// checkConfig is the --config file of torchmem check.
type checkConfig struct {
	// Budgets maps a budget key to its limit ("20GiB", 0).
	Budgets map[string]string `yaml:"budgets"`
	// Baseline is relative to the config file's folder.
	Baseline  string  `yaml:"baseline"`
	Tolerance *string `yaml:"tolerance"`
	Floor     *string `yaml:"floor"`
	Device    *int    `yaml:"device"`
	AllowOOM  *bool   `yaml:"allow_oom"`
}

// Bounds of a --config file: a real one is a few hundred bytes with a
// dozen keys. Reading /dev/zero crashed out of memory, and the YAML
// decoder's work grows with the square of a mapping's keys (40,000 keys:
// 2.1 s; 5,000 keys, within a cap of 10,000 nodes, still 0.57 s under load;
// 500 keys 5 ms: BenchmarkReadCheckConfig).
const (
	maxConfigBytes = 1 << 20
	maxConfigNodes = 1_000 // keys and values, all levels together
)

// readCheckConfig reads a YAML config (go.yaml.in/yaml/v4); unknown keys,
// YAML aliases and a file past the bounds are errors of one line.
func readCheckConfig(path string) (*checkConfig, error) {
	bad := func(format string, args ...any) error {
		msg := strings.ReplaceAll(strings.TrimSpace(fmt.Sprintf(format, args...)), "\n", "; ")
		return &exitError{exitInput, fmt.Errorf("--config %s: %s", units.OneLine(path), units.OneLine(msg))}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &exitError{exitInput, fmt.Errorf("--config: %w", err)}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, bad("is a directory, not a YAML file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(data) > maxConfigBytes {
		return nil, bad("larger than %d bytes: not a torchmem config", maxConfigBytes)
	}
	var c checkConfig
	if len(bytes.TrimSpace(data)) == 0 {
		return &c, nil
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, bad("%v", err)
	}
	nodes := 0
	if err := countConfigNodes(&doc, &nodes); err != nil {
		return nil, bad("%v", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, bad("%v", err)
	}
	if c.Baseline != "" && !filepath.IsAbs(c.Baseline) {
		c.Baseline = filepath.Join(filepath.Dir(path), c.Baseline)
	}
	return &c, nil
}

// countConfigNodes counts n and the nodes below it into *count and fails
// past maxConfigNodes, or on an alias (a config needs none, and aliases of
// aliases expand exponentially).
func countConfigNodes(n *yaml.Node, count *int) error {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		return fmt.Errorf("line %d: YAML aliases (*%s) are not supported in a torchmem config", n.Line, n.Value)
	}
	if *count++; *count > maxConfigNodes {
		return fmt.Errorf("more than %d keys and values: not a torchmem config", maxConfigNodes)
	}
	for _, c := range n.Content {
		if err := countConfigNodes(c, count); err != nil {
			return err
		}
	}
	return nil
}
