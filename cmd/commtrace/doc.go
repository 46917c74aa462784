// Command commtrace merges the per-rank Chrome/Perfetto traces of gocomm's
// comms logger into one trace that Perfetto (ui.perfetto.dev) or
// chrome://tracing opens, with one process per rank on one time line.
//
//	commtrace -o trace.json /tmp/trace                # every gocomm-trace-rank*.json in a directory
//	commtrace -o trace.json rank0.json rank1.json     # named files
//
// Ranks write their traces with c.Profiler().WriteTraceFile, or from
// LogSummary when GOCOMM_TRACE_DIR is set. The logic is
// profile.MergeTraceFiles.
//
// Who may import it: nobody (a command). It imports package profile, and
// holds flags only.
package main
