package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/server/common/dynamicconfig"
	"gopkg.in/yaml.v3"

	"github.com/toolgate/toolgate/devserver"
	"github.com/toolgate/toolgate/permit"
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
	Image         string               `yaml:"image"`
	ContainerName string               `yaml:"container_name"`
	User          string               `yaml:"user"`
	Build         any                  `yaml:"build"`
	Entrypoint    []string             `yaml:"entrypoint"`
	Command       []string             `yaml:"command"`
	Environment   map[string]string    `yaml:"environment"`
	Ports         []string             `yaml:"ports"`
	Volumes       []string             `yaml:"volumes"`
	DependsOn     map[string]dependsOn `yaml:"depends_on"`
	Restart       string               `yaml:"restart"`
	Healthcheck   *struct {
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

// The server is toolgate's own binary serving `toolgate dev`, built from the
// Dockerfile as the workers' image, not the stock temporalio/server (whose
// default authorizer makes every writer a worker: docs/threat-model.md), and
// no service runs a stock Temporal image but the UI.
func TestServerIsToolgatesDevServer(t *testing.T) {
	c := loadCompose(t)
	s := c.service(t, serverService)
	w := c.service(t, workerService)
	if s.Build == nil || s.Image == "" || s.Image != w.Image {
		t.Errorf("service %s: build %v, image %q: want it built from the Dockerfile as the same image as %s (%q)", serverService, s.Build, s.Image, workerService, w.Image)
	}
	if len(s.Command) == 0 || s.Command[0] != "dev" || !slices.Contains(s.Command, "--no-worker") {
		t.Errorf("service %s's command %q: want `dev ... --no-worker` (the server only; the workers are %s)", serverService, s.Command, workerService)
	}
	for name, svc := range c.Services {
		if strings.HasPrefix(svc.Image, "temporalio/server:") || strings.HasPrefix(svc.Image, "temporalio/admin-tools:") || strings.HasPrefix(svc.Image, "temporalio/auto-setup:") {
			t.Errorf("service %s runs %s: the stock server cannot load toolgate's authorizer, and `dev --db` prepares the databases and the namespace itself", name, svc.Image)
		}
	}
	// Listens on every interface of its container, on the port it publishes.
	addr, _ := flagValue(s.Command, "--address")
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("service %s: --address %q, want 0.0.0.0:PORT (the other containers dial it)", serverService, addr)
	} else if s.published()[port] == "" {
		t.Errorf("service %s: --address %s, but it does not publish container port %s (%v)", serverService, addr, port, s.Ports)
	}
}

// The server keeps authorization on: nothing on its command loosens it.
// dev has no flag that turns authorization off; these would open doors
// around it (an unauthenticated HTTP API) or weaken what a run may do.
func TestServerRunsWithAuthorization(t *testing.T) {
	s := loadCompose(t).service(t, serverService)
	for _, f := range commandFlags(s.Command) {
		if strings.HasPrefix(f, "--allow") || strings.HasPrefix(f, "--no-auth") || strings.Contains(f, "insecure") || f == "--http-api" {
			t.Errorf("service %s passes %s: the compose server serves with toolgate's authorizer and nothing around it", serverService, f)
		}
	}
	for k := range s.Environment {
		if k != "PGPASSWORD" {
			t.Errorf("service %s sets %s: only PGPASSWORD is expected (a TEMPORAL_* or TOOLGATE_* setting would change what dev serves)", serverService, k)
		}
	}
}

