package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestReleaseWheels checks the wheels make wheels wrote beside the release
// binaries in $TORCHMEM_RELEASE_DIR for version $TORCHMEM_RELEASE_VERSION
// (.ci/run runs make wheels, then this test): one wheel per release
// platform, named with the PEP 440 version and the tags pip matches, each
// carrying the release binary of its platform byte for byte, and listed in
// SHA256SUMS.
func TestReleaseWheels(t *testing.T) {
	dir, version := os.Getenv("TORCHMEM_RELEASE_DIR"), os.Getenv("TORCHMEM_RELEASE_VERSION")
	if (dir == "") != (version == "") {
		t.Fatal("set both TORCHMEM_RELEASE_DIR and TORCHMEM_RELEASE_VERSION")
	}
	if dir == "" {
		t.Skip("TORCHMEM_RELEASE_DIR and TORCHMEM_RELEASE_VERSION are not set (.ci/run sets them after make wheels)")
	}
	pyVersion, err := pep440(version)
	if err != nil {
		t.Fatal(err)
	}
	// The macOS tags are the minimum the Go linker writes into the binaries
	// (12.0 for Go 1.25 and later); the README's Install says so too.
	platforms := map[string]string{
		"linux-amd64":  "manylinux_2_17_x86_64.manylinux2014_x86_64.musllinux_1_1_x86_64",
		"linux-arm64":  "manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64",
		"darwin-amd64": "macosx_12_0_x86_64",
		"darwin-arm64": "macosx_12_0_arm64",
	}
	var want []string
	for _, tags := range platforms {
		want = append(want, "torchmem-"+pyVersion+"-py3-none-"+tags+".whl")
	}
	slices.Sort(want)
	got, _ := filepath.Glob(filepath.Join(dir, "*.whl"))
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds the wheels %q, want %q", dir, got, want)
	}
	sums := map[string]string{}
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if sum, name, ok := strings.Cut(sc.Text(), "  "); ok {
			sums[name] = sum
		}
	}
	readme, _ := os.ReadFile(filepath.Join(repoRoot(), "README.md"))
	for plat, tags := range platforms {
		name := "torchmem-" + pyVersion + "-py3-none-" + tags + ".whl"
		path := filepath.Join(dir, name)
		w := readWheel(t, path)
		bin, err := os.ReadFile(filepath.Join(dir, "torchmem-"+version+"-"+plat))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.data["torchmem-"+pyVersion+".data/scripts/torchmem"], bin) {
			t.Errorf("%s does not carry torchmem-%s-%s", name, version, plat)
		}
		meta := string(w.data["torchmem-"+pyVersion+".dist-info/METADATA"])
		if v := header(meta, "Version"); !slices.Equal(v, []string{pyVersion}) || !strings.HasSuffix(meta, "\n\n"+string(readme)) {
			t.Errorf("%s: METADATA Version %q (want %s), or its description is not the README", name, v, pyVersion)
		}
		data, _ := os.ReadFile(path)
		sum := sha256.Sum256(data)
		if sums[name] != hex.EncodeToString(sum[:]) {
			t.Errorf("SHA256SUMS lists %s as %q, its checksum is %x", name, sums[name], sum)
		}
	}
}
