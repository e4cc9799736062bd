package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/server/common/dynamicconfig"
	"gopkg.in/yaml.v3"

	"github.com/toolgate/toolgate/workflows"
)

// root is the module root, relative to this package's directory (where go
// test runs the test binary).
const root = ".."

// Service names in docker-compose.yml that the checks below look up.
const (
	workerService = "toolgate-worker"
	serverService = "temporal"
	uiService     = "temporal-ui"
)

// compose is the part of the Compose file the checks read.
type compose struct {
	Version  *string            `yaml:"version"`
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string               `yaml:"image"`
	Build       any                  `yaml:"build"`
	Entrypoint  []string             `yaml:"entrypoint"`
	Command     []string             `yaml:"command"`
	Environment map[string]string    `yaml:"environment"`
	Ports       []string             `yaml:"ports"`
	Volumes     []string             `yaml:"volumes"`
	DependsOn   map[string]dependsOn `yaml:"depends_on"`
	Restart     string               `yaml:"restart"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

type dependsOn struct {
	Condition string `yaml:"condition"`
}

func loadCompose(t *testing.T) compose {
	t.Helper()
	var c compose
	if err := yaml.Unmarshal(readFile(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(c.Services) == 0 {
		t.Fatal("docker-compose.yml: no services")
	}
	return c
}

func readFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (c compose) service(t *testing.T, name string) service {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml has no service %q", name)
	}
	return s
}

// mounting returns the name of the service that mounts the repository file
// rel (for example deploy/create-namespace.sh), and the path it mounts it at.
func (c compose) mounting(t *testing.T, rel string) (string, string) {
	t.Helper()
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, dst, ok := bindMount(v)
			if ok && src == rel {
				return name, dst
			}
		}
	}
	t.Fatalf("no service in docker-compose.yml mounts ./%s", rel)
	return "", ""
}

// bindMount splits a short-syntax bind mount "./src:/dst[:mode]" into the
// repository-relative source and the container path.
func bindMount(v string) (src, dst string, ok bool) {
	parts := strings.Split(v, ":")
	if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
		return "", "", false
	}
	return filepath.ToSlash(filepath.Clean(parts[0])), parts[1], true
}

// published maps each container port the service publishes to its host port.
func (s service) published() map[string]string {
	m := map[string]string{}
	for _, p := range s.Ports {
		p, _, _ = strings.Cut(p, "/") // drop "/tcp"
		parts := strings.Split(p, ":")
		switch len(parts) {
		case 2: // HOST:CONTAINER
			m[parts[1]] = parts[0]
		case 3: // IP:HOST:CONTAINER
			m[parts[2]] = parts[1]
		}
	}
	return m
}

// flagValue returns the value following flag in args ("--flag value").
func flagValue(args []string, flag string) (string, bool) {
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// goModLine returns the first field after the directive (for example "go",
// or "go.temporal.io/server" inside a require block) in go.mod.
func goModLine(t *testing.T, directive string) string {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, "go.mod")))
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "require "))
		if len(f) >= 2 && f[0] == directive {
			return f[1]
		}
	}
	t.Fatalf("go.mod has no %q line", directive)
	return ""
}

func TestComposeHasNoVersionKey(t *testing.T) {
	if c := loadCompose(t); c.Version != nil {
		t.Errorf("docker-compose.yml has `version: %s`: the Compose specification has no version key", *c.Version)
	}
}

// A concrete version: at least MAJOR.MINOR, optionally a suffix (16.13,
// 1.32.1, 2.54.1, 1.26.8-bookworm).
var pinnedTag = regexp.MustCompile(`^v?\d+\.\d+(\.\d+)*([-.][0-9A-Za-z.]+)?$`)

func TestEveryServiceHasAPinnedImageOrABuild(t *testing.T) {
	for name, s := range loadCompose(t).Services {
		if s.Build != nil {
			continue
		}
		if s.Image == "" {
			t.Errorf("service %s has neither an image nor a build", name)
			continue
		}
		repo, tag, ok := strings.Cut(s.Image, ":")
		if !ok || strings.Contains(tag, "/") || tag == "latest" || !pinnedTag.MatchString(tag) {
			t.Errorf("service %s: image %q is not pinned to a concrete version (%s:MAJOR.MINOR[.PATCH])", name, s.Image, repo)
		}
	}
}

func TestServerImagesMatchTheEmbeddedServer(t *testing.T) {
	c := loadCompose(t)
	want := strings.TrimPrefix(goModLine(t, "go.temporal.io/server"), "v")
	server := c.service(t, serverService).Image
	if server != "temporalio/server:"+want {
		t.Errorf("service %s runs %q; go.mod embeds go.temporal.io/server v%s: use temporalio/server:%s", serverService, server, want, want)
	}
	for name, s := range c.Services {
		if strings.HasPrefix(s.Image, "temporalio/admin-tools:") && s.Image != "temporalio/admin-tools:"+want {
			t.Errorf("service %s runs %q: admin-tools must match the server (%s) so its schema files do", name, s.Image, want)
		}
	}
}

func TestFrontendAndUIPortsArePublished(t *testing.T) {
	c := loadCompose(t)
	for _, p := range []struct{ service, port string }{{serverService, "7233"}, {uiService, "8080"}} {
		if host := c.service(t, p.service).published()[p.port]; host != p.port {
			t.Errorf("service %s: container port %s is published on host port %q, want %s", p.service, p.port, host, p.port)
		}
	}
}

func TestWorkerDialsTheServerService(t *testing.T) {
	c := loadCompose(t)
	w := c.service(t, workerService)
	addr, ok := flagValue(w.Command, "--address")
	if !ok {
		t.Fatalf("%s's command %q has no --address", workerService, w.Command)
	}
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		t.Fatalf("%s: --address %q is not HOST:PORT", workerService, addr)
	}
	target, ok := c.Services[host]
	if !ok {
		t.Fatalf("%s: --address %q: %q is not a service of docker-compose.yml", workerService, addr, host)
	}
	if !strings.HasPrefix(target.Image, "temporalio/server:") {
		t.Errorf("%s: --address %q names service %s, which runs %q, not temporalio/server", workerService, addr, host, target.Image)
	}
	if _, ok := target.published()[port]; !ok {
		t.Errorf("%s: --address %q: service %s does not publish container port %s (it publishes %v)", workerService, addr, host, port, target.Ports)
	}

	// The namespace the worker polls is the one the namespace job prepares.
	ns, _ := flagValue(w.Command, "--namespace")
	job, _ := c.mounting(t, "deploy/create-namespace.sh")
	if want := c.Services[job].Environment["DEFAULT_NAMESPACE"]; ns != want {
		t.Errorf("%s polls namespace %q; %s prepares %q", workerService, ns, job, want)
	}
	if !slices.Contains(w.Command, "--search-attributes") {
		t.Errorf("%s's command lacks --search-attributes although %s creates them", workerService, job)
	}
}

func TestStartOrder(t *testing.T) {
	c := loadCompose(t)
	schemaJob, _ := c.mounting(t, "deploy/setup-postgres.sh")
	namespaceJob, _ := c.mounting(t, "deploy/create-namespace.sh")
	for _, d := range []struct{ service, on, condition string }{
		{schemaJob, "postgresql", "service_healthy"},
		{serverService, schemaJob, "service_completed_successfully"},
		{namespaceJob, serverService, "service_healthy"},
		{uiService, serverService, "service_healthy"},
		{workerService, namespaceJob, "service_completed_successfully"},
	} {
		got, ok := c.service(t, d.service).DependsOn[d.on]
		if !ok || got.Condition != d.condition {
			t.Errorf("service %s must depend on %s with condition %s (has %+v)", d.service, d.on, d.condition, c.Services[d.service].DependsOn)
		}
	}
	if hc := c.service(t, serverService).Healthcheck; hc == nil || len(hc.Test) == 0 {
		t.Errorf("service %s has no healthcheck, so service_healthy never holds", serverService)
	}
	if r := c.service(t, workerService).Restart; !strings.HasPrefix(r, "on-failure") && r != "unless-stopped" && r != "always" {
		t.Errorf("service %s: restart %q; the worker fails fast when the frontend is away, so it must be restarted", workerService, r)
	}
}

// saFlags finds "--name NAME --type TYPE" pairs in a shell script.
var saFlags = regexp.MustCompile(`--name\s+(\S+)\s+--type\s+(\S+)`)

func TestNamespaceJobCreatesTheWorkflowsSearchAttributes(t *testing.T) {
	want := map[string]string{
		workflows.SearchAttrStatus:       "Keyword",
		workflows.SearchAttrPendingTools: "KeywordList",
		workflows.SearchAttrForkedFrom:   "Keyword",
	}
	got := map[string]string{}
	for _, m := range saFlags.FindAllStringSubmatch(string(readFile(t, "deploy/create-namespace.sh")), -1) {
		got[m[1]] = m[2]
	}
	if len(got) != len(want) {
		t.Errorf("deploy/create-namespace.sh creates %v, want %v", got, want)
	}
	for name, typ := range want {
		if got[name] != typ {
			t.Errorf("deploy/create-namespace.sh: search attribute %s has type %q, want %q", name, got[name], typ)
		}
	}
}

// commandFlags returns the --flags of a compose command.
func commandFlags(cmd []string) []string {
	var flags []string
	for _, a := range cmd {
		if strings.HasPrefix(a, "--") {
			name, _, _ := strings.Cut(a, "=")
			flags = append(flags, name)
		}
	}
	return flags
}

func TestWorkerFlagsAreDefinedByTheCLI(t *testing.T) {
	w := loadCompose(t).service(t, workerService)
	if len(w.Command) == 0 || w.Command[0] != "worker" {
		t.Fatalf("%s's command %q does not start with the worker subcommand", workerService, w.Command)
	}
	files, err := filepath.Glob(filepath.Join(root, "cmd", "toolgate", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("reading cmd/toolgate: %v (%d files)", err, len(files))
	}
	var src strings.Builder
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src.Write(b)
		}
	}
	for _, flag := range commandFlags(w.Command) {
		name := strings.TrimPrefix(flag, "--")
		// fs.String("name", ...), fs.Bool("name", ...), fs.StringVar(&v, "name", ...), ...
		def := regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Uint|Duration|Float64|Func|Var)(?:Var)?\((?:&[\w.]+,\s*)?"` + regexp.QuoteMeta(name) + `"`)
		if !def.MatchString(src.String()) {
			t.Errorf("%s's command uses %s, which cmd/toolgate does not define", workerService, flag)
		}
	}
}

