// Package testkit holds the scaffolding that the tests of several gocomm
// packages need alike, so that each package's tests say only what they
// check:
//
//   - LockedBuffer, a buffer that child processes' output and loggers
//     write while the test reads it;
//   - Main, MainErr, Status and RankCommand, for tests that re-run the
//     test binary as a rank: a TestMain that runs the role an environment
//     variable names instead of the tests, and the command that starts
//     such a rank in an environment free of launcher variables
//     (LauncherFreeEnv); FreePort for the meeting place's port;
//   - Binary, the command or example under test, built once;
//   - Context, a deadline for a test's ranks that ends with the test;
//   - World, CloseAll, OnEveryRank and NoErrors, for worlds whose ranks
//     all live in this process (communicators or endpoints alike).
//
// Data flow: none of its own; it starts processes and goroutines for the
// test that calls it and hands their results back.
//
// Who may import it: tests only, of any package. It imports no gocomm
// package, so that the packages below the root (transport, rendezvous) can
// use it without a cycle; helpers that need the public API are generic
// over it instead.
package testkit
