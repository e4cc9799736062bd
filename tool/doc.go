// Package tool is toolgate's shared vocabulary: what a tool is (Spec), what a
// proposed call is (Call), what an activity receives when it runs one
// (Request), the errors that cross the activity boundary (ConfirmationRequired,
// interrupts, invalid arguments), the canonical memo key, and a tool's
// argument schema: derived from its Go argument type by New (SchemaFor), and
// compiled and applied by the one validator (CompileSchema, Schema.Validate)
// that the worker, the workflow and the planners share; and the bounds on
// what a tool declares (Spec.Validate) and on what its activity reports
// (Bounded, ClipResult, BoundError).
//
// Both the workflow code and the activities import this package, so it holds
// no I/O, no clocks and no randomness.
package tool