// dockerfileFrom matches the builder stage: FROM golang:VERSION[-VARIANT] AS NAME.
var dockerfileFrom = regexp.MustCompile(`(?mi)^FROM\s+golang:(\d+\.\d+(?:\.\d+)?)(?:-\S+)?\s+AS\s+\S+`)

func TestDockerfileGoVersionIsGoMods(t *testing.T) {
	m := dockerfileFrom.FindStringSubmatch(string(readFile(t, "Dockerfile")))
	if m == nil {
		t.Fatal("Dockerfile: no `FROM golang:VERSION AS ...` builder stage")
	}
	if want := goModLine(t, "go"); m[1] != want {
		t.Errorf("Dockerfile builds with golang:%s, go.mod says go %s", m[1], want)
	}
}

func TestScriptsAreExecutableShellScripts(t *testing.T) {
	c := loadCompose(t)
	for _, rel := range []string{"deploy/setup-postgres.sh", "deploy/create-namespace.sh"} {
		name, dst := c.mounting(t, rel)
		info, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o111 == 0 {
			t.Errorf("%s is not executable (mode %v)", rel, info.Mode().Perm())
		}
		if !bytes.HasPrefix(readFile(t, rel), []byte("#!")) {
			t.Errorf("%s does not start with a shebang", rel)
		}
		if s := c.Services[name]; !slices.Contains(s.Command, dst) && !slices.Contains(s.Entrypoint, dst) {
			t.Errorf("service %s mounts %s at %s but does not run it (entrypoint %q, command %q)", name, rel, dst, s.Entrypoint, s.Command)
		}
	}
}

