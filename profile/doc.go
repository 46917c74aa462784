// Package profile is gocomm's comms logger: what DeepSpeed's comms logger
// (deepspeed.comm's comms_logger) is, with its faults fixed. Package comm
// records one Record per profiled operation into a Logger (shared by a world
// and its groups); this package holds the configuration, the formulas, the
// summary table, the JSON form, the straggler analysis and the
// Chrome/Perfetto trace export and merge. It does no communication; the
// comm package gathers what the straggler analysis needs.
//
// # Switching it on
//
// From Go, comm.Options{Profile: &profile.Config{Enabled: true}}; from the
// environment (read by comm.Init when Options.Profile is nil):
//
//	GOCOMM_PROFILE=1                       every op, default settings
//	GOCOMM_PROFILE=ds_config.json          a DeepSpeed config's "comms_logger" block,
//	                                       or a file holding the block alone
//	GOCOMM_PROFILE='{"prof_all": false, "prof_ops": ["all_reduce"]}'
//	GOCOMM_PROFILE_OPS=all_reduce,grads    only these op names or log names
//	GOCOMM_PROFILE_VERBOSE=1               a line per op on world rank 0
//	GOCOMM_PROFILE_DEBUG=1                 the caller's name in every record name
//	GOCOMM_PROFILE_LAYOUT=deepspeed        DeepSpeed's Gbps columns in the summary
//	GOCOMM_TRACE_DIR=/tmp/trace            LogSummary (or Close) leaves each rank's trace there
//
// Then, at the end of the run, every rank calls c.Profiler().LogSummary; rank
// 0 prints the table, and with straggler analysis every rank takes part. A
// program that never calls it gets rank 0's table on Config.Output (stderr)
// and every rank's trace when it closes its world; not the straggler
// analysis, a collective that Close must not wait on.
//
// # Records and formulas
//
// A record holds the op name (or the log name given with comm.WithLogName;
// in debug mode the caller is appended), the message size S in bytes as
// DeepSpeed counts it (MessageSizes), the latency from the Start call to
// completion, and nccl-tests' bandwidths over the op's own communicator of
// n ranks, in GB/s (1e9 bytes per second):
//
//	algbw = T/t      T = S, or every rank's block for (all-)gather and scatter
//	busbw = algbw · 2(n-1)/n   all-reduce
//	        algbw · (n-1)/n    all-gather, reduce-scatter, all-to-all, gather, scatter
//	        algbw              broadcast, reduce, send, recv, barrier
//
// Departures from DeepSpeed, on purpose: its all-reduce "tput" is 2S/t
// (twice nccl-tests' algbw) and here algbw is S/t; its unit is Gbps (bits)
// and here GB/s (bytes) unless LayoutDeepSpeed; its n is the global world
// size even for an op on a group and here the op's communicator size; its
// reduce-scatter bandwidth is n·S/t of the full input S (n times too much)
// and here S/t. LayoutDeepSpeed prints DeepSpeed's columns, Gbps and its
// 2S/t tput, keeping the last two fixes (DeepSpeedBandwidth). Also: enabled
// false is honoured (DeepSpeed turns logging on when the block exists);
// prof_ops matches op names as well as log names (DeepSpeed only explicit
// log names); an unknown op name is profiled with a bus factor of 1
// (DeepSpeed calls exit(0)); timing adds no synchronisation (DeepSpeed
// synchronises the device, and under MPI runs a barrier, after every op,
// which serialises overlapped communication); asynchronous ops are timed
// from their Start call to their completion, whether or when anyone waits;
// the trimmed mean sorts a copy (DeepSpeed sorts in place, which broke its
// straggler pairing); latencies are on the host clock.
//
// The summary (WriteSummary) is DeepSpeed's table: seven left-aligned
// 20-character columns, a line with each record name then one per message
// size (ConvertSize) in ascending order with count, total latency and
// trimmed means (TrimMean: Python's round-half-even trim count) of latency,
// algbw and busbw.
//
// # Stragglers
//
// DeepSpeed's straggler table all-reduces latencies with MIN, which shows
// how long a rank waited but not who kept it waiting. Here each rank records
// when it entered each collective (communicator, sequence number); the
// analysis gathers those arrivals on rank 0, matches them and reports per
// op and size the skew (last arrival minus first) and the rank that came
// last most often, per rank how late it was and how often it would have
// come last by chance, and names a straggler only when one came last
// significantly more often than chance (LastPValue below StragglerAlpha/N
// for N ranks, at least StragglerMinLast times); else it says "no
// straggler".
//
// Object collectives (package object) are recorded under their own names
// (object.Broadcast ...), and the operations they run, with the
// collective as their Record.Parent: the summary nests them under it.
// Ranks on one host share its clock. Ranks on other hosts are compared
// after an NTP-style ping exchange with rank 0 (EstimateOffset), whose error
// is at most half the shortest round trip; ClockSyncOff trusts the hosts'
// clocks instead.
//
// # Traces
//
// WriteTrace writes one rank's records as a Chrome JSON trace that Perfetto
// opens: one complete event per op with its size, algorithm, root or peer,
// communicator and sequence number in args, pid = world rank. MergeTraces
// (and the commtrace command, and MergeTraceDir for launchers) merges the
// ranks' files onto one time line.
package profile
