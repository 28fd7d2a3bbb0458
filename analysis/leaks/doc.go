// Package leaks finds memory that grows step after step in a replayed
// history: retained autograd graphs, growing lists, reference cycles and
// step growth, each with its site, the steps it was seen in, its evidence
// and its remedy. It reads the histories only (package history) and writes
// result.Leak findings; package analysis runs it beside its other passes.
package leaks
