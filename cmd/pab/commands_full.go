//go:build !pab_lite

package main

import "github.com/spf13/cobra"

// heavyCommands are the commands left out of the lite build (-tags pab_lite, the one the
// replay and browser images carry): they pull in the judges' API SDKs (grade, and import
// and record, which check a task's grading), the MCP SDK, chromedp and the Kubernetes
// types, which pab replay, pab browser and the read-only task tools do not need.
func heavyCommands(g *globalFlags) []*cobra.Command {
	return []*cobra.Command{newCheckCmd(g), newGradeCmd(g), newGuardCmd(g), newRunCmd(g), newK8sCmd(g),
		newImportCmd(g), newRecordCmd(g), newRecordingCmd(g), newCompareCmd(g), newViewCmd(g)}
}
