//go:build mpi && cgo

package mpi

// #include "mpi_shim.h"
import "C"

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gocomm/comm/core"
)

// bootstrapLen is the size of the message rank 0 broadcasts: a status
// byte, then "host:port" or an error text.
const bootstrapLen = 1024

// Bootstrap gives the native backend a rendezvous under an MPI launcher
// when MASTER_ADDR is not set: every rank of MPI_COMM_WORLD calls it; rank
// 0 finds a free TCP port (listening on host, or on every interface when
// host is "") and broadcasts "host:port" over MPI, host being the given
// host or else rank 0's hostname. Every rank returns the same MasterAddr
// and MasterPort, plus its rank, size and local rank and size as MPI sees
// them.
//
// Bootstrap initialises MPI if needed and, when no mpi world is open,
// finalises it again before returning: MPI cannot be initialised twice, so
// a program that bootstraps this way cannot open an mpi world afterwards
// (open the world first if it wants both). If ctx ends during the
// broadcast, MPI stays initialised and the error says so.
//
// The port was free when rank 0 looked; the store rank 0 then starts on it
// should bind it at once (another process could take it in between, as
// with any free-port probe).
//
// comm.Init uses it for the native backend when the launcher is MPI's and
// no rendezvous is configured:
//
//	info, err := mpi.Bootstrap(ctx, listenHost)
//	// MASTER_ADDR = info.MasterAddr, MASTER_PORT = info.MasterPort;
//	// rank 0 hosts the TCP store there, the others connect to it.
func Bootstrap(ctx context.Context, host string) (BootstrapInfo, error) {
	var info BootstrapInfo
	if err := proc.acquire(C.MPI_THREAD_FUNNELED); err != nil {
		return info, err
	}
	var comm C.MPI_Comm
	var rc, rank, size, lrank, lsize C.int
	proc.onThread(func() {
		C.gc_world_rank_size(&rank, &size)
		rc = C.gc_local(C.MPI_COMM_WORLD, &lrank, &lsize)
		if rc == C.MPI_SUCCESS {
			var mb, ab C.MPI_Comm
			rc = C.gc_world_open(&comm, &mb, &ab)
			if rc == C.MPI_SUCCESS {
				C.gc_free(&mb)
				C.gc_free(&ab)
			}
		}
	})
	if err := mpiError("MPI_Comm_split_type/MPI_Comm_dup", rc); err != nil {
		proc.release(failedFinalizeWait)
		return info, err
	}
	info.Rank, info.Size, info.LocalRank, info.LocalSize = int(rank), int(size), int(lrank), int(lsize)

	msg := make([]byte, bootstrapLen)
	if rank == 0 {
		addr, err := freeAddr(host)
		if err != nil {
			msg[0] = 1
			copy(msg[1:], err.Error())
		} else {
			copy(msg[1:], addr)
		}
	}
	r, err := newRequest(0)
	if err != nil {
		proc.release(failedFinalizeWait)
		return info, err
	}
	b := r.out(msg)
	proc.onThread(func() { rc = C.gc_ibcast(b, bootstrapLen, dtypeCode(core.Byte), 0, comm, r.c) })
	if err := mpiError("MPI_Ibcast", rc); err != nil {
		r.release()
		return info, err
	}
	var p poller
	for {
		proc.onThread(func() { rc = C.gc_test(r.c) })
		if rc >= 0 {
			break
		}
		if ctx.Err() != nil {
			r.abandon()
			return info, fmt.Errorf("comm: mpi Bootstrap: %w while rank 0's address was being broadcast (MPI stays initialized)", ctx.Err())
		}
		p.pause()
	}
	r.complete(rc == C.MPI_SUCCESS)
	proc.onThread(func() { C.gc_free(&comm) })
	if err := proc.release(failedFinalizeWait); err != nil {
		return info, err
	}
	if err := mpiError("MPI_Ibcast", rc); err != nil {
		return info, err
	}
	text := string(msg[1:])
	if i := strings.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	if msg[0] != 0 {
		return info, fmt.Errorf("comm: mpi Bootstrap: rank 0 could not find a free port: %s", text)
	}
	h, port, err := net.SplitHostPort(text)
	if err != nil {
		return info, fmt.Errorf("comm: mpi Bootstrap: rank 0 sent %q: %w", text, err)
	}
	info.MasterAddr = h
	info.MasterPort, err = strconv.Atoi(port)
	return info, err
}

// freeAddr returns host:port with a port that is free on host.
func freeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if host == "" {
		if host, err = os.Hostname(); err != nil {
			return "", err
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// Available reports whether this build has MPI (true: built with cgo and
// -tags mpi).
func Available() bool { return true }