// The schema directories setup-postgres.sh migrates from must exist in the
// server release the images are pinned to (admin-tools ships that release's
// schema/ directory as /etc/temporal/schema).
func TestSchemaDirectoriesExistInTheServerRelease(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "go.temporal.io/server").Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		t.Fatalf("locating go.temporal.io/server: %v (%q)", err, dir)
	}
	dirs := regexp.MustCompile(`-d\s+/etc/temporal/schema/(\S+)`).FindAllStringSubmatch(string(readFile(t, "deploy/setup-postgres.sh")), -1)
	if len(dirs) != 2 {
		t.Fatalf("deploy/setup-postgres.sh: want update-schema for 2 databases, found %d schema dirs", len(dirs))
	}
	for _, m := range dirs {
		if info, err := os.Stat(filepath.Join(dir, "schema", m[1])); err != nil || !info.IsDir() {
			t.Errorf("deploy/setup-postgres.sh migrates from /etc/temporal/schema/%s, which go.temporal.io/server has not: %v", m[1], err)
		}
	}
}

func TestServerDynamicConfigLoads(t *testing.T) {
	s := loadCompose(t).service(t, serverService)
	path := s.Environment["DYNAMIC_CONFIG_FILE_PATH"]
	if path == "" {
		t.Fatalf("service %s sets no DYNAMIC_CONFIG_FILE_PATH", serverService)
	}
	var host string
	for _, v := range s.Volumes {
		if src, dst, ok := bindMount(v); ok && strings.HasPrefix(path, dst+"/") {
			host = filepath.Join(src, strings.TrimPrefix(path, dst+"/"))
		}
	}
	if host == "" {
		t.Fatalf("service %s: DYNAMIC_CONFIG_FILE_PATH %s is not inside a mounted directory", serverService, path)
	}
	lr := dynamicconfig.LoadYamlFile(readFile(t, host))
	if len(lr.Errors) > 0 || len(lr.Warnings) > 0 {
		t.Errorf("%s: errors %v, warnings %v", host, lr.Errors, lr.Warnings)
	}
}

