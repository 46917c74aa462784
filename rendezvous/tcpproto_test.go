package rendezvous

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// torch113Requests are requests captured on the wire between torch 1.13's
// Python TCPStore client and server (set, get = wait + get, add,
// compare_set, num_keys, delete_key).
var torch113Requests = []struct {
	name string
	wire string
	req  request
}{
	{"set", "00 0300000000000000 2f6162 0200000000000000 7879",
		request{op: opSet, keys: []string{"/ab"}, values: [][]byte{[]byte("xy")}}},
	{"wait", "05 0100000000000000 0300000000000000 2f6162",
		request{op: opWait, keys: []string{"/ab"}}},
	{"get", "02 0300000000000000 2f6162",
		request{op: opGet, keys: []string{"/ab"}}},
	{"add", "03 0200000000000000 2f6e 0500000000000000",
		request{op: opAdd, keys: []string{"/n"}, delta: 5}},
	{"compare_set", "01 0300000000000000 2f6162 0200000000000000 7879 0200000000000000 7a7a",
		request{op: opCompareSet, keys: []string{"/ab"}, values: [][]byte{[]byte("xy"), []byte("zz")}}},
	{"compare_set missing", "01 0600000000000000 2f6e6f6b6579 0000000000000000 0100000000000000 76",
		request{op: opCompareSet, keys: []string{"/nokey"}, values: [][]byte{{}, []byte("v")}}},
	{"num_keys", "06", request{op: opNumKeys}},
	{"delete_key", "08 0300000000000000 2f6162", request{op: opDeleteKey, keys: []string{"/ab"}}},
}

func TestRequestCodecTorch113Golden(t *testing.T) {
	for _, tc := range torch113Requests {
		t.Run(tc.name, func(t *testing.T) {
			wire := unhex(t, tc.wire)
			got, err := readRequest(bufio.NewReader(bytes.NewReader(wire)), dialectV1)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.req) {
				t.Fatalf("decoded %+v, want %+v", got, tc.req)
			}
			enc, err := appendRequest(nil, dialectV1, tc.req)
			if err != nil || !bytes.Equal(enc, wire) {
				t.Fatalf("encoded %x, %v; torch sends %x", enc, err, wire)
			}
		})
	}
}

func TestRequestCodecTorch2(t *testing.T) {
	tests := []struct {
		name string
		wire string
		req  request
	}{
		{"validate", "00 cef7853c", request{op: opValidate, word: validationMagic}},
		{"set", "01 0100000000000000 6b 0100000000000000 76", request{op: opSet, keys: []string{"k"}, values: [][]byte{[]byte("v")}}},
		{"get", "03 0100000000000000 6b", request{op: opGet, keys: []string{"k"}}},
		{"num_keys", "07", request{op: opNumKeys}},
		{"delete", "08 0100000000000000 6b", request{op: opDeleteKey, keys: []string{"k"}}},
		{"append", "09 0100000000000000 6b 0100000000000000 76", request{op: opAppend, keys: []string{"k"}, values: [][]byte{[]byte("v")}}},
		{"multi_get", "0a 0200000000000000 0100000000000000 61 0100000000000000 62", request{op: opMultiGet, keys: []string{"a", "b"}}},
		{"multi_set", "0b 0100000000000000 0100000000000000 61 0100000000000000 31",
			request{op: opMultiSet, keys: []string{"a"}, values: [][]byte{[]byte("1")}}},
		{"cancel_wait", "0c", request{op: opCancelWait}},
		{"ping", "0d efbeadde", request{op: opPing, word: 0xdeadbeef}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wire := unhex(t, tc.wire)
			got, err := readRequest(bufio.NewReader(bytes.NewReader(wire)), dialectV2)
			if err != nil || !reflect.DeepEqual(got, tc.req) {
				t.Fatalf("decoded %+v, %v; want %+v", got, err, tc.req)
			}
			enc, err := appendRequest(nil, dialectV2, tc.req)
			if err != nil || !bytes.Equal(enc, wire) {
				t.Fatalf("encoded %x, %v; want %x", enc, err, wire)
			}
		})
	}
}

func TestDetectDialect(t *testing.T) {
	tests := []struct {
		wire string
		want dialect
		err  error
	}{
		{"06", dialectV1, nil},                         // 1.x GETNUMKEYS: one byte, must not block
		{"05 0100000000000000", dialectV1, nil},        // 1.x WAIT
		{"00 0300000000000000 2f6162", dialectV1, nil}, // 1.x SET
		{"00 cef7853c", dialectV2, nil},                // 2.x VALIDATE
		{"00 cef7853c 07", dialectV2, nil},             // VALIDATE then GETNUMKEYS
		{"00 cef785", 0, io.EOF},                       // cut short
		{"", 0, io.EOF},                                // nothing
		{"00 cef7853d 0000000000", dialectV1, nil},     // wrong magic: a 1.x SET (that will fail)
		{"ce f7853c 01", dialectV1, nil},               // per-query magic snapshots: unknown 1.x query
		{"0d efbeadde", dialectV1, nil},                // 2.x PING without VALIDATE: 1.x, unknown
		{"09", dialectV1, nil},                         // unknown either way
		{"08 0300000000000000 2f6162", dialectV1, nil}, // 1.x DELETE_KEY
		{"04 0000000000000000", dialectV1, nil},        // 1.x CHECK of nothing
		{"0b 0000000000000000", dialectV1, nil},        // 2.x MULTI_SET without VALIDATE
		{"01 0000000000000000 0000000000000000 0000000000000000", dialectV1, nil},
	}
	for _, tc := range tests {
		got, err := detectDialect(bufio.NewReader(bytes.NewReader(unhex(t, tc.wire))))
		if !errors.Is(err, tc.err) || (err == nil && got != tc.want) {
			t.Errorf("detectDialect(%s) = %v, %v; want %v, %v", tc.wire, got, err, tc.want, tc.err)
		}
	}
}

