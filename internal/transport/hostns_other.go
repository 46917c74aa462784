//go:build !linux

package transport

// netNamespace is "" where network namespaces do not exist.
func netNamespace() string { return "" }
