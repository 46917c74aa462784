package object

import (
	"bytes"
	"encoding/gob"
	"runtime"
	"strings"
	"testing"
)

// craftedMap returns the gob encoding of map[string]int{"a": 1} with the
// map's element count replaced by count (a gob uint: one byte below 128,
// else the negated byte count and the big-endian bytes).
func craftedMap(t testing.TB, count []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	// Two messages: the type definition, then [length][type id][0][1]["a"][1].
	first := 1 + int(data[0])
	body := data[first+1:]
	suffix := []byte{0x00, 0x01, 0x01, 'a', 0x02}
	if data[0] >= 128 || int(data[first]) != len(body) || !bytes.HasSuffix(body, suffix) {
		t.Fatalf("unexpected encoding %x", data)
	}
	id := body[:len(body)-len(suffix)]
	nb := append(append(append(append([]byte{}, id...), 0x00), count...), 0x01, 'a', 0x02)
	out := append(append([]byte{}, data[:first]...), byte(len(nb)))
	return append(out, nb...)
}

// A decoded value never allocates more than the bytes received justify:
// 26 bytes claiming a map of 50 million entries made gob allocate 1.7 GB
// before it found the entries missing.
func TestDecodeBoundsAllocationByInput(t *testing.T) {
	if v, err := decode[map[string]int](craftedMap(t, []byte{0x01}), 3); err != nil || v["a"] != 1 || len(v) != 1 {
		t.Fatalf("the unmodified encoding: %v, %v", v, err)
	}
	data := craftedMap(t, []byte{0xFC, 0x02, 0xFA, 0xF0, 0x80}) // 50,000,000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decode[map[string]int](data, 3)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "rank 3") {
		t.Fatalf("decoding %d bytes that claim 50M map entries: %v, want an error naming rank 3", len(data), err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("decoding %d bytes allocated %d MiB", len(data), got>>20)
	}
	// Counts that overflow int neither panic nor allocate.
	for _, count := range [][]byte{
		{0xF8, 0x80, 0, 0, 0, 0, 0, 0, 0x01},
		{0xF8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if _, err := decode[map[string]int](craftedMap(t, count), 0); err != nil && !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("count %x: %v", count, err)
		}
	}
}

type fuzzObject struct {
	Name   string
	Counts map[string][]int
	Nested []map[int]string
	Any    any
}

// FuzzDecodeObject: whatever bytes arrive, decoding returns a value or an
// error, never a panic.
func FuzzDecodeObject(f *testing.F) {
	for _, v := range []fuzzObject{{}, {Name: "x", Counts: map[string][]int{"a": {1, 2}}, Nested: []map[int]string{{1: "one"}}, Any: 3}} {
		b, err := encode(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(craftedMap(f, []byte{0xFC, 0x02, 0xFA, 0xF0, 0x80}))
	f.Fuzz(func(t *testing.T, data []byte) {
		decode[fuzzObject](data, 1)
		decode[map[string]int](data, 1)
	})
}
