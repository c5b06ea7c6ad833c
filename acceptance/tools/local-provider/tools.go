//go:build tools

// Package tools pins the hashicorp/local provider as a dependency of this module.
package tools

import _ "github.com/terraform-providers/terraform-provider-local"
