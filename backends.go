package comm

// The backends a gocomm binary can open by name (Options.Backend,
// GOCOMM_BACKEND). native is the default and always present; mpi is a
// pure-Go stub that explains how to rebuild unless the binary is built with
// cgo and -tags mpi.
import (
	_ "github.com/gocomm/comm/backend/mpi"
	_ "github.com/gocomm/comm/backend/native"
)
