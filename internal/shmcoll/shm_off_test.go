//go:build !linux || gocomm_portable

package shmcoll

// portableBuild: this build has no shared-memory transport (see
// transport's portable fallback).
const portableBuild = true
