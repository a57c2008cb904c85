package nemesis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// FileVersion is the schedule file format this code reads and writes.
const FileVersion = 1

// File is a fault schedule as stored for replay: the seed and options it was
// drawn from (for the record, and to draw it again), the safety phase it
// covers, and the explicit operations, which alone decide the faults of a
// replay.
type File struct {
	Version int    `json:"version"`
	Seed    uint64 `json:"seed"`
	// Safety is the length of the safety phase the schedule was drawn for
	// (0 for a schedule written by hand).
	Safety  Duration `json:"safety,omitempty"`
	Options Options  `json:"options"`
	Ops     Schedule `json:"ops"`
}

// Marshal writes f as indented JSON, one operation per line.
func (f File) Marshal() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"version\": %d,\n  \"seed\": %d,\n", f.Version, f.Seed)
	if f.Safety != 0 {
		s, _ := json.Marshal(f.Safety)
		fmt.Fprintf(&b, "  \"safety\": %s,\n", s)
	}
	o, err := json.MarshalIndent(f.Options, "  ", "  ")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "  \"options\": %s,\n  \"ops\": [", o)
	for i, op := range f.Ops {
		line, err := json.Marshal(op)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    %s", line)
	}
	if len(f.Ops) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	return b.Bytes(), nil
}

// ParseFile reads a schedule file, rejecting unknown fields, other
// versions, invalid options and malformed operations. Node names are not
// checked: validate f.Ops against the run's nodes (Schedule.Validate).
func ParseFile(b []byte) (File, error) {
	var f File
	if err := decodeStrict(b, &f); err != nil {
		return File{}, err
	}
	if f.Version != FileVersion {
		return File{}, fmt.Errorf("nemesis: schedule file version %d is not supported (this build reads version %d)", f.Version, FileVersion)
	}
	if f.Safety < 0 {
		return File{}, fmt.Errorf("nemesis: safety %v is negative", time.Duration(f.Safety))
	}
	if err := f.Options.Validate(); err != nil {
		return File{}, err
	}
	if err := f.Ops.Check(); err != nil {
		return File{}, err
	}
	return f, nil
}

// Parse reads a schedule — a JSON array of operations — rejecting unknown
// fields and malformed operations with an error that names the operation
// and what to fix. Node names are not checked (Schedule.Validate does that
// against the run's nodes). It never panics, whatever the input.
func Parse(b []byte) (Schedule, error) {
	var s Schedule
	if err := decodeStrict(b, &s); err != nil {
		return nil, err
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown
// fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("nemesis: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("nemesis: trailing data after the JSON value")
	}
	return nil
}
