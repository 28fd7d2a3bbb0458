// Package check holds the CI gates over analyses (torchmem check): byte
// budgets per category, phase and device, a baseline's peaks within a
// tolerance above a noise floor, an OOM, and a roll-up's imbalance. It
// reads results only; the sites of a run and its baseline are matched as
// package diff matches them.
package check
