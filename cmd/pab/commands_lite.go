//go:build pab_lite

package main

import "github.com/spf13/cobra"

// heavyCommands is empty in the lite build (-tags pab_lite): see commands_full.go.
func heavyCommands(*globalFlags) []*cobra.Command { return nil }
