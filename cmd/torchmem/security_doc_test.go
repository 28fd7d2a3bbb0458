package main

import (
	"testing"

	"github.com/torchmem/torchmem/internal/snapshottest"
)

// TestSecurityBounds: SECURITY.md states the bounds of --config, of
// record's status files and of a run's output as the code has them.
func TestSecurityBounds(t *testing.T) {
	snapshottest.CheckSecurityBounds(t, "main.", map[string]int64{
		"maxConfigBytes":      maxConfigBytes,
		"maxConfigNodes":      maxConfigNodes,
		"maxStatusBytes":      maxStatusBytes,
		"configAllocBase":     configAllocBase,
		"configAllocPerByte":  configAllocPerByte,
		"textBudgetBase":      textBudgetBase,
		"textBudgetPerByte":   textBudgetPerByte,
		"outputBudgetBase":    outputBudgetBase,
		"outputBudgetPerByte": outputBudgetPerByte,
	})
}
