// Package agui is toolgate's AG-UI door: one HTTP endpoint, POST /agui, that
// takes an AG-UI RunAgentInput (the @ag-ui/client HttpAgent's request) and
// answers with a text/event-stream of AG-UI 1.0 events, over durable toolgate
// runs.
//
// A thread is a run: threadId T names the session AgentRun with workflow id
// "agui-T" (WorkflowID), which only this endpoint starts (it marks the run
// with the memo toolgate_door=agui and refuses a thread whose run lacks it).
// A POST whose messages hold one user message more than the run has seen
// starts the run with it (the first) or sends it as the run's next message; a
// POST without a new message is a reconnect, which streams the turn from
// where the run is without reporting again what the client's messages
// already hold. The stream follows the turn: each proposed call as
// TOOL_CALL_START/ARGS/END (the exact arguments), its outcome as
// TOOL_CALL_RESULT (the result, or a text that says what a human or the
// policy decided), the planner's answer as TEXT_MESSAGE_*, then
// STATE_SNAPSHOT and MESSAGES_SNAPSHOT, and RUN_FINISHED: success, or
// interrupt with one interrupt per call waiting for a human. The next POST
// resumes with an answer per interrupt (resume[]): each becomes one approve,
// reject or respond update, bound to the arguments' digest the interrupt
// showed, with an update id derived from the thread, the interrupt and the
// answer, so a resume sent twice acts once.
//
// What the client sends that the run does not take: tools, context, state
// and forwardedProps are decoded (strictly) and ignored — the client chooses
// neither the run's tools, nor its policy, nor its planner (Options.Planner
// is the server's); system, developer, reasoning and activity messages are
// ignored too. Only user messages' text reaches the run.
//
// Security model: every request is hostile until checked. The Host header
// must be one of Options.Hosts (so a DNS-rebinding page cannot reach a
// loopback server); a browser's Origin must be the server's own or one of
// Options.Origins (the only origins that get CORS headers); the body must be
// application/json (a cross-origin form cannot send it without a preflight
// the endpoint refuses), at most MaxBodyBytes, and decode exactly: an unknown
// field, a key given twice or in another case, or data after the value is
// refused naming the field. Counts and sizes are bounded (MaxMessages,
// MaxResumeEntries, workflows.MaxMessageBytes …). Unless Options.Callers
// authenticates them by bearer token, the endpoint does not know its
// callers: whoever reaches it may start threads and, for a run without a
// worker policy, decide its calls (as metadata.approver, or DefaultApprover;
// never a name of ReservedApproverPrefixes) — so it listens on loopback
// unless told otherwise, with TLS. It decides nothing itself: the run
// validates every decision again, and under a worker policy a decision must
// carry its approver's signed token in metadata.token. Under a policy
// (Options.Policy) a thread's run is started signed by its caller's key, so
// the run has a verified requester, who may approve none of its calls and
// alone sends it messages; a start no caller can sign is refused, and so is
// a thread whose run is held to a policy without a requester. Every refusal says why: a
// request the endpoint cannot take is an HTTP 4xx with a text body; a request
// the run's state refuses (a thread of another door, a closed run, a partial
// resume, an expired interrupt, an unsigned decision …) is a RUN_ERROR event
// with a code, alone when nothing was sent to the run. A stream ends when the client goes away, and after
// Options.MaxStream at most.
package agui