// The server's --db is the postgresql service's database, with its user and
// password, and dev makes DB and DB_visibility itself.
func TestServerUsesThePostgresService(t *testing.T) {
	c := loadCompose(t)
	s := c.service(t, serverService)
	raw, ok := flagValue(s.Command, "--db")
	if !ok {
		t.Fatalf("service %s's command %q has no --db: it would keep its data in SQLite in its volume", serverService, s.Command)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "postgres" {
		t.Fatalf("service %s: --db %q is not a postgres:// URL: %v", serverService, raw, err)
	}
	pg := c.service(t, "postgresql")
	if got, ok := s.DependsOn["postgresql"]; !ok || got.Condition != "service_healthy" {
		t.Errorf("service %s must depend on postgresql with condition service_healthy (has %+v)", serverService, s.DependsOn)
	}
	if u.Hostname() != "postgresql" || u.Port() != "5432" {
		t.Errorf("service %s: --db dials %s, want the postgresql service on 5432", serverService, u.Host)
	}
	if u.User.Username() != pg.Environment["POSTGRES_USER"] {
		t.Errorf("service %s: --db user %q, postgresql's POSTGRES_USER is %q", serverService, u.User.Username(), pg.Environment["POSTGRES_USER"])
	}
	if _, set := u.User.Password(); set {
		t.Errorf("service %s: --db %q has the password in it (it shows in `ps` and the healthcheck's logs): use PGPASSWORD", serverService, raw)
	}
	if s.Environment["PGPASSWORD"] != pg.Environment["POSTGRES_PASSWORD"] {
		t.Errorf("service %s: PGPASSWORD %q, postgresql's POSTGRES_PASSWORD %q", serverService, s.Environment["PGPASSWORD"], pg.Environment["POSTGRES_PASSWORD"])
	}
	if u.Query().Get("sslmode") != "disable" {
		t.Errorf("service %s: --db %q: the postgres image serves no TLS, want sslmode=disable", serverService, raw)
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

func TestWorkerAndUIDialTheServerService(t *testing.T) {
	c := loadCompose(t)
	w := c.service(t, workerService)
	s := c.service(t, serverService)
	_, port, _ := net.SplitHostPort(func() string { a, _ := flagValue(s.Command, "--address"); return a }())
	dials := map[string]string{uiService: c.service(t, uiService).Environment["TEMPORAL_ADDRESS"]}
	dials[workerService], _ = flagValue(w.Command, "--address")
	for name, addr := range dials {
		if addr != serverService+":"+port {
			t.Errorf("%s dials %q, want the server service %s:%s", name, addr, serverService, port)
		}
	}
	// The namespace the worker polls is the one the server registers.
	ns, _ := flagValue(w.Command, "--namespace")
	if want, _ := flagValue(s.Command, "--namespace"); ns == "" || ns != want {
		t.Errorf("%s polls namespace %q; %s registers %q", workerService, ns, serverService, want)
	}
	if !slices.Contains(w.Command, "--search-attributes") {
		t.Errorf("%s's command lacks --search-attributes although %s registers them", workerService, serverService)
	}
}

func TestStartOrder(t *testing.T) {
	c := loadCompose(t)
	for _, d := range []struct{ service, on, condition string }{
		{serverService, "postgresql", "service_healthy"},
		{uiService, serverService, "service_healthy"},
		{workerService, serverService, "service_healthy"},
	} {
		got, ok := c.service(t, d.service).DependsOn[d.on]
		if !ok || got.Condition != d.condition {
			t.Errorf("service %s must depend on %s with condition %s (has %+v)", d.service, d.on, d.condition, c.Services[d.service].DependsOn)
		}
	}
	for _, name := range []string{serverService, workerService} {
		if r := c.service(t, name).Restart; !strings.HasPrefix(r, "on-failure") && r != "unless-stopped" && r != "always" {
			t.Errorf("service %s: restart %q; it exits when what it needs is away (PostgreSQL, the frontend), so it must be restarted", name, r)
		}
	}
}

// The server's healthcheck runs in its own image, which has no shell and no
// nc (distroless): it must exec toolgate itself, with a subcommand and flags
// the CLI defines, and no credential.
func TestServerHealthcheckRunsToolgate(t *testing.T) {
	s := loadCompose(t).service(t, serverService)
	if s.Healthcheck == nil || len(s.Healthcheck.Test) < 3 {
		t.Fatalf("service %s has no healthcheck, so service_healthy never holds", serverService)
	}
	test := s.Healthcheck.Test
	if !strings.Contains(string(readFile(t, "Dockerfile")), `ENTRYPOINT ["`+test[1]+`"]`) {
		t.Errorf("service %s: healthcheck %q: want [\"CMD\", the image's entrypoint, ...]", serverService, test)
	}
	if test[0] != "CMD" {
		t.Errorf("service %s: healthcheck %q: the image has no shell, want CMD (exec form)", serverService, test)
	}
	if test[2] != "pending" {
		t.Errorf("service %s: healthcheck %q: want `toolgate pending` (a person's read, needing the namespace, visibility and search attributes)", serverService, test)
	}
	checkFlagsDefined(t, serverService+"'s healthcheck", test[2:])
	addr, _ := flagValue(test, "--address")
	_, port, _ := net.SplitHostPort(addr)
	listen, _ := flagValue(s.Command, "--address")
	if _, want, _ := net.SplitHostPort(listen); !strings.HasPrefix(addr, "127.0.0.1:") || port != want {
		t.Errorf("service %s: the healthcheck dials %q, the server listens on %s", serverService, addr, listen)
	}
	if ns, _ := flagValue(test, "--namespace"); ns != func() string { v, _ := flagValue(s.Command, "--namespace"); return v }() {
		t.Errorf("service %s: the healthcheck reads namespace %q, not the server's", serverService, ns)
	}
	for _, f := range commandFlags(test) {
		if f == "--token-file" || f == "--api-key" || strings.HasPrefix(f, "--tls") {
			t.Errorf("service %s: the healthcheck passes %s: it checks what a client with no credential (the UI) gets", serverService, f)
		}
	}
	// `pending` queries the waiting runs it lists, which needs a worker:
	// listing a queue no run is on keeps the server's health its own.
	if q, _ := flagValue(test, "--task-queue"); q == "" || q == workflows.TaskQueue {
		t.Errorf("service %s: the healthcheck lists task queue %q: want one no run is on, or the server is unhealthy whenever no worker answers a query", serverService, q)
	}
}

// cliSource is the source of the CLI's flag definitions: cmd/toolgate and
// connect (the connection flags).
func cliSource(t *testing.T) string {
	t.Helper()
	var src strings.Builder
	for _, dir := range []string{filepath.Join("cmd", "toolgate"), "connect"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("reading %s: %v (%d files)", dir, err, len(files))
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				src.Write(b)
			}
		}
	}
	return src.String()
}

// checkFlagsDefined fails for each --flag of cmd that the CLI does not define.
func checkFlagsDefined(t *testing.T, what string, cmd []string) {
	t.Helper()
	src := cliSource(t)
	for _, flag := range commandFlags(cmd) {
		name := strings.TrimPrefix(flag, "--")
		// fs.String("name", ...), fs.Bool("name", ...), fs.StringVar(&v, "name", ...), ...
		def := regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Uint|Duration|Float64|Func|Var)(?:Var)?\((?:&[\w.]+,\s*)?"` + regexp.QuoteMeta(name) + `"`)
		if !def.MatchString(src) {
			t.Errorf("%s uses %s, which cmd/toolgate and connect do not define", what, flag)
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

func TestWorkerAndServerFlagsAreDefinedByTheCLI(t *testing.T) {
	c := loadCompose(t)
	for _, x := range []struct{ service, subcommand string }{{workerService, "worker"}, {serverService, "dev"}} {
		cmd := c.service(t, x.service).Command
		if len(cmd) == 0 || cmd[0] != x.subcommand {
			t.Errorf("%s's command %q does not start with the %s subcommand", x.service, cmd, x.subcommand)
		}
		checkFlagsDefined(t, x.service+"'s command", cmd)
	}
}

// volumeMount is a short-syntax mount of a named volume, "NAME:/dst[:ro]".
type volumeMount struct {
	name, dst string
	readOnly  bool
}

// namedVolumes returns the service's mounts of the file's named volumes.
func (c compose) namedVolumes(s service) []volumeMount {
	var out []volumeMount
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			continue
		}
		if _, ok := c.Volumes[parts[0]]; !ok {
			continue
		}
		out = append(out, volumeMount{name: parts[0], dst: parts[1], readOnly: len(parts) > 2 && slices.Contains(strings.Split(parts[2], ","), "ro")})
	}
	return out
}

// volumeAt returns the named volume the service mounts at dir or above path,
// and path relative to its mount point.
func (c compose) volumeAt(s service, path string) (volumeMount, string, bool) {
	for _, m := range c.namedVolumes(s) {
		if rel, err := filepath.Rel(m.dst, path); err == nil && !strings.HasPrefix(rel, "..") {
			return m, rel, true
		}
	}
	return volumeMount{}, "", false
}

// devKeyDir is the directory under --data where `toolgate dev` keeps its
// signing key and writes the worker token (devserver.AuthOptions.KeyDir).
func devKeyDir(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`KeyDir:\s*filepath\.Join\(\*data,\s*"([^"]+)"\)`).FindStringSubmatch(string(readFile(t, "cmd/toolgate/dev.go")))
	if m == nil {
		t.Fatal("cmd/toolgate/dev.go: no `KeyDir: filepath.Join(*data, \"...\")`: where does dev keep its auth files?")
	}
	return m[1]
}

// The worker reads the token the server writes: its --token-file is
// DATA/auth/worker.token of the server's --data, in the same named volume,
// mounted read-only in the worker.
func TestWorkerReadsTheServersWorkerToken(t *testing.T) {
	c := loadCompose(t)
	s, w := c.service(t, serverService), c.service(t, workerService)
	data, ok := flagValue(s.Command, "--data")
	if !ok {
		t.Fatalf("service %s's command has no --data: its signing key and worker token would not be in a volume", serverService)
	}
	written := filepath.Join(data, devKeyDir(t), devserver.WorkerTokenFile)
	sv, rel, ok := c.volumeAt(s, written)
	if !ok {
		t.Fatalf("service %s writes its worker token to %s, which is in none of its named volumes (%v)", serverService, written, s.Volumes)
	}
	if sv.readOnly {
		t.Errorf("service %s mounts %s read-only: dev writes its keys there", serverService, sv.name)
	}
	tokenFile, ok := flagValue(w.Command, "--token-file")
	if !ok {
		t.Fatalf("%s's command has no --token-file: without the worker token it has a person's role and every poll is refused", workerService)
	}
	wv, wrel, ok := c.volumeAt(w, tokenFile)
	if !ok || wv.name != sv.name || wrel != rel {
		t.Errorf("%s reads its token from %s (volume %q, %q); %s writes it to %s (volume %q, %q)", workerService, tokenFile, wv.name, wrel, serverService, written, sv.name, rel)
	}
	if !wv.readOnly {
		t.Errorf("%s mounts the server's volume %s read-write: it only reads the token", workerService, sv.name)
	}
	// Only the server and the workers see that volume (it holds the signing key).
	for name, svc := range c.Services {
		for _, m := range c.namedVolumes(svc) {
			if m.name == sv.name && name != serverService && name != workerService {
				t.Errorf("service %s mounts %s, the server's signing key and worker token", name, sv.name)
			}
		}
	}
}

// The worker can read the server's 0600 files: both run as the image's
// user, and the server's --data is the directory the image makes owned by
// that user (a new named volume starts as a copy of it, ownership included),
// so dev can create auth/ in it.
func TestServerAndWorkerShareTheImagesUser(t *testing.T) {
	c := loadCompose(t)
	df := string(readFile(t, "Dockerfile"))
	user := regexp.MustCompile(`(?m)^USER\s+(\S+)\s*$`).FindStringSubmatch(df)
	if user == nil {
		t.Fatal("Dockerfile: no USER: the image would run as root")
	}
	uid, _, _ := strings.Cut(user[1], ":")
	for _, name := range []string{serverService, workerService} {
		if u := c.service(t, name).User; u != "" {
			t.Errorf("service %s sets user %q: the server and the workers must run as the image's user (%s), or the 0600 worker token is unreadable", name, u, user[1])
		}
	}
	data, _ := flagValue(c.service(t, serverService).Command, "--data")
	if !regexp.MustCompile(`(?m)^COPY\s+--from=\S+\s+--chown=` + regexp.QuoteMeta(uid) + `(:\S+)?\s+\S+\s+` + regexp.QuoteMeta(data) + `\s*$`).MatchString(df) {
		t.Errorf("Dockerfile: no `COPY --chown=%s:… … %s`: the server's data directory (--data %s) must exist in the image owned by USER %s, or a new volume there is root's", uid, data, data, uid)
	}
	if m, rel, ok := c.volumeAt(c.service(t, serverService), data); !ok || rel != "." {
		t.Errorf("service %s: --data %s is not the mount point of a named volume (%+v, %q)", serverService, data, m, rel)
	}
}

// The UI connects with no credential: a person's role.
func TestUIHasNoCredential(t *testing.T) {
	ui := loadCompose(t).service(t, uiService)
	for k := range ui.Environment {
		if k != "TEMPORAL_ADDRESS" && k != "TEMPORAL_CORS_ORIGINS" {
			t.Errorf("service %s sets %s: the UI gets no credential (TLS, token, API key) and no other setting", uiService, k)
		}
	}
	if len(ui.Volumes) > 0 {
		t.Errorf("service %s mounts %v: it needs no file of the server", uiService, ui.Volumes)
	}
}

// Every replica of the worker signs and checks permits with the same worker
// key: the key file (--worker-key, else permit.WorkerKeyFile under --data)
// is in a named volume, shared by every replica, and nothing pins the
// service to one container.
func TestScaledWorkersShareTheWorkerKey(t *testing.T) {
	c := loadCompose(t)
	w := c.service(t, workerService)
	key, ok := flagValue(w.Command, "--worker-key")
	if !ok {
		data, ok := flagValue(w.Command, "--data")
		if !ok {
			t.Fatalf("%s's command has neither --worker-key nor --data", workerService)
		}
		key = filepath.Join(data, permit.WorkerKeyFile)
	}
	m, _, ok := c.volumeAt(w, key)
	if !ok {
		t.Errorf("%s's worker key %s is in no named volume: each replica would make its own, and a permit one signs another refuses", workerService, key)
	} else if m.readOnly && !slices.Contains(w.Command, "--worker-key") {
		t.Errorf("%s: the volume %s of its worker key is read-only, so the first replica cannot make it", workerService, m.name)
	}
	if w.ContainerName != "" {
		t.Errorf("%s sets container_name %q: it could not be scaled", workerService, w.ContainerName)
	}
}

// saFlags finds "--name NAME --type TYPE" pairs in a shell script.
var saFlags = regexp.MustCompile(`--name\s+(\S+)\s+--type\s+(\S+)`)

// deploy/create-namespace.sh (for a stock server; docker-compose.yml's
// server registers them itself) creates the search attributes the
// workflows write, with their types.
func TestNamespaceScriptCreatesTheWorkflowsSearchAttributes(t *testing.T) {
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
	for _, rel := range []string{"deploy/setup-postgres.sh", "deploy/create-namespace.sh"} {
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

// deploy/dynamicconfig/docker.yaml (for a stock server: temporalio/server
// ships none) loads without errors or warnings with the server's own loader.
func TestStockServerDynamicConfigLoads(t *testing.T) {
	const host = "deploy/dynamicconfig/docker.yaml"
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
