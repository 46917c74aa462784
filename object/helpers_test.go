package object_test

import (
	"github.com/gocomm/comm"
	"github.com/gocomm/comm/internal/testkit"
)

func closeAll(w []*comm.Comm) { testkit.CloseAll(w) }
