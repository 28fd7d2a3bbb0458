// Package suggest chooses what to change in a run, with the bytes each
// change saves: it gathers the evidence of the device that matters most
// (Gather: its peak or OOM, categories, attention, fragmentation, whether
// it trains), picks the suggestions that evidence supports and the leak
// findings call for (From), and sets each saving to the what-if's
// projection of the same change (ReconcileSavings). It never suggests
// what the run already does.
package suggest
