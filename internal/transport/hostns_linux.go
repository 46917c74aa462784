package transport

import "os"

// netNamespace identifies this process's network namespace ("net:[4026531840]"),
// or "" where it cannot be read. Processes in different network namespaces
// of one machine have separate network stacks, as containers and the
// multi-host tests' simulated hosts do: they count as different hosts.
func netNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return ""
	}
	return ns
}
