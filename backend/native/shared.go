package native

// Shared allocations (comm.AllocShared): on a world with a board, memory
// every rank maps (shmcoll.Board.MapShared). From the first one on, an
// all-reduce above the board's size first has the ranks post where their
// buffers are (one small board exchange); when every rank's are shared
// it runs in place (shmcoll.Board.AllReduceShared), else on the stage
// as before.

// AllocShared implements backend.SharedAllocator: nil, nil without a
// board (a group has none).
func (c *Comm) AllocShared(id uint64, size int, agree func(ok bool) error) ([]byte, error) {
	if c.board == nil {
		return nil, nil
	}
	mem, err := c.board.MapShared(id, size, agree)
	if err != nil {
		return nil, err
	}
	c.sharedAllocs.Store(true)
	return mem, nil
}

// FreeShared implements backend.SharedAllocator.
func (c *Comm) FreeShared(mem []byte) error {
	if c.board == nil {
		return nil
	}
	return c.board.UnmapShared(mem)
}

// IsShared implements backend.SharedAllocator.
func (c *Comm) IsShared(mem []byte) bool { return c.board != nil && c.board.IsShared(mem) }
