package comm

import (
	"strings"
	"testing"
)

func TestRankRanges(t *testing.T) {
	for _, tc := range []struct {
		in   []int
		want string
	}{
		{[]int{3}, "rank 3"},
		{[]int{0, 1, 2}, "ranks 0-2"},
		{[]int{0, 1, 3}, "ranks 0-1,3"},
		{[]int{0, 2, 4, 5, 6}, "ranks 0,2,4-6"},
	} {
		if got := rankRanges(tc.in); got != tc.want {
			t.Errorf("rankRanges(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestDescribeDisagreement: the verdict names each belief with its ranks,
// the smallest group first, and only the fields that differ.
func TestDescribeDisagreement(t *testing.T) {
	recs := func(size int, job string, ranks ...int) []joinRecord {
		var out []joinRecord
		for _, r := range ranks {
			out = append(out, joinRecord{Rank: r, Size: size, Job: job, JobFrom: "TORCHELASTIC_RUN_ID"})
		}
		return out
	}
	for _, tc := range []struct {
		name string
		recs []joinRecord
		want []string
		not  []string
	}{
		{"size", append(recs(4, "", 0, 1, 3), recs(5, "", 2)...),
			[]string{"rank 2 says WORLD_SIZE=5, ranks 0-1,3 say WORLD_SIZE=4", "WORLD_SIZE differs", "two jobs share"}, []string{"no job id", "TORCHELASTIC"}},
		{"job", append(recs(2, "a", 0), recs(2, "b", 1)...),
			[]string{"rank 0 says TORCHELASTIC_RUN_ID=a, rank 1 says TORCHELASTIC_RUN_ID=b", "two jobs share"}, []string{"WORLD_SIZE"}},
		{"job unset", append(recs(2, "", 0), recs(2, "b", 1)...),
			[]string{"rank 0 says no job id, rank 1 says TORCHELASTIC_RUN_ID=b"}, nil},
	} {
		got := describeDisagreement(tc.recs, "tcp store at h:1")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q has %q", tc.name, got, n)
			}
		}
	}
}

// A rank registered twice under an etcd prefix points at the prefix.
func TestDuplicateVerdictEtcd(t *testing.T) {
	cfg := &config{rank: 1, size: 2, rdzv: Rendezvous{Kind: RendezvousEtcd, Addr: "e1:2379", Prefix: "/jobs/7"}}
	j := newJoiner(nil, cfg)
	got := j.duplicate([]byte(`{"rank":1,"size":2,"host":"h","pid":7}`))
	for _, want := range []string{"two processes registered as rank 1", "etcd prefix", "etcd store at e1:2379, prefix /jobs/7", "own prefix"} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict %q does not say %q", got, want)
		}
	}
}
