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
	"sync"

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
// as many as encoding/json takes: the reader recurses once a level.
const maxDepth = 10000

// Decode decodes the document data into v, a pointer. Struct fields are
// matched by their json tags; a field tagged `required:"true"` must be
// given, and an unsigned one tagged `range` (see Decoder.valueRange) must
// be in that range; a signed one in its type's. null leaves a pointer, list, map or interface empty,
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
	if err := r.value(tok, dst, ""); err != nil {
		return err
	}
	if _, err := r.dec.Token(); !errors.Is(err, io.EOF) {
		return fielderr.New("", "malformed JSON: data after the document (byte %d)", r.dec.InputOffset())
	}
	return nil
}

type reader struct {
	Decoder
	dec   *json.Decoder
	path  []byte // of the value being read, e.g. pdrs[1].pdi
	depth int    // the objects and lists it is in
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

// refuse is an error about the value being read.
func (r *reader) refuse(format string, args ...any) error {
	return fielderr.New(string(r.path), format, args...)
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
func (d Decoder) fold(key string) string {
	if !d.FoldCase {
		return key
	}
	// As bytes.EqualFold, which encoding/json matches with: K and the
	// Kelvin sign, S and the long s alike.
	return strings.ToLower(strings.ToUpper(key))
}

// enter counts a level in, when tok opens an object or a list.
func (r *reader) enter(tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	if r.depth++; r.depth > maxDepth {
		return fielderr.New("", "malformed JSON: nested deeper than %d levels", maxDepth)
	}
	return nil
}

// object reads the members of an object whose { has been read, calling
// member with each key, the path then the member's.
func (r *reader) object(member func(key string) error) error {
	given := map[string]string{} // the keys, by fold
	for r.dec.More() {
		tok, err := r.next()
		if err != nil {
			return err
		}
		key, _ := tok.(string) // Token returns only strings as keys
		n := len(r.path)
		if n > 0 {
			r.path = append(r.path, '.')
		}
		r.path = append(r.path, key...)
		if key == "" { // named, not a path that ends in nothing
			r.path = append(r.path, `""`...)
		}
		switch before, repeated := given[r.fold(key)]; {
		case repeated && before == key:
			return r.refuse("the key %q is given twice", key)
		case repeated:
			return r.refuse("the key %q is given twice, as %q before: keys match whatever their case", key, before)
		}
		given[r.fold(key)] = key
		if err := member(key); err != nil {
			return err
		}
		r.path = r.path[:n]
	}
	r.depth--
	_, err := r.next() // }
	return err
}

// list reads the elements of a list whose [ has been read, calling elem
// with each one's index, the path then the element's.
func (r *reader) list(elem func(i int) error) error {
	for i := 0; r.dec.More(); i++ {
		n := len(r.path)
		r.path = strconv.AppendInt(append(r.path, '['), int64(i), 10)
		r.path = append(r.path, ']')
		if err := elem(i); err != nil {
			return err
		}
		r.path = r.path[:n]
	}
	r.depth--
	_, err := r.next() // ]
	return err
}

// tree reads the value that starts with tok as encoding/json decodes it
// into an any, with json.Number for numbers.
func (r *reader) tree(tok json.Token) (any, error) {
	if err := r.enter(tok); err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		err := r.object(func(key string) error {
			v, err := r.nextTree()
			obj[key] = v
			return err
		})
		return obj, err
	case json.Delim('['):
		list := []any{}
		err := r.list(func(int) error {
			v, err := r.nextTree()
			list = append(list, v)
			return err
		})
		return list, err
	}
	return tok, nil
}

func (r *reader) nextTree() (any, error) {
	tok, err := r.next()
	if err != nil {
		return nil, err
	}
	return r.tree(tok)
}

// nextValue decodes the next value into dst.
func (r *reader) nextValue(dst reflect.Value, rangeTag string) error {
	tok, err := r.next()
	if err != nil {
		return err
	}
	return r.value(tok, dst, rangeTag)
}

// value decodes the value that starts with tok into dst; rangeTag is the
// range tag of dst's field.
func (r *reader) value(tok json.Token, dst reflect.Value, rangeTag string) error {
	if u, ok := dst.Addr().Interface().(Value); ok {
		v, err := r.tree(tok)
		if err != nil {
			return err
		}
		err = u.FromJSON(v)
		var inner *fielderr.Error // about a part of the value
		if err != nil && !errors.As(err, &inner) {
			return r.refuse("%v", err)
		}
		return fielderr.Within(string(r.path), err)
	}
	if u, ok := dst.Addr().Interface().(encoding.TextUnmarshaler); ok {
		text, isString := tok.(string)
		if !isString {
			return r.refuse("must be a string")
		}
		if err := u.UnmarshalText([]byte(text)); err != nil {
			return r.refuse("%v", err)
		}
		return nil
	}
	switch dst.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		if tok == nil {
			return nil // null is absent
		}
	}
	switch dst.Kind() {
	case reflect.Pointer:
		dst.Set(reflect.New(dst.Type().Elem()))
		return r.value(tok, dst.Elem(), rangeTag)
	case reflect.Interface:
		v, err := r.tree(tok)
		if err == nil {
			dst.Set(reflect.ValueOf(v))
		}
		return err
	case reflect.Struct:
		if tok != json.Delim('{') {
			return r.refuse("must be an object")
		}
		return r.structValue(dst)
	case reflect.Map:
		if dst.Type().Key().Kind() != reflect.String {
			break
		}
		if tok != json.Delim('{') {
			return r.refuse("must be an object")
		}
		if err := r.enter(tok); err != nil {
			return err
		}
		dst.Set(reflect.MakeMap(dst.Type()))
		return r.object(func(key string) error {
			elem := reflect.New(dst.Type().Elem()).Elem()
			if err := r.nextValue(elem, rangeTag); err != nil {
				return err
			}
			dst.SetMapIndex(reflect.ValueOf(key).Convert(dst.Type().Key()), elem)
			return nil
		})
	case reflect.Slice:
		if tok != json.Delim('[') {
			return r.refuse("must be a list")
		}
		if err := r.enter(tok); err != nil {
			return err
		}
		dst.Set(reflect.MakeSlice(dst.Type(), 0, 0))
		return r.list(func(i int) error {
			dst.Set(reflect.Append(dst, reflect.New(dst.Type().Elem()).Elem()))
			return r.nextValue(dst.Index(i), rangeTag)
		})
	case reflect.String:
		return set[string](r, tok, dst, "a string")
	case reflect.Bool:
		return set[bool](r, tok, dst, "true or false")
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := dst.Type().Bits()
		low, high := r.valueRange(rangeTag, bits)
		n, ok := tok.(json.Number)
		u, err := strconv.ParseUint(string(n), 10, bits)
		if !ok || err != nil || u < low || u > high {
			return r.refuse("must be an integer from %d to %d", low, high)
		}
		dst.SetUint(u)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := dst.Type().Bits()
		n, ok := tok.(json.Number)
		i, err := strconv.ParseInt(string(n), 10, bits)
		if !ok || err != nil {
			return r.refuse("must be an integer from %d to %d", int64(-1)<<(bits-1), int64(^uint64(0)>>(65-bits)))
		}
		dst.SetInt(i)
		return nil
	}
	panic("strictjson: cannot decode into " + dst.Type().String())
}

