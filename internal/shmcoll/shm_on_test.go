//go:build linux && !gocomm_portable

package shmcoll

// portableBuild: this build has the shared-memory transport.
const portableBuild = false
