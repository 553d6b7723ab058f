package http

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
)

// writeSSE writes one server-sent event of type typ with v as its JSON data
// and id, when not zero, as its id.
func writeSSE(w io.Writer, typ string, id int64, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeSSERaw(w, typ, id, b)
}

// writeSSERaw writes one server-sent event with data already JSON (one
// line: encoding/json never writes a newline inside a value).
func writeSSERaw(w io.Writer, typ string, id int64, data []byte) error {
	var buf bytes.Buffer
	if id != 0 {
		buf.WriteString("id: ")
		buf.WriteString(strconv.FormatInt(id, 10))
		buf.WriteByte('\n')
	}
	buf.WriteString("event: ")
	buf.WriteString(typ)
	buf.WriteString("\ndata: ")
	buf.Write(bytes.ReplaceAll(data, []byte("\n"), []byte(" ")))
	buf.WriteString("\n\n")
	_, err := w.Write(buf.Bytes())
	return err
}
