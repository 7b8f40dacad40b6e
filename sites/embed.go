// Package sites holds the shared site rule files of the task repository (sites/*.yaml, see
// docs/rules.md) and embeds the generic one, _default.yaml, into the pab binary.
//
// The embedded copy lets pab replay a recording outside a task repository. When the sites
// directory that rules.Load reads holds its own _default.yaml (the repository's
// sites/_default.yaml, normally this very file), that file is used instead and the embedded
// copy is ignored; the other files of this directory are read from disk, never embedded.
package sites

import _ "embed"

// Default is the content of sites/_default.yaml at build time: generic tracking
// parameters, ad and analytics hosts, the browser's own background hosts, and the
// cart and checkout pages answered with their last recording.
//
//go:embed _default.yaml
var Default []byte
