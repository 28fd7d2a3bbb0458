package snapshot_test

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/internal/load"
	st "github.com/torchmem/torchmem/internal/snapshottest"
	"github.com/torchmem/torchmem/snapshot"
)

// TestGzipTrailerChecked: a gzip input whose trailer does not match its
// data — a wrong CRC-32, a wrong length, the trailer cut off — is bad
// input in every format, though each reader stops before the trailer
// once it has what it needs (a pickle read with a wrong CRC as good); the
// same data with a good trailer, or with zero padding after it, reads.
func TestGzipTrailerChecked(t *testing.T) {
	s := st.NewSim()
	s.Alloc(0, 1<<20, s.Stack(s.F("train.py", 3, "main")))
	pickle := st.Marshal(s.Snapshot(), 4)
	inputs := []struct{ name, data string }{
		{"pickle", string(pickle)},
		{"chrome trace", `{"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1, "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 512}}]}`},
		{"trace_plot page", `<html><script>const local_files = [{"name": "s", "base64": "` + base64.StdEncoding.EncodeToString(pickle) + `"}]</script></html>`},
		{"trace_plot alloc_data", string(st.TracePlotPage(s.Snapshot(), 0, st.TracePlot2023))},
	}
	flip := func(at int) func([]byte) []byte {
		return func(z []byte) []byte {
			z = bytes.Clone(z)
			z[len(z)+at] ^= 0x55
			return z
		}
	}
	damages := []struct {
		name   string
		damage func([]byte) []byte
		want   string // "" reads
	}{
		{"intact", func(z []byte) []byte { return z }, ""},
		{"zero padding after", func(z []byte) []byte { return append(bytes.Clone(z), make([]byte, 512)...) }, ""},
		{"wrong CRC-32", flip(-8), "checksum"},
		{"wrong length", flip(-2), "checksum"},
		{"trailer cut off", func(z []byte) []byte { return z[:len(z)-8] }, "trailer"},
	}
	for _, in := range inputs {
		for _, d := range damages {
			t.Run(in.name+"/"+d.name, func(t *testing.T) {
				z := d.damage(st.Gzip([]byte(in.data)))
				_, err := load.Read(bytes.NewReader(z), "f.gz", int64(len(z)), snapshot.Options{})
				switch {
				case d.want == "" && err != nil:
					t.Errorf("%v", err)
				case d.want != "" && (err == nil || !snapshot.IsInputError(err)):
					t.Errorf("read as good (err %v); want bad input", err)
				case d.want != "" && (!strings.Contains(err.Error(), d.want) && !strings.Contains(err.Error(), "truncated") || strings.Contains(err.Error(), "\n")):
					t.Errorf("error %q: want one line about the %s", err, d.want)
				}
			})
		}
	}
}
