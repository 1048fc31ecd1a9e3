package defrag

import "sort"

// defragOrder is the order members are defragmented in: by name, the leader last, so that
// leadership (which a defragmenting leader cannot serve well) moves at most once.
func defragOrder(names []string, leader string) []string {
	out := append([]string(nil), names...)
	sort.Slice(out, func(i, j int) bool {
		if (out[i] == leader) != (out[j] == leader) {
			return out[j] == leader
		}
		return out[i] < out[j]
	})
	return out
}
