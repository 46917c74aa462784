package rendezvous

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// This file is the codec of PyTorch's TCPStore wire protocol: no I/O of its
// own beyond reading a bufio.Reader, no goroutines. See the package doc for
// the protocol.

// dialect is the version of the TCPStore protocol a connection speaks.
type dialect uint8

const (
	// dialectV1 is torch 1.x (1.13 is what Debian ships): no handshake,
	// QueryType SET=0 ... DELETE_KEY=8.
	dialectV1 dialect = iota
	// dialectV2 is torch 2.x since the VALIDATE handshake: the first query
	// is VALIDATE + validationMagic, and QueryType VALIDATE=0 ... PING=13.
	dialectV2
)

func (d dialect) String() string {
	switch d {
	case dialectV1:
		return "torch-1.x"
	case dialectV2:
		return "torch-2.x"
	}
	return "dialect(" + strconv.Itoa(int(d)) + ")"
}

// validationMagic follows VALIDATE in torch 2.x (validationMagicNumber).
const validationMagic uint32 = 0x3C85F7CE

// Reply bytes (CheckResponseType and WaitResponseType, both dialects).
const (
	checkReady    byte = 0
	checkNotReady byte = 1
	waitStop      byte = 0 // STOP_WAITING
	waitCanceled  byte = 1 // WAIT_CANCELED (2.x only)
)

// op is a TCPStore query independent of its wire code.
type op uint8

const (
	opValidate op = iota
	opSet
	opCompareSet
	opGet
	opAdd
	opCheck
	opWait
	opNumKeys
	opWatchKey
	opDeleteKey
	opAppend
	opMultiGet
	opMultiSet
	opCancelWait
	opPing
	numOps
)

var opNames = [numOps]string{
	"VALIDATE", "SET", "COMPARE_SET", "GET", "ADD", "CHECK", "WAIT", "GETNUMKEYS",
	"WATCH_KEY", "DELETE_KEY", "APPEND", "MULTI_GET", "MULTI_SET", "CANCEL_WAIT", "PING",
}

