package snapshottest

// RankFault is what goes wrong on one rank of a data-parallel job.
type RankFault int

// Rank faults.
const (
	// RankHealthy runs the training loop as every other rank does.
	RankHealthy RankFault = iota
	// RankLeak keeps each step's logits in a list (outputs.append(logits)):
	// a growing_list leak of Model.LogitsBytes per step, on this rank only.
	RankLeak
	// RankDoubleActivations gets batches of twice the tokens (an uneven
	// shard: its sequences are twice as long): twice the activations and
	// logits of the other ranks.
	RankDoubleActivations
)

// RankConfig is one process of a data-parallel job (DDP, or any job whose
// ranks run the same model and loop): the training loop of the leak
// scenarios (AdamW, Model.Steps steps) as rank Rank ran it.
type RankConfig struct {
	Model LeakConfig
	Rank  int
	// LocalDevices is the number of GPUs per node: the rank works on
	// cuda:Rank%LocalDevices, as torchrun's LOCAL_RANK has it (default 8).
	LocalDevices int
	Fault        RankFault
	// LimitBytes is what the rank's allocator may reserve (0: no limit).
	// A rank whose GPU another process shares gets less, and runs out
	// first; its snapshot is the one an OOM observer dumps at the failure.
	LimitBytes int64
	// Gen is the snapshot generation written (default 'G'); 'B' (2.1)
	// records no times.
	Gen byte
	// StartSkewUS is how much later than rank 0 the rank starts, per rank
	// (processes of one job start within a few milliseconds of each other).
	StartSkewUS int64
}

// RankRun simulates one rank. oom is non-nil when the rank ran out of
// memory; the simulation then ends at the failed allocation.
func RankRun(c RankConfig) (s *Sim, oom *OutOfMemory) {
	if c.LocalDevices <= 0 {
		c.LocalDevices = 8
	}
	s = NewSim()
	if c.Gen != 0 {
		s.Gen = c.Gen
	}
	s.DeviceBase = c.Rank % c.LocalDevices
	s.LimitBytes = c.LimitBytes
	s.Tick(int64(c.Rank) * c.StartSkewUS)
	m := c.Model
	f := trainFault{}
	switch c.Fault {
	case RankLeak:
		f.keepLogits = true
	case RankDoubleActivations:
		m.Tokens *= 2
	}
	oom = s.RunUntilOOM(func() { runTrainLoop(s, m, f) })
	return s, oom
}

// FaultyJobModel is the model every rank of FaultyJob runs: 4 layers,
// 4,096 tokens a step (activations of 4 MiB, logits of 16 MB), 8 steps.
var FaultyJobModel = LeakConfig{Layers: 4, Hidden: 256, Tokens: 4096, Vocab: 1000, Steps: 8}

// FaultyJob is an 8-rank data-parallel job on one node whose ranks may
// reserve 420 MiB each (a healthy rank needs 250), with three faulty ranks:
// rank 1 leaks its logits every step (growing_list), rank 3 gets twice the
// tokens (twice the activations: it runs out of memory in the forward of
// step 2), and rank 6 shares its GPU with another process and may reserve
// only 160 MiB (it runs out of memory in the forward of step 1, first).
// Ranks start 37 µs apart; gen is the snapshot generation ('B' records no
// times).
func FaultyJob(gen byte) []RankConfig {
	job := make([]RankConfig, 8)
	for r := range job {
		job[r] = RankConfig{Model: FaultyJobModel, Rank: r, LimitBytes: 420 << 20, Gen: gen, StartSkewUS: 37}
	}
	job[1].Fault = RankLeak
	job[3].Fault = RankDoubleActivations
	job[6].LimitBytes = 160 << 20
	return job
}
