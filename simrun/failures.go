package simrun

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fencesim/fencesim/report"
	"github.com/fencesim/fencesim/scenarios"
)

// defaultTraceCap caps the trace a run directory keeps. A run's readable
// trace is 0.3–2 MB, but a run that livelocks up to its step limit writes
// hundreds of megabytes (one such miss wrote 647 MB): past the cap the
// directory keeps everything else and says how to produce the trace.
const defaultTraceCap = 16 * mb

// Per sweep: at most this many report directories, about this many bytes.
const (
	defaultKeep    = 20
	defaultKeepCap = 200 * mb
)

// traceNoteFile stands in a run directory for a trace that was not kept.
const traceNoteFile = "trace-not-kept.txt"

// Units of the size flags.
const (
	kb = 1 << 10
	mb = 1 << 20
	gb = 1 << 30
)

// size is a flag value in bytes, written 16MB, 500KB, 1GB or a plain
// number of bytes.
type size int64

func (s *size) String() string {
	switch {
	case *s != 0 && *s%mb == 0:
		return fmt.Sprintf("%dMB", *s/mb)
	case *s != 0 && *s%kb == 0:
		return fmt.Sprintf("%dKB", *s/kb)
	}
	return fmt.Sprintf("%d", int64(*s))
}

func (s *size) Set(v string) error {
	num, unit := v, int64(1)
	for _, u := range []struct {
		suffix string
		n      int64
	}{{"GB", gb}, {"MB", mb}, {"KB", kb}, {"B", 1}} {
		if n, ok := strings.CutSuffix(strings.ToUpper(v), u.suffix); ok {
			num, unit = n, u.n
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return fmt.Errorf("want a size such as 16MB, 500KB or 0, got %q", v)
	}
	*s = size(n * unit)
	return nil
}

// megabytes prints n bytes in MB.
func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/mb) }

// cappedTrace holds a readable trace in memory while it is at most max
// bytes long (0: no limit); past that it frees what it held and only
// counts, so that memory stays bounded whatever the run writes.
type cappedTrace struct {
	max int64
	n   int64
	buf bytes.Buffer
}

func (c *cappedTrace) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	switch {
	case !c.over():
		c.buf.Write(p)
	case c.buf.Cap() > 0:
		c.buf = bytes.Buffer{}
	}
	return len(p), nil
}

func (c *cappedTrace) over() bool { return c.max > 0 && c.n > c.max }

// kept returns the trace, or "" if it outgrew the cap.
func (c *cappedTrace) kept() string {
	if c.over() {
		return ""
	}
	return c.buf.String()
}

// writeRun writes a run's directory (writeRunDir) with the trace if it fit
// under its cap; otherwise without it, and with a note, returned as well,
// that gives its size and the command that prints it.
func writeRun(dir string, res scenarios.Result, j runJSON, trace *cappedTrace) (note string, err error) {
	if err := writeRunDir(dir, res, j, trace.kept()); err != nil {
		return "", err
	}
	notePath := filepath.Join(dir, traceNoteFile)
	if !trace.over() {
		if err := os.Remove(notePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", nil
	}
	cp := size(trace.max)
	note = fmt.Sprintf("trace not kept: %s, over the cap of %s (-trace-cap); print it with: simrun replay -trace %s 2> %s",
		megabytes(trace.n), cp.String(), filepath.Join(dir, "replay.json"), filepath.Join(dir, report.TraceFile))
	return note, os.WriteFile(notePath, []byte(note+"\n"), 0o644)
}

// dirSize adds up the sizes of the files directly in dir.
func dirSize(dir string) int64 {
	entries, _ := os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if info, err := e.Info(); err == nil && !info.IsDir() {
			n += info.Size()
		}
	}
	return n
}

// keeper writes the directories of a sweep's misses under failures/, within
// the sweep's caps: at most maxDirs directories and about maxBytes bytes in
// all (the directory that crosses the cap is the last one), each trace at
// most traceMax bytes. It counts what it skipped so that the sweep can say
// so.
type keeper struct {
	maxDirs            int
	maxBytes, traceMax int64
	stop               func() bool // a stopped sweep stops its reruns too

	dirs                   int
	bytes                  int64
	skipped, tracesOmitted int
}

// keep writes the directory of a missed run, or says why not, in a few
// lines to print under its MISS line.
func (k *keeper) keep(res scenarios.Result) string {
	if k.dirs >= k.maxDirs || k.bytes >= k.maxBytes {
		k.skipped++
		return fmt.Sprintf("not written: the sweep's cap of %d directories / %s is reached (-keep, -keep-cap)", k.maxDirs, megabytes(k.maxBytes))
	}
	traceMax := k.traceMax
	if left := k.maxBytes - k.bytes; traceMax == 0 || left < traceMax {
		traceMax = left
	}
	dir, note, err := keepFailure(res, traceMax, k.stop)
	if errors.Is(err, scenarios.ErrStopped) {
		k.skipped++
		return "not written: the sweep was stopped"
	}
	if err != nil {
		return "could not write its report: " + err.Error()
	}
	k.dirs++
	k.bytes += dirSize(dir)
	line := fmt.Sprintf("report: %s  replay: %s", filepath.Join(dir, report.IndexFile), filepath.Join(dir, "replay.json"))
	if note != "" {
		k.tracesOmitted++
		line += "\n     " + note
	}
	return line
}

// summary says what the sweep kept and skipped, or "" if it wrote nothing.
func (k *keeper) summary() string {
	if k.dirs == 0 && k.skipped == 0 {
		return ""
	}
	dirs := "report directories"
	if k.dirs == 1 {
		dirs = "report directory"
	}
	s := fmt.Sprintf("failures: %d %s under %s/ (%s)", k.dirs, dirs, failuresDir, megabytes(k.bytes))
	if k.tracesOmitted > 0 {
		s += fmt.Sprintf(", %d without their trace (over -trace-cap)", k.tracesOmitted)
	}
	if k.skipped > 0 {
		s += fmt.Sprintf("; %d more misses not written, over the cap of %d directories / %s (raise -keep or -keep-cap, or reproduce each with its line)",
			k.skipped, k.maxDirs, megabytes(k.maxBytes))
	}
	return s
}

// keepFailure runs a missed seed again with its trace on (the run is
// deterministic, so it is the same run) and writes its report, history,
// result and replay file under failures/SCENARIO-seedN/, and its trace if
// it is at most traceMax bytes (0: any size).
func keepFailure(res scenarios.Result, traceMax int64, stop func() bool) (dir, note string, err error) {
	trace := &cappedTrace{max: traceMax}
	again, err := scenarios.RunPlan(res.Plan, scenarios.RunOptions{Trace: trace, Stop: stop})
	if err != nil {
		return "", "", err
	}
	if again.TraceHash != res.TraceHash {
		return "", "", fmt.Errorf("NONDETERMINISM: the rerun's trace hash %016x differs from %016x", again.TraceHash, res.TraceHash)
	}
	dir = filepath.Join(failuresDir, fmt.Sprintf("%s-seed%d", res.Scenario, res.Seed))
	note, err = writeRun(dir, again, toJSON(res.Plan.Spec, again), trace)
	return dir, note, err
}
