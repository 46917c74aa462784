// Package gobwire encodes Go values for the wire with encoding/gob (which
// decodes data into types and never runs code from the wire) and decodes
// them with the allocation bounded by the bytes received. The object
// collectives (package object) and the profiler's straggler analysis (the
// root package) both move values this way.
package gobwire

import (
	"bytes"
	"encoding/gob"
	"fmt"
	"reflect"
)

// Encode returns v's gob encoding, or encoding/gob's reason it cannot
// (unexported fields only, an unregistered interface type, a func or a
// chan).
func Encode[T any](v T) ([]byte, error) {
	var b bytes.Buffer
	if err := gob.NewEncoder(&b).Encode(&v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Decode decodes a value that rank from encoded. It first walks the bytes
// without keeping anything (gob's DecodeValue of no value), which proves
// every element count against the bytes present: gob alone allocates a
// map of as many entries as the count on the wire says, so a few corrupt
// bytes could claim gigabytes. Each element takes at least one byte on the
// wire, so what the real decode then allocates is bounded by what was
// received.
func Decode[T any](data []byte, from int) (T, error) {
	var v T
	if err := gob.NewDecoder(bytes.NewReader(data)).DecodeValue(reflect.Value{}); err != nil {
		return v, fmt.Errorf("comm: decoding the object of rank %d (%d bytes) as %T: malformed: %w", from, len(data), v, err)
	}
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&v); err != nil {
		return v, fmt.Errorf("comm: decoding the object of rank %d as %T: %w", from, v, err)
	}
	return v, nil
}

// MaxBytes bounds the size of an encoding as a rank announces it, checked
// before anything is allocated for it: gob cannot decode a message this
// large anyway (its own limit, 8 GiB on 64-bit platforms).
const MaxBytes = int64(1<<30) << (^uint(0) >> 62)
