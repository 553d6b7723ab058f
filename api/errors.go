package api

import (
	"errors"
	"strconv"
	"strings"
)

// FieldError is one problem with a rule document, at a path such as
// "limits[2].rate". Line is the 1-based line in a YAML or JSON source when it is
// known, otherwise 0.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
}

// Error formats the error as "path: message".
func (e FieldError) Error() string {
	s := e.Message
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	if e.Line > 0 {
		s += " (line " + strconv.Itoa(e.Line) + ")"
	}
	return s
}

// Errors is every problem found in a document, in document order. A nil or
// empty Errors is not returned as an error.
type Errors []FieldError

// Error joins the problems, one per line.
func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

func (es *Errors) add(path, format string, args ...any) {
	*es = append(*es, FieldError{Path: path, Message: sprintf(format, args...)})
}

func (es Errors) err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// AsErrors returns the field errors inside err, or a single path-less
// FieldError holding err's message when err is of another kind.
func AsErrors(err error) Errors {
	if err == nil {
		return nil
	}
	var es Errors
	if errors.As(err, &es) {
		return es
	}
	var fe FieldError
	if errors.As(err, &fe) {
		return Errors{fe}
	}
	return Errors{{Message: err.Error()}}
}
