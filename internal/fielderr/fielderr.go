// Package fielderr is the error every validator returns: the field that is
// wrong, by its path in the document or file it came from (pdrs[1].pdi.teid,
// pfcp.node_id), and why. The REST API answers it with 400 and
// {"error": reason, "field": field}.
package fielderr

import (
	"errors"
	"fmt"
)

// Error is a value refused for one of its fields.
type Error struct {
	Field  string // "" for the document as a whole
	Reason string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// New is an Error for field, its reason formatted as by fmt.Sprintf.
func New(field, format string, args ...any) *Error {
	return &Error{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Within is err, when it is an *Error about a part of the value at path,
// with its field named from the document's root; other errors as they are.
func Within(path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return New(Join(path, e.Field), "%s", e.Reason)
	}
	return err
}

// Join is the path of field inside the value at path.
func Join(path, field string) string {
	switch {
	case path == "":
		return field
	case field == "":
		return path
	}
	return path + "." + field
}
