// Package jsonkeys finds what encoding/json lets pass in a document: an
// object that gives a key twice, of which it keeps the last value, so that
// the document says one thing to a reader and another to its decoder.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/xdp5g/xdp5g/internal/fielderr"
)

// Unique returns an error naming, by its path in the document (e.g.
// pdrs[1].pdi.teid), the first key that an object of data gives twice;
// nil when there is none. Call it on a document that encoding/json
// decoded: it reports nothing else, and relies on that decoder's limit on
// nesting.
func Unique(data []byte) error { return check(data, func(key string) string { return key }) }

// UniqueFolded is Unique for a document that encoding/json decodes into
// structs, which take a key whatever its case: keys that differ in case
// alone are the same key.
func UniqueFolded(data []byte) error {
	// As bytes.EqualFold, which encoding/json matches with: K and the
	// Kelvin sign, S and the long s alike.
	return check(data, func(key string) string { return strings.ToLower(strings.ToUpper(key)) })
}

func check(data []byte, fold func(string) string) error {
	err := unique(json.NewDecoder(bytes.NewReader(data)), "", fold)
	var repeated *fielderr.Error
	if errors.As(err, &repeated) {
		return repeated
	}
	return nil
}

// unique reads the next value of dec, at path.
func unique(dec *json.Decoder, path string, fold func(string) string) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]string{} // the keys given, by fold
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := tok.(string) // Token returns only strings as keys
			field := key
			if path != "" {
				field = path + "." + key
			}
			switch before, repeated := seen[fold(key)]; {
			case repeated && before == key:
				return fielderr.New(field, "the key %q is given twice", key)
			case repeated:
				return fielderr.New(field, "the key %q is given twice, as %q before: keys match whatever their case", key, before)
			}
			seen[fold(key)] = key
			if err := unique(dec, field, fold); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := unique(dec, fmt.Sprintf("%s[%d]", path, i), fold); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
