package snapshot

// Options bound what an input may make a reader do.
type Options struct {
	// MaxInputBytes caps the bytes a reader will decode after gzip or base64
	// expansion (default 8 GiB). A larger input stops with an error. Left
	// to its default, a gzip input may also expand to at most
	// gzipExpansionBase plus gzipExpansionRatio times its compressed size.
	MaxInputBytes int64
	// MaxStringBytes caps one string in a pickle (default 16 MiB; the longest
	// strings of real snapshots, FX traces, are a few KB).
	MaxStringBytes int64
	// MaxDepth caps nesting of pickle marks and JSON containers (default 10,000).
	MaxDepth int
	// MaxMemo caps the pickle memo: its entries, and every index a pickle
	// stores at (the entries before an index count too). The default
	// follows the input: 8M entries (at most 32 bytes each), or one entry
	// per 40 bytes of the file (per 4 bytes of a gzip file) when that is
	// more. Real snapshots memoize about one object per 77 bytes, so a
	// hostile file's memo costs at most 256 MiB, or 0.8× its own size (8×
	// a gzip file's).
	MaxMemo int
	// MaxValues caps pickle values pending on the stack or in lists that are
	// not snapshot records (default 1M; real snapshots keep a few thousand);
	// records themselves are bounded by the input size.
	MaxValues int
	// MaxValueBytes caps the bytes of those values (default 32 MiB): the
	// stack, generic list items, dict entries and containers not reduced
	// into the model, each counted at its size in memory.
	MaxValueBytes int64
	// MaxDevices caps the devices of one file (default 256: a machine has
	// at most a few hundred), so that no per-device work can explode.
	MaxDevices int
	// Progress, when set, is called now and then with the input bytes read so far.
	Progress func(read int64)
}

// Default limits.
const (
	DefaultMaxInputBytes  int64 = 8 << 30
	DefaultMaxStringBytes int64 = 16 << 20
	DefaultMaxDepth             = 10000
	DefaultMaxMemo              = 8 << 20
	DefaultMaxValues            = 1 << 20
	DefaultMaxValueBytes  int64 = 32 << 20
	DefaultMaxDevices           = 256
)

// WithDefaults fills what o leaves at zero with the default limits.
func (o Options) WithDefaults() Options {
	if o.MaxInputBytes <= 0 {
		o.MaxInputBytes = DefaultMaxInputBytes
	}
	if o.MaxStringBytes <= 0 {
		o.MaxStringBytes = DefaultMaxStringBytes
	}
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxMemo <= 0 {
		o.MaxMemo = DefaultMaxMemo
	}
	if o.MaxValues <= 0 {
		o.MaxValues = DefaultMaxValues
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = DefaultMaxValueBytes
	}
	if o.MaxDevices <= 0 {
		o.MaxDevices = DefaultMaxDevices
	}
	return o
}
