package transport

import (
	"os"
	"strings"
)

// HostIdentity returns this machine's identity as ConnectHybrid compares
// it: the host name and the kernel's boot id (where there is one), so
// that two machines (or containers) that happen to share a name do not
// pass for one host, and, on Linux, the network namespace when it is not
// the machine's first, so that separate network stacks on one machine
// (containers, simulated hosts) count as separate hosts too. Ranks with
// the same identity are expected to share /dev/shm; if they do not,
// mapping the segment fails and they fall back to TCP.
func HostIdentity() string {
	name, err := os.Hostname()
	if err != nil {
		name = "unknown-host"
	}
	id := name + "/" + strings.TrimSpace(bootID())
	if ns := netNamespace(); ns != "" && ns != initialNetNamespace {
		// Only a namespace other than the machine's first one is named, so
		// that the identity of ordinary hosts stays as it was.
		id += "/" + ns
	}
	return id
}

// initialNetNamespace is the network namespace the Linux kernel starts
// with (PROC_NET_INIT_INO).
const initialNetNamespace = "net:[4026531840]"
