package rollup

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/torchmem/torchmem/result"
)

// RankSource says where a rank number came from.
type RankSource string

// Where ranks come from, most trusted first.
const (
	// FromDistributedInfo: the file states it (a chrome trace's distributedInfo).
	FromDistributedInfo RankSource = "distributed_info"
	// FromFileName: the file's name says it (rank3, rank-3, rank_3, …_3.pickle).
	FromFileName RankSource = "file_name"
	// FromOrder: neither does; the rank is the input's place on the command line.
	FromOrder RankSource = "order"
)

// maxNamedRank bounds a rank read from a file name: a larger number is more
// likely a date, a size or a process id than a rank.
const maxNamedRank = 1 << 20

var (
	// rankWord is "rank" and a number, with or without - or _ between them,
	// as torchrun scripts name per-rank files (oom_snapshot_rank3.pickle,
	// rank-3.1712.pt.trace.json.gz, logs/rank_3/…).
	rankWord = regexp.MustCompile(`(?i)(?:^|[^a-z])rank[-_]?([0-9]+)(?:[^0-9]|$)`)
	// rankSuffix is a number after an underscore just before the file's
	// extensions (snapshot_3.pickle, trace_3.json.gz).
	rankSuffix = regexp.MustCompile(`_([0-9]+)$`)
)

// inputExtensions are the extensions stripped before looking for a rank
// suffix; any other dotted part (a timestamp, a host name) stops the search.
var inputExtensions = []string{".gz", ".json", ".pickle", ".pkl", ".html", ".trace", ".pt"}

// Identify says which rank wrote the input at position order of a roll-up:
// the rank its file states (distributedInfo), else the one its file name
// gives (rank3, rank-3, rank_3 in the name or a folder above it, or a
// number before the extension: snapshot_3.pickle), else order. Every part
// of torchmem that needs a rank asks this function.
func Identify(in result.Input, order int) (int, RankSource) {
	if in.Distributed != nil && in.Distributed.Rank >= 0 {
		return in.Distributed.Rank, FromDistributedInfo
	}
	if r, ok := rankFromPath(in.Path); ok {
		return r, FromFileName
	}
	return order, FromOrder
}

// rankFromPath finds a rank in a file name, then in the names of the
// folders above it ("rank" and a number only).
func rankFromPath(path string) (int, bool) {
	if path == "" || path == "-" {
		return 0, false
	}
	path = filepath.ToSlash(path)
	parts := strings.Split(path, "/")
	base := parts[len(parts)-1]
	if r, ok := rankIn(rankWord, base); ok {
		return r, true
	}
	stem := base
	for stripped := true; stripped; {
		stripped = false
		for _, ext := range inputExtensions {
			if len(stem) > len(ext) && strings.EqualFold(stem[len(stem)-len(ext):], ext) {
				stem, stripped = stem[:len(stem)-len(ext)], true
			}
		}
	}
	if r, ok := rankIn(rankSuffix, stem); ok {
		return r, true
	}
	for i := len(parts) - 2; i >= 0; i-- {
		if r, ok := rankIn(rankWord, parts[i]); ok {
			return r, true
		}
	}
	return 0, false
}

func rankIn(re *regexp.Regexp, s string) (int, bool) {
	m := re.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n > maxNamedRank {
		return 0, false
	}
	return n, true
}
