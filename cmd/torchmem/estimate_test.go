package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func configPath(name string) string {
	return filepath.Join(repoRoot(), "testdata", "estimate", "configs", name)
}

// TestEstimateGolden pins the outputs of estimate from formulas.
func TestEstimateGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"llama2_7b_24gib", []string{"--config", configPath("llama-2-7b.json"), "--precision", "bf16", "--mixed", "--batch", "4", "--gpu", "24GiB"}},
		{"params_7b", []string{"--params", "7B"}},
		{"gpt2_inference", []string{"--config", configPath("gpt2.json"), "--optimizer", "none", "--seq", "1024", "--batch", "16", "--gpu", "T4"}},
		{"qlora_8b", []string{"--config", configPath("llama-3-8b.json"), "--precision", "int4", "--lora", "16", "--flash", "--checkpointing", "full", "--gpu", "RTX4090"}},
	} {
		for _, format := range []string{"text", "markdown", "json"} {
			ext := map[string]string{"text": "txt", "markdown": "md", "json": "json"}[format]
			t.Run(tc.name+"."+ext, func(t *testing.T) {
				code, out, stderr := runCLI(nil, append([]string{"estimate", "--format", format}, tc.args...)...)
				if code != exitOK {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				out = strings.ReplaceAll(out, filepath.Join(repoRoot(), "testdata")+string(filepath.Separator), "")
				if format == "text" {
					for _, line := range strings.Split(out, "\n") {
						if n := utf8.RuneCountInString(line); n > 100 {
							t.Errorf("line of %d columns: %s", n, line)
						}
					}
				}
				golden(t, "estimate/"+tc.name+"."+ext, out)
			})
		}
	}
}

// TestEstimateJSONContract: schema torchmem.estimate/v1 has the fields the
// issue names, fits is null without --gpu, and plan is an array.
func TestEstimateJSONContract(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		fitsNull bool
	}{
		{[]string{"--params", "7B"}, true},
		{[]string{"--config", configPath("mistral-7b-v0.1.json"), "--gpu", "H100"}, false},
	} {
		code, out, stderr := runCLI(nil, append([]string{"estimate", "--format", "json"}, tc.args...)...)
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatal(err)
		}
		if doc["schema"] != "torchmem.estimate/v1" {
			t.Errorf("schema %v", doc["schema"])
		}
		for _, k := range []string{"parameter_count", "parameters_bytes", "gradients_bytes", "optimizer_state_bytes",
			"activations_bytes", "total_bytes", "fits", "plan"} {
			if _, ok := doc[k]; !ok {
				t.Errorf("%v: no %q", tc.args, k)
			}
		}
		if (doc["fits"] == nil) != tc.fitsNull {
			t.Errorf("%v: fits = %v", tc.args, doc["fits"])
		}
		if _, ok := doc["plan"].([]any); !ok {
			t.Errorf("%v: plan = %v", tc.args, doc["plan"])
		}
	}
}

// TestEstimateBadInput: every mistake is one line and exit 2.
func TestEstimateBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "no model"},
		{[]string{"--params", "seven"}, "--params"},
		{[]string{"--config", "/nonexistent/config.json"}, "/nonexistent/config.json: no such file"},
		{[]string{"--config", filepath.Join(repoRoot(), "README.md")}, "README.md: not a JSON config"},
		{[]string{"--params", "7B", "--precision", "int4"}, "frozen"},
		{[]string{"--params", "7B", "--mixed"}, "bf16 or fp16"},
		{[]string{"--hidden", "-1"}, "--hidden -1"},
		{[]string{"--hidden", "4096", "--layers", "32"}, "heads"},
		{[]string{"--params", "7B", "--gpu", "potato"}, "--gpu"},
		{[]string{"--params", "7B", "--at", "batch=4"}, "--at needs --from"},
		{[]string{"--params", "7B", "--zero", "5"}, "ZeRO stage 5"},
		{[]string{"--params", "7B", "--format", "yaml"}, "--format"},
	} {
		code, out, stderr := runCLI(nil, append([]string{"estimate"}, tc.args...)...)
		first := strings.SplitN(stderr, "\n", 2)[0]
		if code != exitInput || out != "" || !strings.Contains(first, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, stderr, tc.want)
		}
	}
}
