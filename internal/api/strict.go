package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/xdp5g/xdp5g/internal/classify/classifyxdp"
	"github.com/xdp5g/xdp5g/internal/fielderr"
	"github.com/xdp5g/xdp5g/internal/jsonkeys"
)

// jsonValue is a type that checks and takes a decoded JSON value itself
// (the PFCP enumerations).
type jsonValue interface {
	fromJSON(v any) error
}

// decodeStrict decodes one JSON document into v. Unlike encoding/json it
// rejects unknown and case-mismatched fields, missing required ones (tag
// `required:"true"`), keys an object gives twice and numbers outside their
// field's range (tag `range`, see valueRange), and every error names the
// offending field by its path in the document, e.g. pdrs[1].pdi.teid.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		var syntax *json.SyntaxError
		switch {
		case errors.Is(err, io.EOF):
			return fielderr.New("", "the body is empty; expected a JSON document")
		case errors.As(err, &syntax):
			return fielderr.New("", "malformed JSON at byte %d: %v", syntax.Offset, err)
		}
		return fielderr.New("", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fielderr.New("", "malformed JSON: data after the document (byte %d)", dec.InputOffset())
	}
	if err := jsonkeys.Unique(data); err != nil {
		return err
	}
	if _, isObj := tree.(map[string]any); !isObj && reflect.ValueOf(v).Elem().Kind() == reflect.Struct {
		return fielderr.New("", "the document must be a JSON object, {…}")
	}
	return assign("", tree, reflect.ValueOf(v).Elem(), "")
}

// namedRanges are the ranges a `range` tag names, those of values the data
// path bounds.
var namedRanges = map[string][2]uint64{"slice": {0, uint64(classifyxdp.MaxSlices) - 1}}

// valueRange is the range of an unsigned field of bits: its type's, or
// the narrower one its tag gives, "low..high" or a name of namedRanges.
// On a list the tag is its elements'.
func valueRange(tag string, bits int) (low, high uint64) {
	if tag == "" {
		return 0, ^uint64(0) >> (64 - bits)
	}
	if r, ok := namedRanges[tag]; ok {
		return r[0], r[1]
	}
	lowText, highText, _ := strings.Cut(tag, "..")
	low, err := strconv.ParseUint(lowText, 10, bits)
	if err == nil {
		high, err = strconv.ParseUint(highText, 10, bits)
	}
	if err != nil || low > high {
		panic("api: bad range tag " + strconv.Quote(tag))
	}
	return low, high
}

// assign decodes src into dst; rangeTag is the range tag of dst's field.
func assign(path string, src any, dst reflect.Value, rangeTag string) error {
	if u, ok := dst.Addr().Interface().(jsonValue); ok {
		err := u.fromJSON(src)
		var inner *fielderr.Error // about a part of the value
		if errors.As(err, &inner) {
			return fielderr.New(join(path, inner.Field), "%s", inner.Reason)
		}
		if err != nil {
			return fielderr.New(path, "%v", err)
		}
		return nil
	}
	if u, ok := dst.Addr().Interface().(encoding.TextUnmarshaler); ok {
		text, isString := src.(string)
		if !isString {
			return fielderr.New(path, "must be a string")
		}
		if err := u.UnmarshalText([]byte(text)); err != nil {
			return fielderr.New(path, "%v", err)
		}
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer:
		if src == nil {
			return nil // null is absent
		}
		dst.Set(reflect.New(dst.Type().Elem()))
		return assign(path, src, dst.Elem(), rangeTag)
	case reflect.Struct:
		obj, ok := src.(map[string]any)
		if !ok {
			return fielderr.New(path, "must be an object")
		}
		return assignStruct(path, obj, dst)
	case reflect.Slice:
		list, ok := src.([]any)
		if !ok {
			return fielderr.New(path, "must be a list")
		}
		dst.Set(reflect.MakeSlice(dst.Type(), len(list), len(list)))
		for i, elem := range list {
			if err := assign(fmt.Sprintf("%s[%d]", path, i), elem, dst.Index(i), rangeTag); err != nil {
				return err
			}
		}
		return nil
	case reflect.String:
		s, ok := src.(string)
		if !ok {
			return fielderr.New(path, "must be a string")
		}
		dst.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := src.(bool)
		if !ok {
			return fielderr.New(path, "must be true or false")
		}
		dst.SetBool(b)
		return nil
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := dst.Type().Bits()
		low, high := valueRange(rangeTag, bits)
		n, ok := src.(json.Number)
		u, err := strconv.ParseUint(string(n), 10, bits)
		if !ok || err != nil || u < low || u > high {
			return fielderr.New(path, "must be an integer from %d to %d", low, high)
		}
		dst.SetUint(u)
		return nil
	}
	panic("api: decodeStrict cannot decode into " + dst.Type().String())
}

func assignStruct(path string, obj map[string]any, dst reflect.Value) error {
	t := dst.Type()
	known := map[string]bool{}
	for i := range t.NumField() {
		known[jsonName(t.Field(i))] = true
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !known[k] {
			return fielderr.New(join(path, k), "unknown field")
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(f)
		v, present := obj[name]
		if !present {
			if f.Tag.Get("required") == "true" {
				return fielderr.New(join(path, name), "is required")
			}
			continue
		}
		if err := assign(join(path, name), v, dst.Field(i), f.Tag.Get("range")); err != nil {
			return err
		}
	}
	return nil
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}
