// Package archtest holds no code: its test checks that the imports between pab's packages
// are the ones docs/ARCHITECTURE.md's package table states, so that the one-way order of
// that table (a package imports only packages above it) stays true as the code changes.
package archtest
