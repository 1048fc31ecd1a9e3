package localcluster

// HasMarker reports whether process pid carries marker (KEY=VALUE) in its environment, so a
// caller can signal a recorded pid without hitting an unrelated process that reused it.
func HasMarker(pid int, marker string) bool { return hasEnvEntry(pid, marker) }
