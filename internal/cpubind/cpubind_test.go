package cpubind

import (
	"errors"
	"slices"
	"testing"
)

func TestParseList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"0", []int{0}},
		{"0-3", []int{0, 1, 2, 3}},
		{" 8, 0-1 ,3-3,1", []int{0, 1, 3, 8}},
		{"1023", []int{1023}},
	} {
		got, err := ParseList(tc.in)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseList(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, err := ParseList(Format(got)); err != nil || !slices.Equal(back, got) {
			t.Errorf("ParseList(Format(%v) = %q) = %v, %v", got, Format(got), back, err)
		}
	}
	for _, bad := range []string{"", "a", "1-", "-1", "3-1", "0,,1", "1024", "0-2000"} {
		if got, err := ParseList(bad); err == nil {
			t.Errorf("ParseList(%q) = %v, want an error", bad, got)
		}
	}
}

func TestFormat(t *testing.T) {
	if got := Format([]int{0, 1, 2, 5, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("Format = %q", got)
	}
	if got := Format(nil); got != "" {
		t.Errorf("Format(nil) = %q", got)
	}
}

func TestBlock(t *testing.T) {
	cpus := []int{6, 1, 3, 0, 2, 7, 4, 5} // unsorted: Block sorts
	for _, tc := range []struct {
		rank, size int
		want       []int
	}{
		{0, 1, []int{0, 1, 2, 3, 4, 5, 6, 7}},
		{0, 2, []int{0, 1, 2, 3}},
		{1, 2, []int{4, 5, 6, 7}},
		{0, 3, []int{0, 1}},
		{1, 3, []int{2, 3, 4}},
		{2, 3, []int{5, 6, 7}},
		{7, 8, []int{7}},
		{0, 9, nil},       // ranks outnumber CPUs unevenly: no binding
		{3, 16, []int{3}}, // twice as many ranks as CPUs: dealt round-robin
		{11, 16, []int{3}},
		{15, 24, []int{7}},
		{2, 2, nil},  // rank out of range
		{-1, 2, nil}, // rank out of range
	} {
		if got := Block(cpus, tc.rank, tc.size); !slices.Equal(got, tc.want) {
			t.Errorf("Block(rank %d of %d) = %v, want %v", tc.rank, tc.size, got, tc.want)
		}
	}
	// Every CPU in exactly one block, for every split.
	for size := 1; size <= len(cpus); size++ {
		var all []int
		for r := range size {
			b := Block(cpus, r, size)
			if len(b) == 0 {
				t.Fatalf("rank %d of %d: empty block", r, size)
			}
			all = append(all, b...)
		}
		if !slices.Equal(all, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
			t.Errorf("blocks of %d: %v", size, all)
		}
	}
}

func TestResolve(t *testing.T) {
	allowed := []int{0, 1, 2, 3}
	for _, tc := range []struct {
		v    string
		want []int
	}{
		{"", nil}, {"none", nil}, {"NONE", nil}, {"off", nil},
		{"auto", []int{2, 3}},
		{" Auto ", []int{2, 3}},
		{"5-6", []int{5, 6}},
	} {
		got, err := Resolve(tc.v, 1, 2, allowed)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Resolve(%q) = %v, %v; want %v", tc.v, got, err, tc.want)
		}
	}
	if got, err := Resolve("auto", 0, 5, allowed); err != nil || got != nil {
		t.Errorf("auto with 5 ranks on 4 CPUs = %v, %v; want no binding", got, err)
	}
	if got, err := Resolve("auto", 0, 2, nil); err != nil || got != nil {
		t.Errorf("auto with unknown CPUs = %v, %v; want no binding", got, err)
	}
	if _, err := Resolve("cores", 0, 2, allowed); !errors.Is(err, ErrBind) {
		t.Errorf("Resolve(cores) error %v, want ErrBind", err)
	}
}

func TestSharedProcs(t *testing.T) {
	two, eight := []int{0, 1}, []int{0, 1, 2, 3, 4, 5, 6, 7}
	for _, tc := range []struct {
		v       string
		size    int
		allowed []int
		want    int
	}{
		{"auto", 4, two, 1},
		{"auto", 3, two, 1},
		{" AUTO", 16, eight, 1},
		{"auto", 2, two, 0},   // a CPU each: bound instead
		{"auto", 1, two, 0},   // a CPU each: bound instead
		{"auto", 4, nil, 0},   // CPUs unknown
		{"none", 4, two, 0},   // not asked
		{"0-1", 4, two, 0},    // a list: bound, not shared
		{"", 4, two, 0},       // not asked
		{"auto", 0, two, 0},   // no local size
		{"auto", 9, eight, 1}, // 8/9 rounds to 0: at least 1
	} {
		if got := SharedProcs(tc.v, tc.size, tc.allowed); got != tc.want {
			t.Errorf("SharedProcs(%q, %d ranks, %d CPUs) = %d, want %d", tc.v, tc.size, len(tc.allowed), got, tc.want)
		}
	}
}
