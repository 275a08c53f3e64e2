package kernels

// implName is the kernel set in use. Only an init() in a build-tagged fast-path
// file (never compiled with the purego tag) may change it, together with the
// dispatch variables it replaces.
var implName = "generic"

// Impl names the active kernel implementation: "generic" for portable Go (always
// the case when built with -tags purego). Tests assert it so a silently
// mis-dispatched build cannot pass for a fast one.
func Impl() string { return implName }
