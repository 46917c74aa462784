package rendezvous

import "encoding/binary"

// The file store's log is a sequence of records, each
//
//	[u32 key length][key][u32 value length][value]
//
// with lengths little-endian (torch writes them in native order; every
// platform torch and gocomm run on is little-endian). It is torch's FileStore
// format: a set appends ("/" + key, value); a delete appends the tombstone
// ("-/" + key, empty); any other key (torch's "cleanup/" counter) is ignored.
// The value of a key is that of its last record.
const (
	fileKeyPrefix    = "/"
	fileDeletePrefix = "-/"
)

// logRecord is one decoded record. value aliases the decoded buffer.
type logRecord struct {
	key   string
	value []byte
}

// decodeLog decodes the complete records at the start of buf and returns
// them with the number of bytes they span. A truncated record at the end
// (a writer died mid-append, or the file is not a store log) is left
// unconsumed; nothing in buf can make decodeLog allocate more than buf holds.
func decodeLog(buf []byte) (recs []logRecord, n int) {
	for {
		rest := buf[n:]
		if len(rest) < 4 {
			return recs, n
		}
		klen := uint64(binary.LittleEndian.Uint32(rest))
		if uint64(len(rest)-4) < klen+4 {
			return recs, n
		}
		key := string(rest[4 : 4+klen])
		rest = rest[4+klen:]
		vlen := uint64(binary.LittleEndian.Uint32(rest))
		if uint64(len(rest)-4) < vlen {
			return recs, n
		}
		recs = append(recs, logRecord{key: key, value: rest[4 : 4+vlen : 4+vlen]})
		n += int(8 + klen + vlen)
	}
}

// appendLogRecord appends the encoding of one record to dst. The caller
// guarantees len(key) and len(value) fit in a uint32.
func appendLogRecord(dst []byte, key string, value []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(key)))
	dst = append(dst, key...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(value)))
	return append(dst, value...)
}

// applyLog replays records into cache, keyed by the caller's key (without
// the "/" prefix).
func applyLog(cache map[string][]byte, recs []logRecord) {
	for _, r := range recs {
		switch {
		case len(r.key) >= len(fileDeletePrefix) && r.key[:len(fileDeletePrefix)] == fileDeletePrefix:
			delete(cache, r.key[len(fileDeletePrefix):])
		case len(r.key) >= len(fileKeyPrefix) && r.key[:len(fileKeyPrefix)] == fileKeyPrefix:
			cache[r.key[len(fileKeyPrefix):]] = r.value
		}
	}
}
