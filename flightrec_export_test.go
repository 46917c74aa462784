package comm

// StopFlightWatcher stops c's world from answering other ranks' flight
// recorder exchanges, as a rank whose process is gone would.
func StopFlightWatcher(c *Comm) { c.root().flight.stopWatcher() }