func (o op) String() string {
	if o < numOps {
		return opNames[o]
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// Wire codes: the index is the QueryType byte.
var (
	v1Ops = []op{opSet, opCompareSet, opGet, opAdd, opCheck, opWait, opNumKeys, opWatchKey, opDeleteKey}
	v2Ops = []op{opValidate, opSet, opCompareSet, opGet, opAdd, opCheck, opWait, opNumKeys,
		opDeleteKey, opAppend, opMultiGet, opMultiSet, opCancelWait, opPing}
)

func (d dialect) ops() []op {
	if d == dialectV2 {
		return v2Ops
	}
	return v1Ops
}

// decodeOp maps a QueryType byte to an op.
func (d dialect) decodeOp(b byte) (op, bool) {
	ops := d.ops()
	if int(b) < len(ops) {
		return ops[b], true
	}
	return 0, false
}

// encodeOp maps an op to its QueryType byte.
func (d dialect) encodeOp(o op) (byte, bool) {
	for i, x := range d.ops() {
		if x == o {
			return byte(i), true
		}
	}
	return 0, false
}

// request is one decoded query.
type request struct {
	op     op
	keys   []string
	values [][]byte // SET, APPEND: 1; COMPARE_SET: expected, desired; MULTI_SET: one per key
	delta  int64    // ADD
	word   uint32   // VALIDATE: magic; PING: nonce
}

// errUnknownQuery is returned by readRequest for a QueryType byte the
// dialect does not define.
var errUnknownQuery = errors.New("unknown query type")

// detectDialect looks at a new connection's first bytes without consuming
// them. A torch 2.x client opens with VALIDATE (0) and the magic; in torch
// 1.x, 0 is SET, whose next 8 bytes are a key length that cannot equal the
// magic within MaxKeyLen. Peeking 5 bytes is safe only after a 0, because
// every request starting with 0 is at least 5 bytes long in both dialects.
func detectDialect(r *bufio.Reader) (dialect, error) {
	b, err := r.Peek(1)
	if err != nil {
		return 0, err
	}
	if b[0] != 0 {
		return dialectV1, nil
	}
	b, err = r.Peek(5)
	if err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(b[1:]) == validationMagic {
		return dialectV2, nil
	}
	return dialectV1, nil
}

// readRequest decodes one query. It returns io.EOF if r ends cleanly before
// the query, io.ErrUnexpectedEOF if it ends inside one, ErrTooLarge for a
// length over the limits (before allocating it) and errUnknownQuery for an
// undefined QueryType.
func readRequest(r *bufio.Reader, d dialect) (request, error) {
	code, err := r.ReadByte()
	if err != nil {
		return request{}, err
	}
	o, ok := d.decodeOp(code)
	if !ok {
		return request{}, fmt.Errorf("%w %d in the %v protocol", errUnknownQuery, code, d)
	}
	req := request{op: o}
	err = req.readBody(r)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return req, err
}

func (req *request) readBody(r *bufio.Reader) error {
	var err error
	switch req.op {
	case opValidate, opPing:
		req.word, err = readU32(r)
	case opSet, opAppend:
		if err = req.readKeys(r, 1); err == nil {
			err = req.readValues(r, 1)
		}
	case opCompareSet:
		if err = req.readKeys(r, 1); err == nil {
			err = req.readValues(r, 2)
		}
	case opGet, opDeleteKey, opWatchKey:
		err = req.readKeys(r, 1)
	case opAdd:
		if err = req.readKeys(r, 1); err == nil {
			var u uint64
			u, err = readU64(r)
			req.delta = int64(u)
		}
	case opCheck, opWait, opMultiGet:
		var n uint64
		if n, err = readCount(r); err == nil {
			err = req.readKeys(r, int(n))
		}
	case opMultiSet:
		var n uint64
		if n, err = readCount(r); err == nil {
			for i := uint64(0); i < n && err == nil; i++ {
				if err = req.readKeys(r, 1); err == nil {
					err = req.readValues(r, 1)
				}
			}
		}
	case opNumKeys, opCancelWait:
	}
	return err
}

func (req *request) readKeys(r *bufio.Reader, n int) error {
	for range n {
		b, err := readSized(r, MaxKeyLen, "key")
		if err != nil {
			return err
		}
		req.keys = append(req.keys, string(b))
	}
	return nil
}

func (req *request) readValues(r *bufio.Reader, n int) error {
	for range n {
		b, err := readSized(r, MaxValueLen, "value")
		if err != nil {
			return err
		}
		req.values = append(req.values, b)
	}
	return nil
}

func readCount(r *bufio.Reader) (uint64, error) {
	n, err := readU64(r)
	if err != nil {
		return 0, err
	}
	if n > MaxKeys {
		return 0, fmt.Errorf("%w: %d keys in one query (limit %d)", ErrTooLarge, n, MaxKeys)
	}
	return n, nil
}

func readU32(r io.Reader) (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func readU64(r io.Reader) (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// firstChunk is what readSized allocates before any byte of a value has
// arrived; it then at most doubles what it holds, so a peer announcing a
// huge length and sending little costs little (a flood of such
// connections, 4 KiB each).
const firstChunk = 4 << 10

// readSized reads a uint64 length and that many bytes, refusing lengths
// over limit.
func readSized(r io.Reader, limit uint64, what string) ([]byte, error) {
	n, err := readU64(r)
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: %s of %d bytes (limit %d)", ErrTooLarge, what, n, limit)
	}
	buf := make([]byte, 0, min(n, firstChunk))
	for uint64(len(buf)) < n {
		if len(buf) == cap(buf) {
			buf = append(make([]byte, 0, min(n, 2*uint64(cap(buf)))), buf...)
		}
		start := len(buf)
		buf = buf[:cap(buf)]
		if _, err := io.ReadFull(r, buf[start:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return buf, nil
}

// appendRequest appends the encoding of req in dialect d to dst. It fails
// if d has no such query.
func appendRequest(dst []byte, d dialect, req request) ([]byte, error) {
	code, ok := d.encodeOp(req.op)
	if !ok {
		return dst, fmt.Errorf("%w: %v has no %v query", ErrProtocol, d, req.op)
	}
	dst = append(dst, code)
	switch req.op {
	case opValidate, opPing:
		dst = binary.LittleEndian.AppendUint32(dst, req.word)
	case opSet, opAppend, opCompareSet, opGet, opDeleteKey, opWatchKey:
		dst = appendSized(dst, []byte(req.keys[0]))
		for _, v := range req.values {
			dst = appendSized(dst, v)
		}
	case opAdd:
		dst = appendSized(dst, []byte(req.keys[0]))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(req.delta))
	case opCheck, opWait, opMultiGet:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(len(req.keys)))
		for _, k := range req.keys {
			dst = appendSized(dst, []byte(k))
		}
	case opMultiSet:
		dst = binary.LittleEndian.AppendUint64(dst, uint64(len(req.keys)))
		for i, k := range req.keys {
			dst = appendSized(dst, []byte(k))
			dst = appendSized(dst, req.values[i])
		}
	case opNumKeys, opCancelWait:
	}
	return dst, nil
}

func appendSized(dst, b []byte) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(len(b)))
	return append(dst, b...)
}
