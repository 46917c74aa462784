package rendezvous

import "net"

// LocalAddr is this client's address on its connection to the server: the
// address of this host that the store's host sees. comm uses it to pick
// the address a rank publishes to the other ranks. It is nil while another
// request holds the connection or none is open.
func (s *TCPStore) LocalAddr() net.Addr {
	select {
	case c := <-s.mainConn:
		s.mainConn <- c
		if c != nil {
			return c.nc.LocalAddr()
		}
	default:
	}
	return nil
}
