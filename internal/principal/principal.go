// Package principal names who caused an event of a run's history, as the
// Temporal server says it (never as the client says it: a client's
// `identity` is whatever the client sends).
//
// With principal attribution on (the server's dynamic config
// frontend.enablePrincipalPropagation), the server stamps each history event
// it writes because of a call with the principal its authorizer returned for
// that call: HistoryEvent.principal = {type, name}. On the server `toolgate
// dev` runs (package devserver, Options.Authorization) the type is the role
// the call was allowed under:
//
//   - Worker: a worker's credential (the dev server's worker token, or a
//     client certificate whose subject the server maps to the worker role);
//     every API of the namespace, polling and answering tasks included;
//   - Person: a person's credential, or none at all (name Anonymous): start,
//     signal, update, query, read, cancel, terminate, reset and delete runs,
//     but neither poll, answer tasks nor act on activities;
//   - Temporal: the server's own parts (schedules, batches, deletion, Nexus
//     dispatch), which reach it through its internal frontend.
//
// Events the server writes on its own (a timer firing, a task scheduled by
// history) carry no principal.
//
// This package imports nothing of the Temporal server, so that readers of
// histories (toolgate audit) use these names without building the server.
package principal

// Principal types: the role a call was allowed under (HistoryEvent.principal.type).
const (
	// Worker is the type of the calls a worker's credential made.
	Worker = "worker"
	// Person is the type of the calls a person's credential, or no
	// credential at all, made.
	Person = "person"
	// Temporal is the type of the calls of the server's own parts: the
	// Temporal server's authorization.InternalPrincipalType.
	Temporal = "temporal"
)

// Anonymous is the principal name of a call that came with no credential
// (type Person).
const Anonymous = "anonymous"
