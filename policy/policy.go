// Package policy is the worker's approval policy: who may decide (approvers,
// their public keys and roles) and by which rule (per tool, CEL expressions
// over a call's arguments that allow, ask or deny). It is declared where the
// worker starts, never by a client, and recorded in each run's history when
// the run starts, so a run is held to the policy of its start.
package policy

// Decide is what a rule decides.
type Decide string

// What a rule may decide.
const (
	Allow Decide = "allow" // the call runs with no human: approved by rule:<id>
	Ask   Decide = "ask"   // the call waits at the gate for the rule's approvers
	Deny  Decide = "deny"  // the call is blocked; the planner is told which rule
)

// Approvers says who may decide a call: Count distinct approvers (default
// 1), each holding at least one of Roles (no roles: any approver of the
// policy).
type Approvers struct {
	Roles []string `json:"roles,omitempty" yaml:"roles"`
	Count int      `json:"count,omitempty" yaml:"count"`
}

// Rule is one rule of a tool. Rules are tried in order; the first whose When
// holds decides (a Shadow rule is recorded when it holds, never enforced, and
// the next rule is tried).
type Rule struct {
	ID        string     `json:"id" yaml:"id"`
	When      string     `json:"when" yaml:"when"`
	Decide    Decide     `json:"decide" yaml:"decide"`
	Approvers *Approvers `json:"approvers,omitempty" yaml:"approvers"`
	Shadow    bool       `json:"shadow,omitempty" yaml:"shadow"`
	// Respond lets an approver answer a call this rule holds in the tool's
	// place (the respond update) even though the tool is destructive: the
	// tool then does not run. A tool that is not destructive may always be
	// answered so.
	Respond bool `json:"respond,omitempty" yaml:"respond"`
}

// Tool is the policy of one tool: its rules, and the approvers of an "ask"
// that names none (and of a destructive call no rule matched).
type Tool struct {
	Rules     []Rule     `json:"rules,omitempty" yaml:"rules"`
	Approvers *Approvers `json:"approvers,omitempty" yaml:"approvers"`
}

// Approver is one person who may decide: the public key that proves a
// decision is theirs ("ed25519:…", see signed.FormatPublicKey) and their roles.
type Approver struct {
	Key   string   `json:"key" yaml:"key"`
	Roles []string `json:"roles,omitempty" yaml:"roles"`
	// Slack (a Slack user id, "U0123ABCD") and Email are where notifications
	// reach this approver.
	Slack string `json:"slack,omitempty" yaml:"slack"`
	Email string `json:"email,omitempty" yaml:"email"`
	// Via are the channels ("slack", "email") through which this approver
	// may decide by a click, with no signature of their own: the decision is
	// then signed by the policy's via_key and recorded as made through that
	// channel. None: every decision of theirs is signed with their key.
	Via []string `json:"via,omitempty" yaml:"via"`
}

// Policy is a policy file.
type Policy struct {
	Approvers map[string]Approver `json:"approvers" yaml:"approvers"`
	Tools     map[string]Tool     `json:"tools,omitempty" yaml:"tools"`
	// RequireSignedStart refuses a run started without a request_token: every
	// run then has a verified requester, who may decide none of its calls.
	RequireSignedStart bool `json:"require_signed_start,omitempty" yaml:"require_signed_start"`
	// MaxTokenLifetime ("15m") lowers the longest a token may be valid
	// (exp - iat) below signed.MaxLifetime. Empty: signed.MaxLifetime.
	MaxTokenLifetime string `json:"max_token_lifetime,omitempty" yaml:"max_token_lifetime"`
	// Operators are the roles whose approvers may rewind a run and fork one
	// (toolgate rewind, toolgate fork), each a signed act. None: under this
	// policy nobody may.
	Operators []string `json:"operators,omitempty" yaml:"operators"`
	// ViaKey ("ed25519:…") is the public key that signs decisions by link:
	// the key of the inbox listener that takes notifications' clicks
	// (its --via-key file), never a worker's. A decision it signs counts as
	// its approver's only if their via names the channel it came through.
	ViaKey string `json:"via_key,omitempty" yaml:"via_key"`
	// Guards are limits kept across every run of the task queue, in the
	// fleet ledger (guards.go, package ledger).
	Guards []Guard `json:"guards,omitempty" yaml:"guards"`
}
