// Package cpubind binds a rank's process to its share of the host's CPUs,
// as mpirun does by default (--bind-to core for two ranks or fewer): each
// of a host's local ranks gets its own contiguous block of the CPUs the
// launcher could use, so that two ranks that spin while they wait for each
// other never share a CPU. Without it the kernel may put both on one CPU
// for tens of milliseconds (each keeps the other's cache warm, so neither
// is migrated), and any other busy process turns every wait into a
// scheduler slice, making a small collective an order of magnitude
// slower than bound (docs/performance.md).
//
// The setting is GOCOMM_BIND (read by comm.Init; commrun, launch.Spawn
// and commbench set it to auto for the ranks they start unless the
// environment already has it):
//
//	none, ""  leave the process's CPUs as they are
//	auto      local rank r of n gets block r of n equal blocks of the CPUs
//	          the process may run on at start (CPU i of k goes to block
//	          i*n/k); when n exceeds k (ranks outnumber CPUs: they must
//	          share, and yield to each other) the rank's GOMAXPROCS is its
//	          share, k/n but at least 1, and when k divides n rank r is
//	          bound to CPU r mod k (as mpirun maps ranks by core), else
//	          nothing is bound
//	0-3,8     exactly these CPUs (a list as taskset -c takes)
//
// Two jobs on one host both split the CPUs they may use from the first:
// start each launcher on CPUs of its own (taskset -c 0-3 commrun ...,
// taskset -c 4-7 commrun ...) or leave them unbound (commrun -bind-to
// none), as with mpirun --bind-to none.
//
// Binding applies to every thread of the process (the Go runtime's too);
// threads started later inherit it, and GOMAXPROCS follows it (comm.Init
// sets both), unless the program chose GOMAXPROCS itself (the variable, or
// a call before Init). Linux only; elsewhere auto does nothing and a list
// is an error.
package cpubind
