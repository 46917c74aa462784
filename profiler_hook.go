//go:build !gocomm_noprofile

package comm

// profileHook compiles the comms logger's hook in (see launch). Building
// with -tags gocomm_noprofile compiles it out, for measuring what the hook
// costs when the logger is off.
const profileHook = true