// set sets dst to tok, a T: what tok must be otherwise.
func set[T string | bool](r *reader, tok json.Token, dst reflect.Value, what string) error {
	v, ok := tok.(T)
	if !ok {
		return r.refuse("must be %s", what)
	}
	dst.Set(reflect.ValueOf(v).Convert(dst.Type()))
	return nil
}

// fields is what a struct's fields are decoded by.
type fields struct {
	byKey    map[string]int // their indexes, by the fold of their names
	names    []string
	required []bool
	ranges   []string // their range tags
}

// fieldsOf keeps the fields of the struct types decoded.
var fieldsOf sync.Map // of fieldsKey to *fields

type fieldsKey struct {
	t    reflect.Type
	fold bool
}

// fields are the fields of struct type t, matched as d matches keys.
func (d Decoder) fields(t reflect.Type) *fields {
	key := fieldsKey{t, d.FoldCase}
	if f, ok := fieldsOf.Load(key); ok {
		return f.(*fields)
	}
	f := &fields{byKey: map[string]int{}}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		f.byKey[d.fold(name)] = i
		f.names = append(f.names, name)
		f.required = append(f.required, t.Field(i).Tag.Get("required") == "true")
		f.ranges = append(f.ranges, t.Field(i).Tag.Get("range"))
	}
	fieldsOf.Store(key, f)
	return f
}

// structValue decodes an object whose { has been read into dst, a struct.
func (r *reader) structValue(dst reflect.Value) error {
	if err := r.enter(json.Delim('{')); err != nil {
		return err
	}
	f := r.fields(dst.Type())
	given := make([]bool, len(f.names)) // and not null
	err := r.object(func(key string) error {
		i, known := f.byKey[r.fold(key)]
		if !known {
			return r.refuse("unknown field")
		}
		tok, err := r.next()
		if err != nil {
			return err
		}
		given[i] = tok != nil
		return r.value(tok, dst.Field(i), f.ranges[i])
	})
	if err != nil {
		return err
	}
	for i, name := range f.names {
		if f.required[i] && !given[i] {
			return fielderr.New(fielderr.Join(string(r.path), name), "is required")
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

// Decodable says why Decode could not decode every field of v's type, a
// struct: nil when it can. A document that reached a field it cannot
// decode would panic; a test of each type decoded calls this.
func Decodable(v any) error {
	var errs []error
	seen := map[reflect.Type]bool{}
	var walk func(path string, t reflect.Type)
	walk = func(path string, t reflect.Type) {
		if seen[t] {
			return
		}
		seen[t] = true
		if p := reflect.PointerTo(t); p.Implements(reflect.TypeFor[Value]()) || p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) {
			return
		}
		switch t.Kind() {
		case reflect.Pointer:
			walk(path, t.Elem())
		case reflect.Slice:
			walk(path+"[]", t.Elem())
		case reflect.Map:
			if t.Key().Kind() != reflect.String {
				errs = append(errs, fmt.Errorf("%s: a map whose keys are not strings", path))
			}
			walk(path+"{}", t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || name == "" || name == "-" {
					errs = append(errs, fmt.Errorf("%s.%s: no key of its own (json tag %q)", path, f.Name, name))
				}
				walk(fielderr.Join(path, name), f.Type)
			}
		case reflect.Interface, reflect.String, reflect.Bool,
			reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
			reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		default:
			errs = append(errs, fmt.Errorf("%s: a %v", path, t))
		}
	}
	t := reflect.TypeOf(v)
	walk(t.String(), t)
	return errors.Join(errs...)
}
