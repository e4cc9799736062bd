package workflows

// CurrentRulesVersion is the rules version a new run takes, for tests that
// pin an older one (OnGetVersion of the change id "decision-kind").
const CurrentRulesVersion = versionCurrent
