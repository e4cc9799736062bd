// Package deploy holds the files of toolgate's Docker deployment that
// docker-compose.yml mounts (setup-postgres.sh, create-namespace.sh,
// dynamicconfig/) and the tests that keep docker-compose.yml, the Dockerfile
// and .dockerignore consistent with the code. It has no Go API.
//
// No Docker engine is needed for the tests: the files are parsed and
// cross-checked, and the Dockerfile's `go build` line is run natively.
package deploy
