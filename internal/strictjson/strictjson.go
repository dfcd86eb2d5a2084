// Package strictjson decodes a JSON document refusing what encoding/json
// lets pass: unknown fields, an object that gives a key twice (of which
// encoding/json keeps the last value, so that the document says one thing
// to a reader and another to its decoder), numbers outside their field's
// range and data after the document. It reads the document once, token by
// token, and every error names the field at fault by its path in the
// document, e.g. pdrs[1].pdi.teid.
package strictjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Value is a type that checks and takes a decoded JSON value itself: nil,
// a bool, a json.Number, a string, []any or map[string]any. An error that
// is a *fielderr.Error names a part of the value.
type Value interface {
	FromJSON(v any) error
}

// Decoder decodes documents. Its zero value matches keys to fields as
// they are written.
type Decoder struct {
	// FoldCase matches keys to fields whatever their case, as encoding/json
	// does: keys that differ in case alone are then the same key, given
	// twice.
	FoldCase bool
	// Ranges are the ranges a `range` tag may name: bounds kept elsewhere.
	Ranges map[string][2]uint64
}

// maxDepth is how many levels of objects and lists a document may nest,
// as many as encoding/json takes: the decoder recurses once a level.
const maxDepth = 10000

// tooDeep refuses an object or a list that tok opens inside depth others
// when that makes more than maxDepth levels.
func tooDeep(tok json.Token, depth int) error {
	if depth >= maxDepth && (tok == json.Delim('{') || tok == json.Delim('[')) {
		return fielderr.New("", "malformed JSON: nested deeper than %d levels", maxDepth)
	}
	return nil
}

// Decode decodes the document data into v, a pointer. Struct fields are
// matched by their json tags; a field tagged `required:"true"` must be
// given, and an unsigned one tagged `range` (see Decoder.valueRange) must
// be in that range. null leaves a pointer, list, map or interface empty,
// as if it were not given.
func (d Decoder) Decode(data []byte, v any) error {
	r := &reader{Decoder: d, dec: json.NewDecoder(bytes.NewReader(data))}
	r.dec.UseNumber()
	dst := reflect.ValueOf(v).Elem()
	tok, err := r.dec.Token()
	if errors.Is(err, io.EOF) {
		return fielderr.New("", "the body is empty; expected a JSON document")
	}
	if err != nil {
		return malformed(err)
	}
	if tok != json.Delim('{') && dst.Kind() == reflect.Struct {
		return fielderr.New("", "the document must be a JSON object, {…}")
	}
	if err := r.value("", tok, dst, "", 0); err != nil {
		return err
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return fielderr.New("", "malformed JSON: data after the document (byte %d)", r.dec.InputOffset())
	}
	return nil
}

type reader struct {
	Decoder
	dec *json.Decoder
}

// malformed is the error of a document that is not JSON.
func malformed(err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fielderr.New("", "malformed JSON: unexpected EOF")
	case errors.As(err, &syntax):
		return fielderr.New("", "malformed JSON at byte %d: %v", syntax.Offset, err)
	}
	return fielderr.New("", "malformed JSON: %v", err)
}

// next is the next token inside the document.
func (r *reader) next() (json.Token, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	return tok, nil
}

// fold is what a key is matched by.
func (r *reader) fold(key string) string {
	if !r.FoldCase {
		return key
	}
	// As bytes.EqualFold, which encoding/json matches with: K and the
	// Kelvin sign, S and the long s alike.
	return strings.ToLower(strings.ToUpper(key))
}

// object reads the members of an object whose { has been read, calling
// member with each key and its path.
func (r *reader) object(path string, member func(key, field string) error) error {
	given := map[string]string{} // the keys, by fold
	for r.dec.More() {
		tok, err := r.next()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // Token returns only strings as keys
		field := fielderr.Join(path, key)
		switch before, repeated := given[r.fold(key)]; {
		case repeated && before == key:
			return fielderr.New(field, "the key %q is given twice", key)
		case repeated:
			return fielderr.New(field, "the key %q is given twice, as %q before: keys match whatever their case", key, before)
		}
		given[r.fold(key)] = key
		if err := member(key, field); err != nil {
			return err
		}
	}
	_, err := r.next() // }
	return err
}

