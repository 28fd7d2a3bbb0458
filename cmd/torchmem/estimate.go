package main

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/torchmem/torchmem/analysis"
	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/analysis/whatif"
	"github.com/torchmem/torchmem/internal/units"
	"github.com/torchmem/torchmem/report"
)

// estimateFlags are the flags of torchmem estimate.
type estimateFlags struct {
	format, params, config, gpu                      string
	hidden, layers, heads, kvHeads, ffn, vocab, lora int64
	plainMLP, tied                                   bool
	setup                                            estimate.Setup
	from, at                                         string
}

func newEstimateCmd(g *globals) *cobra.Command {
	var f estimateFlags
	cmd := &cobra.Command{
		Use:   "estimate",
		Short: "Will it fit? Memory of training a transformer, before the run or from a measured one",
		Long: `estimate computes the peak GPU memory of a training step (or of inference)
of a decoder-only transformer from its facts — a parameter count (--params
7B), a Hugging Face config.json (--config: ` + strings.Join(estimate.ModelTypes, ", ") + `), or its
dimensions (--hidden, --layers, --heads, --ffn, --vocab) — and says whether it
fits a GPU (--gpu) and, if not, the cheapest combination of techniques that
makes it fit, each with its saving and cost. With an architecture it counts
what transformers and PyTorch allocate, phase by phase; the README's table
says how close that came to measured peaks.

Precisions: fp32; --amp (PyTorch AMP: fp32 weights, bf16 autocast); --precision
bf16 (16-bit weights and AdamW state); --precision bf16 --mixed (DeepSpeed /
Megatron: 16-bit weights, fp32 master weights); int8/int4 frozen bases.

--from SNAPSHOT projects a measured run instead: --at says the batch size and
sequence length it ran at, --batch/--seq the ones to project to; total_bytes
is then the projected peak.

--format json writes schema torchmem.estimate/v1 (exact bytes).

Optimizers: ` + strings.Join(estimate.Optimizers, ", ") + `.
GPUs: ` + wrapList(estimate.GPUNames(), 72, "      ") + `.

` + estimate.Help,
		Example: `  torchmem estimate --config config.json --amp --batch 8 --seq 2048 --gpu H100
  torchmem estimate --params 7B --precision bf16 --mixed --gpu 24GiB
  torchmem estimate --config config.json --batch 8 --seq 4096 --attention eager --gpu A100-80GB
  torchmem estimate --config config.json --precision bf16 --optimizer none --batch 32 --seq 4096 --new-tokens 256
  torchmem estimate --config config.json --precision int4 --lora 16 --gpu 24GiB
  torchmem estimate --params 7B --precision bf16 --mixed --zero 3 --world 8 --gpu H100-80GB
  torchmem estimate --from snapshot.pickle --at batch=4,seq=128 --seq 256`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			write, err := lookupFormat(report.Estimates, f.format)
			if err != nil {
				return err
			}
			var r *estimate.Result
			if f.from != "" {
				r, err = projectRun(g, cmd, &f)
			} else {
				r, err = formulaEstimate(cmd, &f)
			}
			if err != nil {
				return err
			}
			return write.Write(cmd.OutOrStdout(), r, report.Options{})
		},
	}
	formatFlag(cmd, &f.format, report.Estimates.Names())
	fl := cmd.Flags()
	fl.StringVar(&f.params, "params", "", "parameter count: 7B, 124M, 6738415616")
	fl.StringVar(&f.config, "config", "", "a Hugging Face config.json (llama, mistral, qwen2, gpt2, …)")
	fl.Int64Var(&f.hidden, "hidden", 0, "hidden size (d_model)")
	fl.Int64Var(&f.layers, "layers", 0, "number of transformer blocks")
	fl.Int64Var(&f.heads, "heads", 0, "attention heads")
	fl.Int64Var(&f.kvHeads, "kv-heads", 0, "key/value heads (grouped-query attention; default: --heads)")
	fl.Int64Var(&f.ffn, "ffn", 0, "MLP (intermediate) size")
	fl.Int64Var(&f.vocab, "vocab", 0, "vocabulary size")
	fl.BoolVar(&f.plainMLP, "plain-mlp", false, "a plain GELU MLP (GPT) instead of a gated SwiGLU one (Llama)")
	fl.BoolVar(&f.tied, "tied", false, "output head tied to the token embeddings")
	fl.StringVar(&f.setup.Precision, "precision", "fp32", "weights: fp32, bf16, fp16, int8, int4 (frozen)")
	fl.BoolVar(&f.setup.AMP, "amp", false, "PyTorch AMP: fp32 weights, gradients and optimizer state, bf16 compute under\ntorch.autocast (which keeps a 16-bit copy of every weight into backward)")
	fl.BoolVar(&f.setup.Mixed, "mixed", false, "DeepSpeed/Megatron mixed precision: 16-bit weights and gradients with fp32\nmaster weights (with --precision bf16 or fp16)")
	fl.StringVar(&f.setup.Optimizer, "optimizer", "adamw", "optimizer, listed above (none: inference)")
	fl.Int64Var(&f.setup.Batch, "batch", 1, "micro-batch size per GPU")
	fl.Int64Var(&f.setup.Seq, "seq", 2048, "sequence length")
	fl.StringVar(&f.setup.Checkpointing, "checkpointing", "none", "activation recomputation: "+strings.Join(estimate.Checkpointing, ", "))
	fl.StringVar(&f.setup.Attention, "attention", "sdpa", "attention: sdpa (transformers' default; fused kernels in 16-bit), eager, flash")
	fl.BoolVar(&f.setup.Flash, "flash", false, "FlashAttention 2 (--attention flash): no seq² scores kept")
	fl.Int64Var(&f.setup.NewTokens, "new-tokens", 0, "inference (--optimizer none): generate N tokens after a --seq-token prompt,\nwith a KV cache")
	fl.BoolVar(&f.setup.StaticCache, "static-cache", false, "with --new-tokens: the KV cache is allocated at full length before the prompt\n(transformers' cache_implementation=\"static\")")
	fl.Int64Var(&f.lora, "lora", 0, "rank-R LoRA adapters on a frozen base (int4: QLoRA)")
	fl.IntVar(&f.setup.ZeRO, "zero", 0, "ZeRO stage 0-3 (DeepSpeed; FSDP's full sharding is stage 3)")
	fl.Int64Var(&f.setup.World, "world", 1, "data-parallel GPUs the ZeRO stage shards over")
	fl.BoolVar(&f.setup.Offload, "offload-optimizer", false, "optimizer state in CPU memory (ZeRO-Offload)")
	fl.StringVar(&f.gpu, "gpu", "", "GPU to fit: a size (24GiB, 80GB) or a name listed above")
	fl.StringVar(&f.from, "from", "", "project this measured snapshot or trace instead")
	fl.StringVar(&f.at, "at", "", "with --from: the size it ran at (batch=4,seq=128)")
	_ = cmd.RegisterFlagCompletionFunc("precision", cobra.FixedCompletions(estimate.Precisions, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("optimizer", cobra.FixedCompletions(estimate.Optimizers, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("checkpointing", cobra.FixedCompletions(estimate.Checkpointing, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("attention", cobra.FixedCompletions(estimate.Attentions, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("gpu", cobra.FixedCompletions(estimate.GPUNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func usageError(format string, args ...any) error {
	return &exitError{exitInput, fmt.Errorf(format, args...)}
}

// formulaEstimate estimates from the model's facts.
func formulaEstimate(cmd *cobra.Command, f *estimateFlags) (*estimate.Result, error) {
	in := estimate.Inputs{Setup: f.setup}
	in.LoRARank = f.lora
	if f.at != "" {
		return nil, usageError("--at needs --from SNAPSHOT")
	}
	for _, n := range []struct {
		flag string
		v    int64
	}{{"batch", f.setup.Batch}, {"seq", f.setup.Seq}, {"world", f.setup.World}} {
		if n.v <= 0 {
			return nil, usageError("--%s %d: want a positive number", n.flag, n.v)
		}
	}
	if cmd.Flags().Changed("flash") && cmd.Flags().Changed("attention") && f.setup.Flash && f.setup.Attention != "flash" {
		return nil, usageError("--flash and --attention %s disagree: give one", units.OneLine(f.setup.Attention))
	}
	if f.params != "" {
		n, err := units.ParseCount(f.params)
		if err != nil {
			return nil, usageError("--params %v", err)
		}
		in.Params = n
	}
	arch, err := archFromFlags(cmd, f)
	if err != nil {
		return nil, err
	}
	in.Arch = arch
	if in.Arch == nil && in.Params == 0 {
		return nil, usageError("no model: give --params, --config or --hidden/--layers/--heads/--ffn/--vocab")
	}
	if f.gpu != "" {
		g, err := estimate.ParseGPU(f.gpu)
		if err != nil {
			return nil, usageError("--gpu %v", err)
		}
		in.GPU = g
	}
	r, err := estimate.Compute(in)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return r, nil
}

// archFromFlags reads --config and applies the dimension flags over it;
// nil when neither is given.
func archFromFlags(cmd *cobra.Command, f *estimateFlags) (*estimate.Arch, error) {
	var a *estimate.Arch
	if f.config != "" {
		data, err := readBounded(f.config, 4<<20)
		if pe, ok := err.(*fs.PathError); ok {
			err = pe.Err
		}
		if err != nil {
			return nil, usageError("%s: %v", units.OneLine(f.config), err)
		}
		if a, err = estimate.ParseHFConfig(data); err != nil {
			return nil, usageError("%s: %v", units.OneLine(f.config), err)
		}
		a.Source = f.config
	}
	dims := []struct {
		flag string
		v    int64
		set  func(*estimate.Arch, int64)
	}{
		{"hidden", f.hidden, func(a *estimate.Arch, v int64) { a.Hidden = v }},
		{"layers", f.layers, func(a *estimate.Arch, v int64) { a.Layers = v }},
		{"heads", f.heads, func(a *estimate.Arch, v int64) { a.Heads = v }},
		{"kv-heads", f.kvHeads, func(a *estimate.Arch, v int64) { a.KVHeads = v }},
		{"ffn", f.ffn, func(a *estimate.Arch, v int64) { a.FFN = v }},
		{"vocab", f.vocab, func(a *estimate.Arch, v int64) { a.Vocab = v }},
	}
	for _, d := range dims {
		if !cmd.Flags().Changed(d.flag) {
			continue
		}
		if d.v <= 0 {
			return nil, usageError("--%s %d: want a positive size", d.flag, d.v)
		}
		if a == nil {
			a = &estimate.Arch{Name: "transformer", Source: "flags", Gated: true}
		}
		d.set(a, d.v)
	}
	if a != nil && cmd.Flags().Changed("plain-mlp") {
		a.Gated = !f.plainMLP
	}
	if a != nil && cmd.Flags().Changed("tied") {
		a.Tied = f.tied
	}
	if a != nil && a.Source == "flags" && f.params != "" && a.FFN == 0 {
		a.FFN = 4 * a.Hidden // activations only: the count comes from --params
	}
	return a, nil
}

// readBounded reads a whole file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes: not a config.json", max)
	}
	return data, nil
}

// projectRun is estimate --from: a measured run projected to --batch/--seq.
func projectRun(g *globals, cmd *cobra.Command, f *estimateFlags) (*estimate.Result, error) {
	for _, name := range []string{"params", "config", "hidden", "layers", "heads", "kv-heads", "ffn", "vocab",
		"precision", "amp", "mixed", "optimizer", "checkpointing", "attention", "flash", "new-tokens", "static-cache", "lora", "zero", "world", "offload-optimizer"} {
		if cmd.Flags().Changed(name) {
			return nil, usageError("--%s describes a model to estimate: with --from the measured run says it", name)
		}
	}
	at, err := parseAt(f.at)
	if err != nil {
		return nil, err
	}
	var to whatif.Size
	if cmd.Flags().Changed("batch") {
		to.Batch = f.setup.Batch
	}
	if cmd.Flags().Changed("seq") {
		to.Seq = f.setup.Seq
	}
	if to.Batch < 0 || to.Seq < 0 || to.Batch == 0 && cmd.Flags().Changed("batch") || to.Seq == 0 && cmd.Flags().Changed("seq") {
		return nil, usageError("--batch and --seq must be positive")
	}
	if to.Batch > 0 && at.Batch == 0 {
		return nil, usageError("--batch %d: say the measured batch size with --at batch=B", to.Batch)
	}
	if to.Seq > 0 && at.Seq == 0 {
		return nil, usageError("--seq %d: say the measured sequence length with --at seq=S", to.Seq)
	}
	var gpu *estimate.GPU
	if f.gpu != "" {
		if gpu, err = estimate.ParseGPU(f.gpu); err != nil {
			return nil, usageError("--gpu %v", err)
		}
	}
	s, err := g.open(f.from)
	if err != nil {
		return nil, err
	}
	r, err := analysis.Project(s, analysis.DefaultOptions(), at, to, gpu)
	g.endProgress()
	if err != nil {
		return nil, &exitError{exitInput, fmt.Errorf("%s: %v", units.OneLine(f.from), err)}
	}
	return r, nil
}

// parseAt reads --at: "batch=4,seq=128" (either may be left out).
func parseAt(s string) (whatif.Size, error) {
	var at whatif.Size
	if strings.TrimSpace(s) == "" {
		return at, usageError("--from needs --at batch=B,seq=S: the size the run was measured at")
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if !ok || err != nil || n <= 0 || n > 1<<24 {
			return at, usageError("--at %q: want batch=B,seq=S with positive numbers", units.OneLine(s))
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "batch", "b":
			at.Batch = n
		case "seq", "s", "sequence", "context":
			at.Seq = n
		default:
			return at, usageError("--at %q: %q is neither batch nor seq", units.OneLine(s), units.OneLine(k))
		}
	}
	return at, nil
}

// wrapList joins items with commas, breaking lines before width columns.
func wrapList(items []string, width int, indent string) string {
	var b strings.Builder
	line := len(indent)
	for i, it := range items {
		if i > 0 {
			b.WriteString(",")
			line++
			if line+len(it)+1 > width {
				b.WriteString("\n" + indent)
				line = len(indent)
			} else {
				b.WriteString(" ")
				line++
			}
		}
		b.WriteString(it)
		line += len(it)
	}
	return b.String()
}
