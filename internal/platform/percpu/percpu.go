// Package percpu adds up the values of per-CPU BPF maps, which hold one
// value for each possible CPU.
package percpu

import (
	"fmt"
	"reflect"

	"github.com/cilium/ebpf"
)

// Sum is the sum over the CPUs of the value at key in a per-CPU map.
func Sum[V any](m *ebpf.Map, key any) (V, error) {
	var perCPU []V
	if err := m.Lookup(key, &perCPU); err != nil {
		var zero V
		return zero, err
	}
	return Total(perCPU), nil
}

// Total adds values field by field: V is an unsigned integer, or a struct
// or array of them (a counter as bpf2go generates it), whose unexported
// fields, padding, are left out.
func Total[V any](values []V) V {
	var sum V
	s := reflect.ValueOf(&sum).Elem()
	for i := range values {
		add(s, reflect.ValueOf(&values[i]).Elem())
	}
	return sum
}

func add(sum, v reflect.Value) {
	switch sum.Kind() {
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		sum.SetUint(sum.Uint() + v.Uint())
	case reflect.Struct:
		for i := range sum.NumField() {
			if sum.Type().Field(i).IsExported() {
				add(sum.Field(i), v.Field(i))
			}
		}
	case reflect.Array:
		for i := range sum.Len() {
			add(sum.Index(i), v.Index(i))
		}
	default:
		panic(fmt.Sprintf("percpu: cannot add values of %s", sum.Type()))
	}
}
