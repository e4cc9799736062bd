// Package tool is toolgate's shared vocabulary: what a tool is (Spec), what a
// proposed call is (Call), what an activity receives when it runs one
// (Request), the errors that cross the activity boundary (ConfirmationRequired,
// interrupts, invalid arguments) and the canonical memo key.
//
// Both the workflow code and the activities import this package, so it holds
// no I/O, no clocks and no randomness.
package tool
