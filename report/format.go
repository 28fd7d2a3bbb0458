package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/torchmem/torchmem/analysis/estimate"
	"github.com/torchmem/torchmem/check"
	"github.com/torchmem/torchmem/diff"
	"github.com/torchmem/torchmem/result"
	"github.com/torchmem/torchmem/rollup"
	"github.com/torchmem/torchmem/snapshot"
)

// Format is an output format by the name --format takes.
type Format string

// The output formats; a kind of result offers those its table lists.
const (
	FormatText     Format = "text"     // for a terminal
	FormatMarkdown Format = "markdown" // for a bug ticket or a pull request
	FormatJSON     Format = "json"     // for programs, with exact figures
	FormatHTML     Format = "html"     // a self-contained page
)

// Options is what a writer may use besides the result; each writer reads
// only its own fields.
type Options struct {
	// Top is how many allocation sites text lists per device (analyses,
	// and the ranks a roll-up shows in full).
	Top int
	// Keep, for a roll-up, keeps the results of the ranks it shows in full
	// as they arrive (nil: none).
	Keep *rollup.Keeper
	// HTML sets up an HTML page.
	HTML HTMLOptions
}

// WriteFunc writes a result of type T on w.
type WriteFunc[T any] func(w io.Writer, v T, o Options) error

// Writer is one output format of one kind of result. Write is a
// WriteFunc, or for a roll-up, whose inputs arrive one by one, a function
// that starts a RollupWriter.
type Writer[F any] struct {
	Format Format
	Write  F
}

// Writers are a kind of result's output formats, in the order the
// command's help lists them (the first is the default). A new output
// format is one row in the table of each kind of result it can write.
type Writers[F any] []Writer[F]

// Names lists the formats, in order.
func (ws Writers[F]) Names() []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w.Format)
	}
	return out
}

// Lookup finds the writer of a format by name; the error names the
// formats there are.
func (ws Writers[F]) Lookup(name string) (Writer[F], error) {
	for _, w := range ws {
		if string(w.Format) == name {
			return w, nil
		}
	}
	return Writer[F]{}, fmt.Errorf("%q: want one of %s", name, strings.Join(ws.Names(), ", "))
}

// Analyses write analyze's results of one or a few inputs: JSON one
// document for them all, text and Markdown each result in turn with a
// blank line between.
var Analyses = Writers[WriteFunc[[]*result.Result]]{
	{FormatText, eachOf(func(w io.Writer, r *result.Result, o Options) error { return TextTop(w, r, o.Top) })},
	{FormatMarkdown, eachOf(func(w io.Writer, r *result.Result, _ Options) error { return Markdown(w, r) })},
	{FormatJSON, ignoreOptions(JSON)},
}

// Checks write check's verdicts (the CI outputs, JUnit and GitHub
// annotations, are a file and lines of their own beside these).
var Checks = Writers[WriteFunc[[]*check.Result]]{
	{FormatText, ignoreOptions(CheckText)},
	{FormatMarkdown, ignoreOptions(CheckMarkdown)},
	{FormatJSON, ignoreOptions(CheckJSON)},
}

// Diffs write diff's comparison of two results.
var Diffs = Writers[WriteFunc[*diff.Result]]{
	{FormatText, ignoreOptions(DiffText)},
	{FormatMarkdown, ignoreOptions(DiffMarkdown)},
	{FormatJSON, ignoreOptions(DiffJSON)},
}

// Estimates write estimate's plan.
var Estimates = Writers[WriteFunc[*estimate.Result]]{
	{FormatText, ignoreOptions(EstimateText)},
	{FormatMarkdown, ignoreOptions(EstimateMarkdown)},
	{FormatJSON, ignoreOptions(EstimateJSON)},
}

// Infos write info's summaries: JSON one document for them all, text each
// summary in turn with a blank line between.
var Infos = Writers[WriteFunc[[]snapshot.Summary]]{
	{FormatText, eachOf(func(w io.Writer, s snapshot.Summary, _ Options) error { return InfoText(w, s) })},
	{FormatJSON, ignoreOptions(InfoJSON)},
}

// RollupWriter writes a roll-up of many inputs while their results arrive.
type RollupWriter interface {
	// Input takes the next input's result, in input order.
	Input(r *result.Result) error
	// Finish writes what is left once every input is in.
	Finish(ru *rollup.Rollup) error
}

// Rollups write a roll-up of many ranks: JSON streams each input's result
// out as it arrives (only the one being written is held); the others
// write the roll-up at the end, text and Markdown with the ranks o.Keep
// kept in full.
var Rollups = Writers[func(w io.Writer, o Options) RollupWriter]{
	{FormatText, atEnd(func(w io.Writer, ru *rollup.Rollup, o Options) error {
		return RollupText(w, ru, keptDetails(o.Keep, ru), o.Top)
	})},
	{FormatMarkdown, atEnd(func(w io.Writer, ru *rollup.Rollup, o Options) error {
		return RollupMarkdown(w, ru, keptDetails(o.Keep, ru))
	})},
	{FormatJSON, func(w io.Writer, _ Options) RollupWriter { return NewRollupJSON(w) }},
	{FormatHTML, atEnd(func(w io.Writer, ru *rollup.Rollup, o Options) error { return RollupHTML(w, ru, o.HTML) })},
}

// rollupAtEnd is a RollupWriter that writes nothing until Finish; it
// offers each result to o.Keep.
type rollupAtEnd struct {
	w     io.Writer
	o     Options
	write WriteFunc[*rollup.Rollup]
}

func (r rollupAtEnd) Input(res *result.Result) error {
	if r.o.Keep != nil {
		r.o.Keep.Offer(res)
	}
	return nil
}

func (r rollupAtEnd) Finish(ru *rollup.Rollup) error { return r.write(r.w, ru, r.o) }

// atEnd makes a roll-up writer of a WriteFunc.
func atEnd(write WriteFunc[*rollup.Rollup]) func(io.Writer, Options) RollupWriter {
	return func(w io.Writer, o Options) RollupWriter { return rollupAtEnd{w, o, write} }
}

// ignoreOptions adapts a writer that needs no options.
func ignoreOptions[T any](write func(io.Writer, T) error) WriteFunc[T] {
	return func(w io.Writer, v T, _ Options) error { return write(w, v) }
}

// eachOf writes items one after another, a blank line between them.
func eachOf[T any](write WriteFunc[T]) WriteFunc[[]T] {
	return func(w io.Writer, items []T, o Options) error {
		for i, it := range items {
			if i > 0 {
				if _, err := io.WriteString(w, "\n"); err != nil {
					return err
				}
			}
			if err := write(w, it, o); err != nil {
				return err
			}
		}
		return nil
	}
}

// keptDetails are the results k kept to show in full after ru (none
// without a Keeper).
func keptDetails(k *rollup.Keeper, ru *rollup.Rollup) []rollup.Detail {
	if k == nil {
		return nil
	}
	return k.Details(ru)
}
