package bench

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"8", 8}, {"8B", 8}, {"1K", 1024}, {"1k", 1024}, {"4KB", 4096}, {"4KiB", 4096},
		{"64M", 64 << 20}, {"64MiB", 64 << 20}, {"1G", 1 << 30}, {"2T", 2 << 40}, {" 16 ", 16},
	}
	for _, tt := range tests {
		if got, err := ParseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "-8", "1.5M", "M", "8X", "99999999999T", "eight"} {
		if got, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, got)
		}
	}
}

func TestFormatSizeRoundTrip(t *testing.T) {
	tests := map[int64]string{0: "0", 8: "8", 1000: "1000", 1024: "1K", 1536: "1536", 64 << 20: "64M", 3 << 30: "3G", 1 << 40: "1T"}
	for in, want := range tests {
		if got := FormatSize(in); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", in, got, want)
		}
	}
	for s := int64(0); s < 1<<22; s = s*3 + 1 {
		back, err := ParseSize(FormatSize(s))
		if err != nil || back != s {
			t.Fatalf("ParseSize(FormatSize(%d)) = %d, %v", s, back, err)
		}
	}
}

func TestHumanSize(t *testing.T) {
	tests := map[int64]string{8: "8 B", 1024: "1 KiB", 1536: "1.5 KiB", 64 << 20: "64 MiB", 1 << 30: "1 GiB"}
	for in, want := range tests {
		if got := HumanSize(in); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestSweep(t *testing.T) {
	tests := []struct {
		min, max int64
		factor   float64
		step     int64
		want     []int64
	}{
		{8, 64, 2, 0, []int64{8, 16, 32, 64}},
		{8, 100, 2, 0, []int64{8, 16, 32, 64}},
		{8, 8, 2, 0, []int64{8}},
		{0, 0, 1, 0, []int64{0}},
		{1, 100, 10, 0, []int64{1, 10, 100}},
		{1, 3, 1.5, 0, []int64{1, 2, 3}}, // a factor that would not grow the size still steps by one
		{0, 30, 1, 10, []int64{0, 10, 20, 30}},
		{100, 250, 0, 100, []int64{100, 200}},
	}
	for _, tt := range tests {
		got, err := Sweep(tt.min, tt.max, tt.factor, tt.step)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Sweep(%d, %d, %g, %d) = %v, %v; want %v", tt.min, tt.max, tt.factor, tt.step, got, err, tt.want)
		}
	}
	// nccl-tests' defaults of a full sweep: 8 B to 64 MiB is 24 sizes.
	if got, _ := Sweep(8, 64<<20, 2, 0); len(got) != 24 || got[23] != 64<<20 {
		t.Errorf("Sweep(8, 64M, 2) has %d sizes ending in %d", len(got), got[len(got)-1])
	}
	errs := []struct {
		min, max int64
		factor   float64
		step     int64
		want     string
	}{
		{64, 8, 2, 0, "below"},
		{-1, 8, 2, 0, "negative"},
		{8, 64, 1, 0, "factor"},
		{0, 64, 2, 0, "size 0"},
		{0, 1 << 40, 1, 1, "more than"},
	}
	for _, tt := range errs {
		if _, err := Sweep(tt.min, tt.max, tt.factor, tt.step); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Sweep(%d, %d, %g, %d) error = %v; want one containing %q", tt.min, tt.max, tt.factor, tt.step, err, tt.want)
		}
	}
}
