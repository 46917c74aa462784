// Package testkit holds what the tests of several gocomm packages need
// alike. It is imported by tests only.
package testkit
