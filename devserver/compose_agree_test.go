package devserver

import (
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	"gopkg.in/yaml.v3"

	dbschemas "go.temporal.io/server/schema"
	pgv12 "go.temporal.io/server/schema/postgresql/v12"
)

// sqlToolStep is one temporal-sql-tool line of deploy/setup-postgres.sh.
var sqlToolStep = regexp.MustCompile(`(?m)^temporal-sql-tool --plugin (\S+) .*--db (\S+) (create|setup-schema -v (\S+)|update-schema -d /etc/temporal/schema/(\S+))$`)

// `toolgate dev --db` (which docker-compose.yml's server runs) and
// deploy/setup-postgres.sh, for a stock server of one's own, agree: the same
// plugin family, the same two databases (DB and DB_visibility), the same
// initial version and the same versioned schema directories — and those
// end at the versions the server release declares, which Start applies.
func TestPostgresSchemaAgreesWithCompose(t *testing.T) {
	script, err := os.ReadFile("../deploy/setup-postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	steps := sqlToolStep.FindAllStringSubmatch(string(script), -1)
	if len(steps) != 6 {
		t.Fatalf("deploy/setup-postgres.sh: %d temporal-sql-tool steps, want 6 (create, setup-schema, update-schema for 2 databases)", len(steps))
	}
	updates := map[string]string{} // database -> schema dir it is migrated from
	for _, m := range steps {
		if plugin := m[1]; plugin+"_pgx" != PostgresPlugin {
			t.Errorf("setup-postgres.sh uses plugin %s; Start uses %s, not the same plugin on another driver", plugin, PostgresPlugin)
		}
		if v := m[4]; strings.HasPrefix(m[3], "setup-schema") && v != PostgresInitialVersion {
			t.Errorf("setup-postgres.sh: setup-schema -v %s for %s, Start records %s", v, m[2], PostgresInitialVersion)
		}
		if m[5] != "" {
			updates[m[2]] = m[5]
		}
	}
	// docker-compose.yml's server is `toolgate dev --db postgres://…`: Start
	// itself, so it creates and migrates the databases as above.
	var dc struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &dc); err != nil {
		t.Fatal(err)
	}
	cmd := dc.Services["temporal"].Command
	if i := slices.Index(cmd, "--db"); len(cmd) == 0 || cmd[0] != "dev" || i < 0 || i+1 >= len(cmd) || !strings.HasPrefix(cmd[i+1], "postgres://") {
		t.Errorf("docker-compose.yml's server runs %q; want toolgate dev --db postgres://…, which migrates as Start does", cmd)
	}
	want := map[string]string{
		"temporal":                    PostgresSchema + "/versioned",
		"temporal" + VisibilitySuffix: PostgresVisibilitySchema + "/versioned",
	}
	if len(updates) != len(want) {
		t.Fatalf("setup-postgres.sh migrates %v, want %v", updates, want)
	}
	for db, dir := range want {
		if updates[db] != dir {
			t.Errorf("setup-postgres.sh migrates %s from %s; Start migrates DB%s from %s",
				db, updates[db], strings.TrimPrefix(db, "temporal"), dir)
		}
	}
	for dir, version := range map[string]string{PostgresSchema: pgv12.Version, PostgresVisibilitySchema: pgv12.VisibilityVersion} {
		if last := lastVersion(t, path.Join(dir, "versioned")); last != version {
			t.Errorf("%s/versioned ends at %s, the server release declares %s", dir, last, version)
		}
	}
}

// lastVersion is the highest vX.Y directory under dir in the server's
// embedded schema files.
func lastVersion(t *testing.T, dir string) string {
	t.Helper()
	entries, err := fs.ReadDir(dbschemas.Assets(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var versions []semver.Version
	for _, e := range entries {
		if v, err := semver.ParseTolerant(strings.TrimPrefix(e.Name(), "v")); err == nil && e.IsDir() {
			versions = append(versions, v)
		}
	}
	if len(versions) == 0 {
		t.Fatalf("no versions under %s", dir)
	}
	last := slices.MaxFunc(versions, func(a, b semver.Version) int { return a.Compare(b) })
	return strings.TrimSuffix(last.String(), ".0")
}

// docker-compose.yml's server reads its queues as often as `toolgate dev`'s:
// deploy/dynamicconfig/docker.yaml sets every setting that QueuePollRPS sets,
// to the same value.
func TestQueuePollRateAgreesWithCompose(t *testing.T) {
	raw, err := os.ReadFile("../deploy/dynamicconfig/docker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	for _, k := range queuePollSettings {
		var got []any
		for key, vs := range file {
			if strings.EqualFold(key, k.String()) {
				for _, v := range vs {
					got = append(got, v.Value)
				}
			}
		}
		if len(got) != 1 || got[0] != QueuePollRPS {
			t.Errorf("deploy/dynamicconfig/docker.yaml: %s = %v, want one value %d (devserver.QueuePollRPS)", k, got, QueuePollRPS)
		}
	}
}
