//go:build tools

// Package tools pins the OpenTofu CLI as a dependency of this module.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