func TestReadRequestRejects(t *testing.T) {
	u64 := func(n uint64) string { return hex.EncodeToString(binary.LittleEndian.AppendUint64(nil, n)) }
	tests := []struct {
		name string
		d    dialect
		wire string
		want error
	}{
		{"empty", dialectV1, "", io.EOF},
		{"unknown 1.x query", dialectV1, "09", errUnknownQuery},
		{"unknown 2.x query", dialectV2, "0e", errUnknownQuery},
		{"huge key", dialectV1, "02" + u64(1<<40), ErrTooLarge},
		{"key over limit", dialectV1, "02" + u64(MaxKeyLen+1), ErrTooLarge},
		{"value over limit", dialectV1, "00" + u64(1) + "61" + u64(MaxValueLen+1), ErrTooLarge},
		{"too many keys", dialectV1, "04" + u64(MaxKeys+1), ErrTooLarge},
		{"absurd key count", dialectV1, "05" + u64(1<<62), ErrTooLarge},
		{"multi_set count", dialectV2, "0b" + u64(MaxKeys+1), ErrTooLarge},
		{"truncated length", dialectV1, "02 0300", io.ErrUnexpectedEOF},
		{"truncated key", dialectV1, "02" + u64(3) + "2f", io.ErrUnexpectedEOF},
		{"truncated delta", dialectV1, "03" + u64(1) + "61 0500", io.ErrUnexpectedEOF},
		{"truncated value", dialectV1, "00" + u64(1) + "61" + u64(1000) + "00", io.ErrUnexpectedEOF},
		{"truncated keys", dialectV1, "05" + u64(2) + u64(1) + "61", io.ErrUnexpectedEOF},
		{"truncated magic", dialectV2, "00 cef7", io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readRequest(bufio.NewReader(bytes.NewReader(unhex(t, tc.wire))), tc.d)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

// randomRequest builds a request valid in dialect d.
func randomRequest(r *rand.Rand, d dialect) request {
	ops := d.ops()
	req := request{op: ops[r.IntN(len(ops))]}
	str := func() string {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return string(b)
	}
	val := func() []byte { return []byte(str()) }
	switch req.op {
	case opValidate, opPing:
		req.word = r.Uint32()
	case opSet, opAppend:
		req.keys, req.values = []string{str()}, [][]byte{val()}
	case opCompareSet:
		req.keys, req.values = []string{str()}, [][]byte{val(), val()}
	case opGet, opDeleteKey, opWatchKey:
		req.keys = []string{str()}
	case opAdd:
		req.keys, req.delta = []string{str()}, int64(r.Uint64())
	case opCheck, opWait, opMultiGet:
		for range r.IntN(4) {
			req.keys = append(req.keys, str())
		}
	case opMultiSet:
		for range r.IntN(4) {
			req.keys = append(req.keys, str())
			req.values = append(req.values, val())
		}
	}
	return req
}

// TestRequestCodecRoundTrip: a stream of random requests decodes to the
// same requests, in both dialects.
func TestRequestCodecRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, d := range []dialect{dialectV1, dialectV2} {
		var wire []byte
		var want []request
		for range 500 {
			req := randomRequest(r, d)
			var err error
			if wire, err = appendRequest(wire, d, req); err != nil {
				t.Fatal(err)
			}
			want = append(want, req)
		}
		br := bufio.NewReader(bytes.NewReader(wire))
		for i, w := range want {
			got, err := readRequest(br, d)
			if err != nil {
				t.Fatalf("%v request %d: %v", d, i, err)
			}
			if len(got.keys) == 0 {
				got.keys = nil
			}
			if len(got.values) == 0 {
				got.values = nil
			}
			for j := range got.values {
				if len(got.values[j]) == 0 {
					got.values[j] = []byte{}
					w.values[j] = []byte{}
				}
			}
			if !reflect.DeepEqual(got, w) {
				t.Fatalf("%v request %d: got %+v, want %+v", d, i, got, w)
			}
		}
		if _, err := readRequest(br, d); err != io.EOF {
			t.Fatalf("after the last request: %v, want io.EOF", err)
		}
	}
}

func TestAppendRequestRefusesForeignQueries(t *testing.T) {
	if _, err := appendRequest(nil, dialectV1, request{op: opPing}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("PING in 1.x: %v", err)
	}
	if _, err := appendRequest(nil, dialectV2, request{op: opWatchKey, keys: []string{"k"}}); !errors.Is(err, ErrProtocol) {
		t.Fatalf("WATCH_KEY in 2.x: %v", err)
	}
}

func TestEnumStrings(t *testing.T) {
	if s := opSet.String(); s != "SET" {
		t.Errorf("opSet = %q", s)
	}
	if s := opPing.String(); s != "PING" {
		t.Errorf("opPing = %q", s)
	}
	if s := op(200).String(); s != "op(200)" {
		t.Errorf("op(200) = %q", s)
	}
	if s := dialectV1.String(); s != "torch-1.x" {
		t.Errorf("dialectV1 = %q", s)
	}
	if s := dialect(9).String(); s != "dialect(9)" {
		t.Errorf("dialect(9) = %q", s)
	}
}
