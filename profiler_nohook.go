//go:build gocomm_noprofile

package comm

// profileHook is false: the comms logger's hook is compiled out and the
// logger stays off whatever the configuration says.
const profileHook = false
