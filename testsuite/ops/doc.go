// Package ops holds toolgate's operator-facing end-to-end tests, on the
// embedded Temporal server (package devserver) and the toolgate binary (built
// once per test run): the approvals inbox across runs (visibility queries on
// ToolgateStatus and ToolgatePendingTools, `toolgate pending`, `toolgate
// approve`, the details shown in the Temporal UI), the Prometheus metrics of
// a worker (worker.Metrics, `--metrics-address`), its OpenTelemetry traces
// (tracing.Interceptors, `--otlp-endpoint`) and `toolgate replay` on the
// recorded histories of testsuite/histories.
//
//	go test -count=1 ./testsuite/ops
package ops