func TestDockerignoreExcludesGitAndData(t *testing.T) {
	var lines []string
	for l := range strings.Lines(string(readFile(t, ".dockerignore"))) {
		lines = append(lines, strings.TrimSuffix(strings.TrimSpace(l), "/"))
	}
	for _, want := range []string{".git", ".toolgate"} {
		if !slices.Contains(lines, want) {
			t.Errorf(".dockerignore does not exclude %s", want)
		}
	}
}

// dockerfileBuild extracts the Dockerfile's `go build` command (its RUN line,
// continuation lines joined, BuildKit --mount options dropped) as environment
// assignments and go's arguments.
func dockerfileBuild(t *testing.T) (env, args []string) {
	t.Helper()
	text := strings.ReplaceAll(string(readFile(t, "Dockerfile")), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^RUN\s+(?:--mount=\S+\s+)*((?:\w+=\S+\s+)*)go\s+build\s+(.+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("Dockerfile: no `RUN ... go build ...` line")
	}
	env = strings.Fields(m[1])
	args, err := shellWords(m[2])
	if err != nil {
		t.Fatalf("Dockerfile: go build line: %v", err)
	}
	return env, append([]string{"build"}, args...)
}

// shellWords splits s like sh does for the plain words, '...' and "..."
// (no expansions; the Dockerfile's build line needs none).
func shellWords(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case r == '$' || r == '`' || r == '\\' || r == ';' || r == '&' || r == '|':
			return nil, errors.New("shell syntax beyond words and quotes: " + s)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote: " + s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// TestDockerfileBuildLineMakesTheImagesBinary reads the Dockerfile's build
// line (building it is .ci/run's job: a cold build of the server takes
// minutes, which the test command need not spend twice) and checks what the
// image relies on: a static build (CGO_ENABLED=0: distroless/static has no
// libc) of ./cmd/toolgate without build tags (fault injection is compiled in
// only with -tags toolgate_fault), written where the runtime stage copies it
// from, and run as the ENTRYPOINT.
func TestDockerfileBuildLineMakesTheImagesBinary(t *testing.T) {
	env, args := dockerfileBuild(t)
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("Dockerfile builds with env %q, want CGO_ENABLED=0 (the runtime image has no libc)", env)
	}
	if args[len(args)-1] != "./cmd/toolgate" {
		t.Errorf("Dockerfile: go %q does not build ./cmd/toolgate (its last argument)", args)
	}
	for _, a := range args {
		if a == "-tags" || strings.HasPrefix(a, "-tags=") || strings.HasPrefix(a, "--tags") {
			t.Errorf("Dockerfile: go %q sets build tags: the image's binary is built without any (no fault injection)", args)
		}
	}
	i := slices.Index(args, "-o")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("Dockerfile: go %q has no -o OUTPUT", args)
	}
	dockerfile := string(readFile(t, "Dockerfile"))
	if !regexp.MustCompile(`(?m)^COPY\s+--from=\S+\s+`+regexp.QuoteMeta(args[i+1])+`\s+/toolgate\s*$`).MatchString(dockerfile) ||
		!strings.Contains(dockerfile, `ENTRYPOINT ["/toolgate"]`) {
		t.Errorf("Dockerfile: the runtime stage must copy %s to /toolgate and run it as ENTRYPOINT", args[i+1])
	}
}
