# TFLint's configuration for every module and example (tests/lint.rs runs it on each; scripts/lib.sh,
# ensure_tflint, builds TFLint). The terraform ruleset is the one bundled with TFLint: nothing is downloaded.
config {
  # Local modules are read too, so that a call's arguments are checked against the module's variables.
  call_module_type = "local"
}

plugin "terraform" {
  enabled = true
  preset  = "recommended"
}

# Beyond the recommended preset.
rule "terraform_required_providers" {
  enabled = true
}

rule "terraform_required_version" {
  enabled = true
}

rule "terraform_standard_module_structure" {
  enabled = true
}

rule "terraform_documented_variables" {
  enabled = true
}

rule "terraform_documented_outputs" {
  enabled = true
}

rule "terraform_typed_variables" {
  enabled = true
}

rule "terraform_naming_convention" {
  enabled = true
}

rule "terraform_unused_declarations" {
  enabled = true
}
