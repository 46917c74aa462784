// Package netns builds simulated hosts in Linux network namespaces for
// multi-host tests: N hosts, each a namespace with one interface ("eth0"),
// joined by a bridge that sits in its own "switch" namespace, so the root
// namespace's network is never touched.
//
// It needs root (or CAP_SYS_ADMIN and CAP_NET_ADMIN) and the iproute2 `ip`
// command; Shape also needs `tc`. Tests call Available first and skip with its
// reason where namespaces cannot be made:
//
//	if err := netns.Available(); err != nil {
//		t.Skipf("no simulated hosts here: %v", err)
//	}
//	nw, err := netns.New(netns.Options{Hosts: 3, IPv6: true})
//	if err != nil {
//		t.Fatal(err)
//	}
//	defer nw.Close()
//	h := nw.Hosts()[0]
//	cmd := h.Command(ctx, os.Args[0], "-test.run=TestHelperProcess")
//
// Programs run inside a host through Host.Command (which is `ip netns exec`),
// so the usual way to put Go code on a host is the standard library's
// helper-process pattern: re-exec the test binary with an environment
// variable naming its role.
//
// Namespace names carry the process id and a per-process counter
// ("gocomm-<pid>-<k>-h0", "gocomm-<pid>-<k>-sw"), so parallel tests and
// parallel test binaries never collide; New removes leftovers of processes
// that are no longer alive. Every Network must be closed.
//
// On systems other than Linux the package compiles, Available returns an
// error wrapping ErrUnavailable and New fails with it.
package netns
