// Package builtin embeds the built-in scenario files (*.json here), which
// package scenario parses (scenario.Builtin). It is apart from both
// scenario packages so that the files stay where users look for them,
// beside the simulator's runner, and a leaf.
package builtin

import "embed"

// Files holds the built-in scenario files, at the root.
//
//go:embed *.json
var Files embed.FS
