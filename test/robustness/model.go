package robustness

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerModel is etcd's key-value store seen one key at a time: a register holding the
// key's value ("" while absent). Linearizability is local, so a history of single-key
// operations is linearizable exactly when each key's history is, and checking key by key
// keeps the search small.
var registerModel = porcupine.Model{
	Partition: partitionByKey,
	Init:      func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		return step(state.(string), in.(Input), out.(Output))
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(Input), out.(Output)
		return fmt.Sprintf("%s %s %q (expected %q) -> %+v", i.Kind, i.Key, i.Value, i.Expected, o)
	},
}

// step is one operation applied to a key holding value: whether the answer is possible,
// and the value after it. An unknown answer is a write that may have been applied; since it
// returns at Pending, the checker may also place it after everything else, which is the
// same as never.
func step(value string, in Input, out Output) (bool, string) {
	switch in.Kind {
	case Put:
		return true, in.Value
	case Get:
		return out.Value == value, value
	case CAS:
		holds := value == in.Expected
		switch {
		case out.Unknown && holds:
			return true, in.Value
		case out.Unknown:
			return true, value
		case out.Succeeded:
			return holds, in.Value
		default:
			return !holds && out.Value == value, value
		}
	}
	return false, value
}

func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(Input).Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

// Linearizability is the checker's verdict on a history.
type Linearizability struct {
	Operations int
	// Violations counts keys whose history no sequential order explains.
	Violations int
	// Keys names them, with their operations, for the report.
	Keys []string
	// Unknown is true when the checker ran out of time: neither proven nor refuted.
	Unknown bool
}

// CheckLinearizable checks the operations against the register model, key by key, within
// timeout per key.
func CheckLinearizable(ops []Operation, timeout time.Duration) Linearizability {
	verdict := Linearizability{Operations: len(ops)}
	for _, part := range partitionByKey(toPorcupine(ops)) {
		model := registerModel
		model.Partition = nil
		switch porcupine.CheckOperationsTimeout(model, part, timeout) {
		case porcupine.Illegal:
			verdict.Violations++
			verdict.Keys = append(verdict.Keys, describe(part))
		case porcupine.Unknown:
			verdict.Unknown = true
		}
	}
	return verdict
}

func toPorcupine(ops []Operation) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return})
	}
	return out
}

// describe names a key and its first operations, enough to look the key up in the log.
func describe(part []porcupine.Operation) string {
	key := part[0].Input.(Input).Key
	return fmt.Sprintf("%s (%d operations)", key, len(part))
}
