//go:build !linux

package transport

// bootID is the kernel's boot id where the platform has one; here it has
// not, and the host name alone identifies the host.
func bootID() string { return "" }