// list reads the elements of a list whose [ has been read, calling elem
// with each one's index and path.
func (r *reader) list(path string, elem func(i int, field string) error) error {
	for i := 0; r.dec.More(); i++ {
		if err := elem(i, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	_, err := r.next() // ]
	return err
}

// tree reads the value that starts with tok as encoding/json decodes it
// into an any, with json.Number for numbers.
func (r *reader) tree(path string, tok json.Token, depth int) (any, error) {
	if err := tooDeep(tok, depth); err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		err := r.object(path, func(key, field string) error {
			v, err := r.nextTree(field, depth+1)
			obj[key] = v
			return err
		})
		return obj, err
	case json.Delim('['):
		list := []any{}
		err := r.list(path, func(_ int, field string) error {
			v, err := r.nextTree(field, depth+1)
			list = append(list, v)
			return err
		})
		return list, err
	}
	return tok, nil
}

func (r *reader) nextTree(path string, depth int) (any, error) {
	tok, err := r.next()
	if err != nil {
		return nil, err
	}
	return r.tree(path, tok, depth)
}

// nextValue decodes the next value into dst.
func (r *reader) nextValue(path string, dst reflect.Value, rangeTag string, depth int) error {
	tok, err := r.next()
	if err != nil {
		return err
	}
	return r.value(path, tok, dst, rangeTag, depth)
}

// value decodes the value that starts with tok into dst; rangeTag is the
// range tag of dst's field.
func (r *reader) value(path string, tok json.Token, dst reflect.Value, rangeTag string, depth int) error {
	if err := tooDeep(tok, depth); err != nil {
		return err
	}
	if u, ok := dst.Addr().Interface().(Value); ok {
		v, err := r.tree(path, tok, depth)
		if err != nil {
			return err
		}
		err = u.FromJSON(v)
		var inner *fielderr.Error // about a part of the value
		if err != nil && !errors.As(err, &inner) {
			return fielderr.New(path, "%v", err)
		}
		return fielderr.Within(path, err)
	}
	if u, ok := dst.Addr().Interface().(encoding.TextUnmarshaler); ok {
		text, isString := tok.(string)
		if !isString {
			return fielderr.New(path, "must be a string")
		}
		if err := u.UnmarshalText([]byte(text)); err != nil {
			return fielderr.New(path, "%v", err)
		}
		return nil
	}
	if tok == nil {
		switch dst.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
			return nil // null is absent
		}
	}
	switch dst.Kind() {
	case reflect.Pointer:
		dst.Set(reflect.New(dst.Type().Elem()))
		return r.value(path, tok, dst.Elem(), rangeTag, depth)
	case reflect.Interface:
		v, err := r.tree(path, tok, depth)
		if err == nil {
			dst.Set(reflect.ValueOf(v))
		}
		return err
	case reflect.Struct:
		if tok != json.Delim('{') {
			return fielderr.New(path, "must be an object")
		}
		return r.structValue(path, dst, depth)
	case reflect.Map:
		if dst.Type().Key().Kind() != reflect.String {
			break
		}
		if tok != json.Delim('{') {
			return fielderr.New(path, "must be an object")
		}
		dst.Set(reflect.MakeMap(dst.Type()))
		return r.object(path, func(key, field string) error {
			elem := reflect.New(dst.Type().Elem()).Elem()
			if err := r.nextValue(field, elem, rangeTag, depth+1); err != nil {
				return err
			}
			dst.SetMapIndex(reflect.ValueOf(key).Convert(dst.Type().Key()), elem)
			return nil
		})
	case reflect.Slice:
		if tok != json.Delim('[') {
			return fielderr.New(path, "must be a list")
		}
		dst.Set(reflect.MakeSlice(dst.Type(), 0, 0))
		return r.list(path, func(i int, field string) error {
			dst.Set(reflect.Append(dst, reflect.New(dst.Type().Elem()).Elem()))
			return r.nextValue(field, dst.Index(i), rangeTag, depth+1)
		})
	case reflect.String:
		return set[string](path, tok, dst, "a string")
	case reflect.Bool:
		return set[bool](path, tok, dst, "true or false")
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := dst.Type().Bits()
		low, high := r.valueRange(rangeTag, bits)
		n, ok := tok.(json.Number)
		u, err := strconv.ParseUint(string(n), 10, bits)
		if !ok || err != nil || u < low || u > high {
			return fielderr.New(path, "must be an integer from %d to %d", low, high)
		}
		dst.SetUint(u)
		return nil
	}
	panic("strictjson: cannot decode into " + dst.Type().String())
}

// set sets dst to tok, a T: what tok must be otherwise.
func set[T string | bool](path string, tok json.Token, dst reflect.Value, what string) error {
	v, ok := tok.(T)
	if !ok {
		return fielderr.New(path, "must be %s", what)
	}
	dst.Set(reflect.ValueOf(v).Convert(dst.Type()))
	return nil
}

// structValue decodes an object whose { has been read into dst, a struct.
func (r *reader) structValue(path string, dst reflect.Value, depth int) error {
	t := dst.Type()
	fields := map[string]int{} // by the fold of their names
	for i := range t.NumField() {
		fields[r.fold(jsonName(t.Field(i)))] = i
	}
	given := map[string]bool{} // the fields given, not null
	err := r.object(path, func(key, field string) error {
		i, known := fields[r.fold(key)]
		if !known {
			return fielderr.New(field, "unknown field")
		}
		tok, err := r.next()
		if err != nil {
			return err
		}
		given[jsonName(t.Field(i))] = tok != nil
		return r.value(field, tok, dst.Field(i), t.Field(i).Tag.Get("range"), depth+1)
	})
	if err != nil {
		return err
	}
	for i := range t.NumField() {
		if name := jsonName(t.Field(i)); t.Field(i).Tag.Get("required") == "true" && !given[name] {
			return fielderr.New(fielderr.Join(path, name), "is required")
		}
	}
	return nil
}

// valueRange is the range of an unsigned field of bits: its type's, or
// the narrower one its tag gives, "low..high" or a name of Ranges. On a
// list or a map the tag is its elements'.
func (d Decoder) valueRange(tag string, bits int) (low, high uint64) {
	if tag == "" {
		return 0, ^uint64(0) >> (64 - bits)
	}
	if r, ok := d.Ranges[tag]; ok {
		return r[0], r[1]
	}
	lowText, highText, _ := strings.Cut(tag, "..")
	low, err := strconv.ParseUint(lowText, 10, bits)
	if err == nil {
		high, err = strconv.ParseUint(highText, 10, bits)
	}
	if err != nil || low > high {
		panic("strictjson: bad range tag " + strconv.Quote(tag))
	}
	return low, high
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
