package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/paycallback/paycallback/config"
	"github.com/paycallback/paycallback/internal/app"
)

// The contract's names (contract.md). The compose file is the reference
// deployment, so it uses them: the upstream receiver writes to this topic.
const (
	contractTopic      = "channel-events"
	contractGroup      = "settlement-consumer"
	contractDLQTopic   = "channel-events.dlq"
	contractAdminAddr  = ":9464"
	contractPartitions = 12
)

// Paths relative to this package's directory, where go test runs.
const (
	composePath      = "../docker-compose.yml"
	dockerfilePath   = "../Dockerfile"
	dockerignorePath = "../.dockerignore"
	envExamplePath   = "../.env.example"
	goModPath        = "../go.mod"
	prometheusDir    = "prometheus"
)

// ---- compose file model ----

type composeFile struct {
	Services map[string]*service `yaml:"services"`
	Extra    map[string]any      `yaml:",inline"` // name, volumes, ...
}

type service struct {
	Image           string         `yaml:"image"`
	Build           any            `yaml:"build"`
	Command         stringList     `yaml:"command"`
	Entrypoint      stringList     `yaml:"entrypoint"`
	Environment     envMap         `yaml:"environment"`
	DependsOn       dependsOn      `yaml:"depends_on"`
	Healthcheck     *healthchk     `yaml:"healthcheck"`
	Volumes         []string       `yaml:"volumes"`
	Ports           []string       `yaml:"ports"`
	StopGracePeriod string         `yaml:"stop_grace_period"`
	Restart         string         `yaml:"restart"`
	Extra           map[string]any `yaml:",inline"` // keys not modelled here
}

type healthchk struct {
	Test  stringList     `yaml:"test"`
	Extra map[string]any `yaml:",inline"` // interval, retries, ...
}

// stringList is a compose command/entrypoint/test: a list, or one string.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = stringList{n.Value}
		return nil
	}
	var s []string
	if err := n.Decode(&s); err != nil {
		return err
	}
	*l = s
	return nil
}

// envMap is a compose environment: a mapping, or a list of NAME=VALUE.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	m := envMap{}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			m[n.Content[i].Value] = n.Content[i+1].Value // scalars: numbers stay text
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			name, value, _ := strings.Cut(item.Value, "=")
			m[name] = value
		}
	default:
		return fmt.Errorf("environment: line %d: want a mapping or a list", n.Line)
	}
	*e = m
	return nil
}

// dependsOn is a compose depends_on: service -> condition. The short list
// form means service_started.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	m := dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, item := range n.Content {
			m[item.Value] = "service_started"
		}
	case yaml.MappingNode:
		var long map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&long); err != nil {
			return err
		}
		for name, dep := range long {
			cond := dep.Condition
			if cond == "" {
				cond = "service_started"
			}
			m[name] = cond
		}
	default:
		return fmt.Errorf("depends_on: line %d: want a mapping or a list", n.Line)
	}
	*d = m
	return nil
}

// ---- Prometheus configuration model ----

type promConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// ---- Dockerfile model ----

type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
}

type stage struct {
	name  string // the AS name, "" when none
	image string // FROM's image, ARG defaults expanded
	ins   []instruction
}

// ---- the deployment under test ----

// deployment is everything the checks read, parsed, so that tests can break
// one part and see the checks notice.
type deployment struct {
	compose      composeFile
	interpolate  map[string]string // the variables ${...} in the compose file see
	prometheus   promConfig
	promDir      string
	ruleJobs     []string // job names rules.yml selects with up{job="..."}
	stages       []stage
	goVersion    string // go.mod's go line
	dockerignore []ignoreRule
	buildFiles   []string // repository files `go build ./cmd/consumer` reads
}

func loadDeployment(t *testing.T, vars map[string]string) *deployment {
	t.Helper()
	d := &deployment{interpolate: vars, promDir: prometheusDir}

	raw, err := os.ReadFile(composePath)
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&d.compose), "parse docker-compose.yml")

	raw, err = os.ReadFile(filepath.Join(prometheusDir, "prometheus.yml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(raw, &d.prometheus), "parse prometheus.yml")
	if rules, err := os.ReadFile(filepath.Join(prometheusDir, "rules.yml")); err == nil {
		for _, m := range regexp.MustCompile(`\bup\{job="([^"]+)"`).FindAllStringSubmatch(string(rules), -1) {
			if !slices.Contains(d.ruleJobs, m[1]) {
				d.ruleJobs = append(d.ruleJobs, m[1])
			}
		}
	}

	raw, err = os.ReadFile(dockerfilePath)
	require.NoError(t, err)
	d.stages, err = parseDockerfile(string(raw))
	require.NoError(t, err, "parse Dockerfile")

	raw, err = os.ReadFile(goModPath)
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindSubmatch(raw)
	require.NotNil(t, m, "go.mod has no go line")
	d.goVersion = string(m[1])

	raw, err = os.ReadFile(dockerignorePath)
	require.NoError(t, err)
	d.dockerignore, err = parseDockerignore(string(raw))
	require.NoError(t, err, "parse .dockerignore")

	d.buildFiles = mustBuildFiles(t)
	return d
}

// ---- the checks ----

// check returns every way d departs from what the worker and the contract
// need. It never stops at the first problem.
func (d *deployment) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	svc := d.compose.Services
	for _, name := range []string{"mysql", "kafka", "migrate", "consumer", "prometheus"} {
		if svc[name] == nil {
			bad("compose: missing service %q", name)
		}
	}
	if len(errs) > 0 {
		return errs
	}
	for _, name := range sortedKeys(svc) {
		s := svc[name]
		if s.Image == "" && s.Build == nil {
			bad("compose: service %s has neither image nor build", name)
			continue
		}
		if s.Build == nil {
			if _, tag := splitImage(s.Image); tag == "" || tag == "latest" {
				bad("compose: service %s: image %q is not pinned to a tag", name, s.Image)
			}
		}
		for dep := range s.DependsOn {
			if svc[dep] == nil {
				bad("compose: service %s depends on unknown service %q", name, dep)
			}
		}
	}

	// The worker's effective configuration, as `consumer run` in the
	// container would build it: defaults, then the environment.
	consumer := svc["consumer"]
	cfg, cfgErrs := d.serviceConfig("consumer", "run")
	errs = append(errs, cfgErrs...)
	if cfgErrs != nil {
		return errs
	}

	// MySQL, and the DSN pointing at it.
	mysqlSvc := svc["mysql"]
	if repo, tag := splitImage(mysqlSvc.Image); repo != "mysql" || (tag != "8.4" && !strings.HasPrefix(tag, "8.4.")) {
		bad("compose: mysql: image %q, want mysql:8.4", mysqlSvc.Image)
	}
	if mysqlSvc.Healthcheck == nil || len(mysqlSvc.Healthcheck.Test) == 0 {
		bad("compose: mysql has no healthcheck, so nothing can wait for it to be ready")
	}
	errs = append(errs, d.checkDSN("consumer", cfg.DB.DSN.Reveal())...)

	// Kafka: the official image in KRaft mode, reachable at the consumer's broker.
	errs = append(errs, d.checkKafka(cfg)...)

	// The consumer itself.
	if cmd := d.effectiveCommand(consumer); !slices.Equal(cmd, []string{"run"}) {
		bad("compose: consumer runs %q, want [run]", cmd)
	}
	for name, value := range map[string]struct{ got, want string }{
		"PAYCB_KAFKA_TOPIC":     {cfg.Kafka.Topic, contractTopic},
		"PAYCB_KAFKA_GROUP":     {cfg.Kafka.Group, contractGroup},
		"PAYCB_KAFKA_DLQ_TOPIC": {cfg.Kafka.DLQTopic, contractDLQTopic},
		"PAYCB_ADMIN_ADDR":      {cfg.Admin.Addr, contractAdminAddr},
	} {
		if value.got != value.want {
			explicit := "by default"
			if _, ok := consumer.Environment[name]; ok {
				explicit = "set explicitly"
			}
			bad("compose: consumer %s is %q (%s), the contract's is %q", name, value.got, explicit, value.want)
		}
	}
	if raw := consumer.Environment["PAYCB_WECHAT_APIV3_KEY"]; raw != "" && !strings.Contains(raw, "${") {
		bad("compose: consumer PAYCB_WECHAT_APIV3_KEY is a literal; take it from the environment or .env (${PAYCB_WECHAT_APIV3_KEY})")
	}
	if cond := consumer.DependsOn["migrate"]; cond != "service_completed_successfully" {
		bad("compose: consumer must depend on migrate with condition service_completed_successfully, got %q", cond)
	}
	if cond := consumer.DependsOn["kafka"]; cond != "service_healthy" && !d.dependsOnTopicInit(consumer) {
		bad("compose: consumer must wait for a healthy kafka or a completed topic-creation step")
	}
	if consumer.StopGracePeriod == "" {
		bad("compose: consumer has no stop_grace_period: the default 10s kills it before its %s shutdown cap", cfg.Worker.ShutdownTimeout)
	} else if grace, err := time.ParseDuration(consumer.StopGracePeriod); err != nil {
		bad("compose: consumer stop_grace_period %q: %v", consumer.StopGracePeriod, err)
	} else if grace <= cfg.Worker.ShutdownTimeout {
		bad("compose: consumer stop_grace_period %s must exceed the shutdown cap %s", grace, cfg.Worker.ShutdownTimeout)
	}

	// migrate: the same binary, `consumer migrate`, once MySQL is healthy.
	migrate := svc["migrate"]
	if cmd := d.effectiveCommand(migrate); !slices.Equal(cmd, []string{"migrate"}) {
		bad("compose: migrate runs %q, want [migrate]", cmd)
	}
	if migrate.Build == nil && migrate.Image != consumer.Image {
		bad("compose: migrate must run the consumer's image %q, got %q", consumer.Image, migrate.Image)
	}
	if cond := migrate.DependsOn["mysql"]; cond != "service_healthy" {
		bad("compose: migrate must depend on mysql with condition service_healthy, got %q", cond)
	}
	if r := migrate.Restart; r != "" && r != "no" {
		bad("compose: migrate runs once; restart %q would rerun it", r)
	}
	migCfg, migErrs := d.serviceConfig("migrate", "migrate")
	errs = append(errs, migErrs...)
	if migErrs == nil {
		errs = append(errs, d.checkDSN("migrate", migCfg.DB.DSN.Reveal())...)
		if migCfg.DB.DSN.Reveal() != cfg.DB.DSN.Reveal() {
			bad("compose: migrate and consumer use different PAYCB_DB_DSN values")
		}
	}

	_, adminPort, err := net.SplitHostPort(cfg.Admin.Addr)
	if err != nil {
		bad("compose: consumer PAYCB_ADMIN_ADDR %q: %v", cfg.Admin.Addr, err)
	}
	errs = append(errs, d.checkPrometheus(adminPort)...)
	errs = append(errs, d.checkDockerfile(adminPort)...)
	errs = append(errs, d.checkDockerignore()...)
	return errs
}

// serviceConfig builds the configuration the named service's container
// sees and validates it for command. Every variable it sets must be one the
// worker reads.
func (d *deployment) serviceConfig(name, command string) (config.Config, []error) {
	var errs []error
	known := config.EnvVars()
	env := map[string]string{}
	for _, k := range sortedKeys(d.compose.Services[name].Environment) {
		v := d.compose.Services[name].Environment[k]
		if !slices.Contains(known, k) {
			errs = append(errs, fmt.Errorf("compose: %s sets %s, which the worker does not read (config.EnvVars)", name, k))
			continue
		}
		val, err := interpolate(v, d.interpolate)
		if err != nil {
			errs = append(errs, fmt.Errorf("compose: %s %s: %w", name, k, err))
			continue
		}
		env[k] = val
	}
	cfg := config.Default()
	if err := cfg.ApplyEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		errs = append(errs, fmt.Errorf("compose: %s environment: %w", name, err))
	}
	cfg.Finalize()
	if err := cfg.ValidateFor(command, app.FileChecks()); err != nil {
		errs = append(errs, fmt.Errorf("compose: %s: `consumer %s` would refuse its configuration: %w", name, command, err))
	}
	return cfg, errs
}

// checkDSN checks that dsn reaches the mysql service's database as the
// user it creates.
func (d *deployment) checkDSN(who, dsn string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("compose: "+who+" PAYCB_DB_DSN: "+format, args...))
	}
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		bad("does not parse") // the driver's error may quote the password
		return errs
	}
	if c.Net != "tcp" {
		bad("network %q, want tcp to the mysql service", c.Net)
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		bad("address %q: %v", c.Addr, err)
	} else if s := d.compose.Services[host]; s == nil || !strings.HasPrefix(s.Image, "mysql:") {
		bad("host %q is not the mysql service", host)
	} else if port != "3306" {
		bad("port %s, the mysql service listens on 3306", port)
	}
	menv := map[string]string{}
	for k, v := range d.compose.Services["mysql"].Environment {
		menv[k], _ = interpolate(v, d.interpolate)
	}
	if c.DBName == "" || c.DBName != menv["MYSQL_DATABASE"] {
		bad("database %q, the mysql service creates %q", c.DBName, menv["MYSQL_DATABASE"])
	}
	switch c.User {
	case menv["MYSQL_USER"]:
		if c.Passwd != menv["MYSQL_PASSWORD"] {
			bad("password differs from the mysql service's MYSQL_PASSWORD")
		}
	case "root":
		if c.Passwd != menv["MYSQL_ROOT_PASSWORD"] {
			bad("password differs from the mysql service's MYSQL_ROOT_PASSWORD")
		}
	default:
		bad("user %q is neither MYSQL_USER %q nor root", c.User, menv["MYSQL_USER"])
	}
	return errs
}

// checkKafka checks the broker image, KRaft mode, the listener the
// consumer's brokers name, and that the input and dead-letter topics exist
// before the worker starts.
func (d *deployment) checkKafka(cfg config.Config) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("compose: kafka: "+format, args...)) }
	k := d.compose.Services["kafka"]
	if repo, _ := splitImage(k.Image); repo != "apache/kafka" {
		bad("image %q, want the official apache/kafka", k.Image)
	}
	roles := strings.Split(k.Environment["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") {
		bad("KAFKA_PROCESS_ROLES %q: a single KRaft node is both broker and controller", k.Environment["KAFKA_PROCESS_ROLES"])
	}
	if id := k.Environment["CLUSTER_ID"]; id != "" {
		if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 {
			bad("CLUSTER_ID %q is not a base64 UUID (22 characters): the storage format refuses it", id)
		}
	}
	if k.Healthcheck == nil || len(k.Healthcheck.Test) == 0 {
		bad("no healthcheck, so nothing can wait for the broker")
	}
	advertised := listenerAddrs(k.Environment["KAFKA_ADVERTISED_LISTENERS"])
	listening := listenerAddrs(k.Environment["KAFKA_LISTENERS"])
	for _, b := range cfg.Kafka.Brokers {
		host, port, err := net.SplitHostPort(b)
		if err != nil {
			bad("consumer broker %q: %v", b, err)
			continue
		}
		if d.compose.Services[host] != d.compose.Services["kafka"] {
			bad("consumer broker %q is not the kafka service", b)
		}
		if !slices.Contains(advertised, b) {
			bad("consumer broker %q is not among KAFKA_ADVERTISED_LISTENERS %v: the client would be redirected elsewhere", b, advertised)
		}
		if !slices.ContainsFunc(listening, func(a string) bool { return strings.HasSuffix(a, ":"+port) }) {
			bad("nothing in KAFKA_LISTENERS %v listens on port %s", listening, port)
		}
	}

	created := d.createdTopics()
	autoParts, _ := strconv.Atoi(k.Environment["KAFKA_NUM_PARTITIONS"])
	autoCreate := k.Environment["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] != "false"
	topics := []string{cfg.Kafka.Topic, cfg.Kafka.DLQTopic}
	if cfg.Settled.Enabled() {
		topics = append(topics, cfg.Settled.Topic)
	}
	for _, topic := range topics {
		parts, ok := created[topic]
		switch {
		case ok && topic == cfg.Kafka.Topic && parts != contractPartitions:
			bad("topic %s is created with %d partitions, want %d", topic, parts, contractPartitions)
		case ok:
		case autoCreate && autoParts == contractPartitions:
			// auto-created on first use with the right partition count
		default:
			bad("topic %s is neither created by an init step nor auto-created with %d partitions", topic, contractPartitions)
		}
	}
	return errs
}

// createdTopics returns the topics some service creates with
// kafka-topics.sh --create, and their partition counts.
func (d *deployment) createdTopics() map[string]int {
	out := map[string]int{}
	for _, s := range d.compose.Services {
		script := strings.Join(append(slices.Clone(s.Entrypoint), s.Command...), "\n")
		for line := range strings.Lines(script) {
			f := strings.Fields(line)
			if !slices.ContainsFunc(f, func(w string) bool { return strings.HasSuffix(w, "kafka-topics.sh") }) || !slices.Contains(f, "--create") {
				continue
			}
			topic, parts := "", 1
			for i := 0; i+1 < len(f); i++ {
				switch f[i] {
				case "--topic":
					topic = f[i+1]
				case "--partitions":
					parts, _ = strconv.Atoi(f[i+1])
				}
			}
			if topic != "" {
				out[topic] = parts
			}
		}
	}
	return out
}

// dependsOnTopicInit reports whether s waits for a service that creates
// topics to complete.
func (d *deployment) dependsOnTopicInit(s *service) bool {
	for dep, cond := range s.DependsOn {
		init := d.compose.Services[dep]
		if init == nil || cond != "service_completed_successfully" {
			continue
		}
		if strings.Contains(strings.Join(append(slices.Clone(init.Entrypoint), init.Command...), " "), "--create") {
			return true
		}
	}
	return false
}

// effectiveCommand is the command the service's container runs after the
// image's ENTRYPOINT: the service's own, else the Dockerfile's CMD.
func (d *deployment) effectiveCommand(s *service) []string {
	if len(s.Command) > 0 {
		return s.Command
	}
	if len(d.stages) == 0 {
		return nil
	}
	cmd, _ := execForm(lastArgs(d.stages[len(d.stages)-1], "CMD"))
	return cmd
}

func (d *deployment) checkPrometheus(adminPort string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("prometheus: "+format, args...)) }
	p := d.compose.Services["prometheus"]
	if repo, _ := splitImage(p.Image); repo != "prom/prometheus" {
		bad("image %q, want prom/prometheus", p.Image)
	}
	mounted := ""
	for _, v := range p.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && filepath.Clean(parts[0]) == "deploy/prometheus" {
			mounted = parts[1]
		}
	}
	configFile := "/etc/prometheus/prometheus.yml"
	for _, arg := range p.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			configFile = v
		}
	}
	if mounted == "" {
		bad("./deploy/prometheus is not mounted into the prometheus service")
	} else if configFile != filepath.Join(mounted, "prometheus.yml") {
		bad("--config.file %s is not the mounted deploy/prometheus/prometheus.yml (%s)", configFile, filepath.Join(mounted, "prometheus.yml"))
	}
	for _, f := range d.prometheus.RuleFiles {
		if matches, _ := filepath.Glob(filepath.Join(d.promDir, f)); len(matches) == 0 {
			bad("rule_files %q: no such file in deploy/prometheus", f)
		}
	}
	target := "consumer:" + adminPort
	var jobs []string
	for _, sc := range d.prometheus.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			continue
		}
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, target) {
				jobs = append(jobs, sc.JobName)
			}
		}
	}
	if len(jobs) == 0 {
		bad("no scrape job reads %s/metrics, the consumer's admin port", target)
	}
	for _, j := range d.ruleJobs {
		if !slices.Contains(jobs, j) {
			bad("rules.yml watches up{job=%q}, but the job scraping %s is %q", j, target, jobs)
		}
	}
	return errs
}

func (d *deployment) checkDockerfile(adminPort string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("Dockerfile: "+format, args...)) }
	if len(d.stages) < 2 {
		bad("want a multi-stage build (builder, then a small runtime image), got %d stage(s)", len(d.stages))
		return errs
	}
	final := d.stages[len(d.stages)-1]

	user := lastArgs(final, "USER")
	name, _, _ := strings.Cut(strings.TrimSpace(user), ":")
	switch {
	case user == "" && !strings.Contains(final.image, "nonroot"):
		bad("the final stage (%s) sets no USER: the worker would run as root", final.image)
	case user != "" && (name == "root" || name == "0"):
		bad("the final stage runs as %q", user)
	}

	entry, err := execForm(lastArgs(final, "ENTRYPOINT"))
	if err != nil || len(entry) != 1 {
		bad("ENTRYPOINT %q, want the exec form [\"/consumer\"]", lastArgs(final, "ENTRYPOINT"))
		return errs
	}
	if cmd, err := execForm(lastArgs(final, "CMD")); err != nil || !slices.Equal(cmd, []string{"run"}) {
		bad("CMD %q, want [\"run\"]", lastArgs(final, "CMD"))
	}
	exposed := false
	for _, in := range final.ins {
		if in.cmd == "EXPOSE" && slices.ContainsFunc(strings.Fields(in.args), func(p string) bool {
			return strings.TrimSuffix(p, "/tcp") == adminPort
		}) {
			exposed = true
		}
	}
	if !exposed {
		bad("the final stage does not EXPOSE the admin port %s", adminPort)
	}

	// The entrypoint binary is copied from a builder stage that builds
	// ./cmd/consumer into it, statically.
	copied := false
	for _, in := range final.ins {
		f := strings.Fields(in.args)
		if in.cmd != "COPY" || len(f) < 3 || f[len(f)-1] != entry[0] {
			continue
		}
		from, ok := strings.CutPrefix(f[0], "--from=")
		if !ok {
			continue
		}
		src := f[len(f)-2]
		builder := d.stageNamed(from)
		if builder == nil {
			bad("COPY --from=%s: no such stage", from)
			continue
		}
		out, static := builder.goBuildOutput("./cmd/consumer")
		switch {
		case out == "":
			bad("stage %s does not `go build -o ... ./cmd/consumer`", from)
		case out != src:
			bad("stage %s builds %s but the final stage copies %s", from, out, src)
		case !static:
			bad("stage %s builds without CGO_ENABLED=0, but the final image has no C library", from)
		default:
			copied = true
		}
		if repo, tag := splitImage(builder.image); repo != "golang" || !goAtLeast(tag, d.goVersion) {
			bad("builder image %q cannot build go.mod's go %s (golang images set GOTOOLCHAIN=local)", builder.image, d.goVersion)
		}
	}
	if !copied {
		bad("the final stage's %s is not a binary built from ./cmd/consumer", entry[0])
	}
	return errs
}

func (d *deployment) stageNamed(name string) *stage {
	for i := range d.stages {
		if d.stages[i].name == name || strconv.Itoa(i) == name {
			return &d.stages[i]
		}
	}
	return nil
}

// goBuildOutput returns the -o of the stage's go build of pkg, and whether
// cgo is off for it.
func (s stage) goBuildOutput(pkg string) (out string, static bool) {
	cgoOff := false
	for _, in := range s.ins {
		if in.cmd == "ENV" && regexp.MustCompile(`\bCGO_ENABLED=0\b`).MatchString(in.args) {
			cgoOff = true
		}
		if in.cmd != "RUN" {
			continue
		}
		f := strings.Fields(in.args)
		for i := 0; i+1 < len(f); i++ {
			if f[i] != "go" || f[i+1] != "build" {
				continue
			}
			rest := f[i+2:]
			if !slices.Contains(rest, pkg) {
				continue
			}
			if j := slices.Index(rest, "-o"); j >= 0 && j+1 < len(rest) {
				out = rest[j+1]
			}
			static = cgoOff || slices.Contains(f[:i], "CGO_ENABLED=0")
		}
	}
	return out, static
}

func (d *deployment) checkDockerignore() []error {
	var errs []error
	for _, f := range d.buildFiles {
		if excluded(d.dockerignore, f) {
			errs = append(errs, fmt.Errorf(".dockerignore: excludes %s, which go build ./cmd/consumer needs", f))
		}
	}
	for _, f := range []string{".git/HEAD", ".env"} {
		if !excluded(d.dockerignore, f) {
			errs = append(errs, fmt.Errorf(".dockerignore: sends %s to the build context", f))
		}
	}
	return errs
}

// ---- helpers ----

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// splitImage splits "repo:tag" (a registry port is not a tag).
func splitImage(image string) (repo, tag string) {
	slash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > slash {
		return image[:colon], image[colon+1:]
	}
	return image, ""
}

// listenerAddrs turns "NAME://host:port,..." into host:port strings.
func listenerAddrs(listeners string) []string {
	var out []string
	for l := range strings.SplitSeq(listeners, ",") {
		if _, addr, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
			out = append(out, addr)
		}
	}
	return out
}

var versionRE = regexp.MustCompile(`^(\d+)\.(\d+)(?:\.(\d+))?`)

// goAtLeast reports whether a golang image tag ("1.26", "1.26.8-bookworm")
// provides at least Go version want ("1.26.8"). A tag without a patch
// level is the newest release of its line.
func goAtLeast(tag, want string) bool {
	t, w := versionRE.FindStringSubmatch(tag), versionRE.FindStringSubmatch(want)
	if t == nil || w == nil {
		return false
	}
	for i := 1; i <= 3; i++ {
		if i == 3 && t[3] == "" {
			return true
		}
		a, _ := strconv.Atoi(t[i])
		b, _ := strconv.Atoi(w[i])
		if a != b {
			return a > b
		}
	}
	return true
}

// interpolate expands compose's $$, $VAR, ${VAR}, ${VAR:-default},
// ${VAR-default}, ${VAR:?message} and ${VAR?message} with vars.
func interpolate(s string, vars map[string]string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '$' {
			b.WriteByte('$')
			i++
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in %q", s)
			}
			expr := s[i+2 : i+end]
			i += end
			v, err := expand(expr, vars)
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || j > i+1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j == i+1 {
			return "", fmt.Errorf("lone $ in %q (write $$)", s)
		}
		b.WriteString(vars[s[i+1:j]])
		i = j - 1
	}
	return b.String(), nil
}

func expand(expr string, vars map[string]string) (string, error) {
	for _, op := range []string{":-", ":?", "-", "?"} {
		name, arg, ok := strings.Cut(expr, op)
		if !ok {
			continue
		}
		v, set := vars[name]
		empty := !set || (strings.HasPrefix(op, ":") && v == "")
		switch {
		case !empty:
			return v, nil
		case strings.HasSuffix(op, "-"):
			return arg, nil
		default:
			return "", fmt.Errorf("%s is required: %s", name, arg)
		}
	}
	return vars[expr], nil
}

// parseDotenv reads KEY=VALUE lines, skipping comments and blank lines.
func parseDotenv(text string) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("line %d: no '='", n)
		}
		out[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return out, sc.Err()
}

// parseDockerfile splits a Dockerfile into stages, joining continuation
// lines, dropping comments and expanding global ARG defaults in FROM.
func parseDockerfile(text string) ([]stage, error) {
	var logical []string
	var cur strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		logical = append(logical, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		logical = append(logical, cur.String())
	}

	args := map[string]string{}
	var stages []stage
	for _, l := range logical {
		cmd, rest, _ := strings.Cut(l, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest)}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			f = slices.DeleteFunc(f, func(w string) bool { return strings.HasPrefix(w, "--") })
			if len(f) == 0 {
				return nil, errors.New("FROM without an image")
			}
			img, err := interpolate(f[0], args)
			if err != nil {
				return nil, fmt.Errorf("FROM %s: %w", f[0], err)
			}
			st := stage{image: img}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0 && in.cmd == "ARG":
			name, def, _ := strings.Cut(in.args, "=")
			args[name] = def
		case len(stages) == 0:
			return nil, fmt.Errorf("%s before the first FROM", in.cmd)
		default:
			stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		}
	}
	return stages, nil
}

// lastArgs returns the arguments of the stage's last instruction cmd.
func lastArgs(s stage, cmd string) string {
	out := ""
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = in.args
		}
	}
	return out
}

// execForm decodes the JSON (exec) form of ENTRYPOINT or CMD.
func execForm(args string) ([]string, error) {
	var out []string
	if err := json.Unmarshal([]byte(args), &out); err != nil {
		return nil, fmt.Errorf("not the exec form: %q", args)
	}
	return out, nil
}

// ignoreRule is one .dockerignore pattern.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// parseDockerignore compiles .dockerignore patterns: *, ? and ** as in
// Docker, matching a path or any of its parent directories.
func parseDockerignore(text string) ([]ignoreRule, error) {
	var rules []ignoreRule
	for line := range strings.Lines(text) {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		r := ignoreRule{}
		if rest, ok := strings.CutPrefix(p, "!"); ok {
			r.negate, p = true, rest
		}
		p = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(strings.TrimPrefix(p, "/"))), "./")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(p); i++ {
			switch {
			case strings.HasPrefix(p[i:], "**/"):
				re.WriteString("(?:.*/)?")
				i += 2
			case strings.HasPrefix(p[i:], "**"):
				re.WriteString(".*")
				i++
			case p[i] == '*':
				re.WriteString("[^/]*")
			case p[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(p[i : i+1]))
			}
		}
		re.WriteString("$")
		var err error
		if r.re, err = regexp.Compile(re.String()); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", line, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// excluded reports whether path (slash-separated, relative to the build
// context) is left out of the context.
func excluded(rules []ignoreRule, path string) bool {
	out := false
	for _, r := range rules {
		for p := path; p != "." && p != ""; p = filepath.ToSlash(filepath.Dir(p)) {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
		}
	}
	return out
}

var (
	buildFilesOnce sync.Once
	buildFiles     []string
	buildFilesErr  error
)

// mustBuildFiles lists, relative to the repository root, the Go and
// embedded files of this module's packages that ./cmd/consumer is built
// from, with `go list -deps`.
func mustBuildFiles(t *testing.T) []string {
	t.Helper()
	buildFilesOnce.Do(func() {
		cmd := exec.Command("go", "list", "-deps", "-f",
			`{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles ","}}|{{join .EmbedFiles ","}}{{end}}{{end}}`,
			"./cmd/consumer")
		cmd.Dir = ".."
		out, err := cmd.Output()
		if err != nil {
			buildFilesErr = fmt.Errorf("go list: %w", err)
			return
		}
		root, err := filepath.Abs("..")
		if err != nil {
			buildFilesErr = err
			return
		}
		buildFiles = []string{"go.mod", "go.sum"}
		for line := range strings.Lines(string(out)) {
			parts := strings.Split(strings.TrimSpace(line), "|")
			if len(parts) != 3 {
				continue
			}
			rel, err := filepath.Rel(root, parts[0])
			if err != nil {
				buildFilesErr = err
				return
			}
			for _, list := range parts[1:] {
				for f := range strings.SplitSeq(list, ",") {
					if f != "" {
						buildFiles = append(buildFiles, filepath.ToSlash(filepath.Join(rel, f)))
					}
				}
			}
		}
	})
	require.NoError(t, buildFilesErr)
	require.NotEmpty(t, buildFiles)
	return buildFiles
}

// ---- tests ----

// TestDeployment checks docker-compose.yml, the Prometheus configuration,
// the Dockerfile and .dockerignore against the worker's configuration and
// the contract, with the compose defaults and with .env.example's values.
func TestDeployment(t *testing.T) {
	example, err := os.ReadFile(envExamplePath)
	require.NoError(t, err)
	exampleVars, err := parseDotenv(string(example))
	require.NoError(t, err, "parse .env.example")

	for _, tc := range []struct {
		name string
		vars map[string]string
	}{
		{"compose defaults", map[string]string{}},
		{".env.example", exampleVars},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := loadDeployment(t, tc.vars)
			for _, err := range d.check() {
				t.Error(err)
			}
		})
	}
}

// TestEnvExampleNamesComposeVariables keeps .env.example to the variables
// docker-compose.yml interpolates, so it documents every one of them.
func TestEnvExampleNamesComposeVariables(t *testing.T) {
	compose, err := os.ReadFile(composePath)
	require.NoError(t, err)
	example, err := os.ReadFile(envExamplePath)
	require.NoError(t, err)
	vars, err := parseDotenv(string(example))
	require.NoError(t, err)

	used := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`).FindAllStringSubmatch(string(compose), -1) {
		used[m[1]] = true
	}
	for _, name := range sortedKeys(used) {
		assert.Contains(t, vars, name, ".env.example does not document ${%s}", name)
	}
	for _, name := range sortedKeys(vars) {
		assert.True(t, used[name], ".env.example sets %s, which docker-compose.yml never uses", name)
	}
}

// TestDeploymentCatchesMistakes breaks one thing at a time and expects the
// checks to name it, so TestDeployment passing means something.
func TestDeploymentCatchesMistakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(d *deployment)
		want   string
	}{
		{"missing service", func(d *deployment) { delete(d.compose.Services, "prometheus") }, `missing service "prometheus"`},
		{"unknown variable", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_BROKER"] = "kafka:9092"
		}, "PAYCB_KAFKA_BROKER, which the worker does not read"},
		{"broker not the kafka service", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_BROKERS"] = "localhost:9092"
		}, `broker "localhost:9092" is not the kafka service`},
		{"host listener only", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_BROKERS"] = "kafka:29092"
		}, "is not among KAFKA_ADVERTISED_LISTENERS"},
		{"other topic", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_TOPIC"] = "events"
		}, `PAYCB_KAFKA_TOPIC is "events" (set explicitly)`},
		{"other group", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_GROUP"] = "g"
		}, `PAYCB_KAFKA_GROUP is "g"`},
		{"dlq not created", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_KAFKA_DLQ_TOPIC"] = "dead"
			d.compose.Services["kafka"].Environment["KAFKA_NUM_PARTITIONS"] = "1"
		}, "topic dead is neither created"},
		{"settled topic not created", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_SETTLED_TOPIC"] = "out"
			d.compose.Services["kafka"].Environment["KAFKA_NUM_PARTITIONS"] = "1"
		}, "topic out is neither created"},
		{"too few partitions", func(d *deployment) {
			s := d.compose.Services["kafka-init"]
			s.Command = stringList{strings.ReplaceAll(strings.Join(s.Command, "\n"), "--partitions 12", "--partitions 3")}
		}, "created with 3 partitions"},
		{"not KRaft", func(d *deployment) {
			d.compose.Services["kafka"].Environment["KAFKA_PROCESS_ROLES"] = "broker"
		}, "KAFKA_PROCESS_ROLES"},
		{"bad cluster id", func(d *deployment) {
			d.compose.Services["kafka"].Environment["CLUSTER_ID"] = "paycb"
		}, "not a base64 UUID"},
		{"dsn to localhost", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_DB_DSN"] = "paycb:paycb@tcp(127.0.0.1:3306)/paycb"
		}, `host "127.0.0.1" is not the mysql service`},
		{"dsn wrong database", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_DB_DSN"] = "paycb:paycb@tcp(mysql:3306)/other"
		}, `database "other"`},
		{"dsn wrong password", func(d *deployment) {
			d.compose.Services["migrate"].Environment["PAYCB_DB_DSN"] = "paycb:nope@tcp(mysql:3306)/paycb"
		}, "migrate PAYCB_DB_DSN: password differs"},
		{"no dsn", func(d *deployment) {
			delete(d.compose.Services["migrate"].Environment, "PAYCB_DB_DSN")
		}, "PAYCB_DB_DSN is required"},
		{"literal apiv3 key", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_WECHAT_APIV3_KEY"] = "0123456789abcdef0123456789abcdef"
		}, "PAYCB_WECHAT_APIV3_KEY is a literal"},
		{"short apiv3 key", func(d *deployment) { d.interpolate["PAYCB_WECHAT_APIV3_KEY"] = "short" }, "must be exactly 32 bytes"},
		{"migrate not awaited", func(d *deployment) {
			d.compose.Services["consumer"].DependsOn["migrate"] = "service_started"
		}, "depend on migrate with condition service_completed_successfully"},
		{"mysql not awaited", func(d *deployment) { delete(d.compose.Services["migrate"].DependsOn, "mysql") }, "depend on mysql with condition service_healthy"},
		{"no mysql healthcheck", func(d *deployment) { d.compose.Services["mysql"].Healthcheck = nil }, "mysql has no healthcheck"},
		{"short grace", func(d *deployment) { d.compose.Services["consumer"].StopGracePeriod = "10s" }, "must exceed the shutdown cap"},
		{"unpinned image", func(d *deployment) { d.compose.Services["prometheus"].Image = "prom/prometheus" }, "is not pinned"},
		{"migrate runs the worker", func(d *deployment) { d.compose.Services["migrate"].Command = nil }, `migrate runs ["run"]`},
		{"admin port not scraped", func(d *deployment) {
			d.compose.Services["consumer"].Environment["PAYCB_ADMIN_ADDR"] = ":9100"
		}, "no scrape job reads consumer:9100/metrics"},
		{"scrape job renamed", func(d *deployment) {
			d.ruleJobs = append(d.ruleJobs, "paycb-worker")
		}, `up{job="paycb-worker"}`},
		{"missing rule file", func(d *deployment) { d.prometheus.RuleFiles = append(d.prometheus.RuleFiles, "alerts.yml") }, `rule_files "alerts.yml"`},
		{"root user", func(d *deployment) {
			final := &d.stages[len(d.stages)-1]
			final.ins = append(final.ins, instruction{cmd: "USER", args: "root"})
		}, `runs as "root"`},
		{"no user", func(d *deployment) {
			final := &d.stages[len(d.stages)-1]
			final.image = "alpine:3.22"
			final.ins = slices.DeleteFunc(final.ins, func(in instruction) bool { return in.cmd == "USER" })
		}, "sets no USER"},
		{"builds another package", func(d *deployment) {
			for i, in := range d.stages[0].ins {
				d.stages[0].ins[i].args = strings.ReplaceAll(in.args, "./cmd/consumer", "./cmd/other")
			}
		}, "does not `go build -o ... ./cmd/consumer`"},
		{"cgo on", func(d *deployment) {
			for i, in := range d.stages[0].ins {
				d.stages[0].ins[i].args = strings.ReplaceAll(in.args, "CGO_ENABLED=0", "")
			}
		}, "without CGO_ENABLED=0"},
		{"old builder", func(d *deployment) { d.stages[0].image = "golang:1.25" }, "cannot build go.mod's go"},
		{"port not exposed", func(d *deployment) {
			final := &d.stages[len(d.stages)-1]
			final.ins = slices.DeleteFunc(final.ins, func(in instruction) bool { return in.cmd == "EXPOSE" })
		}, "does not EXPOSE the admin port 9464"},
		{"schema ignored", func(d *deployment) {
			rules, err := parseDockerignore("schema/**/*.sql\n")
			if err != nil {
				panic(err)
			}
			d.dockerignore = append(d.dockerignore, rules...)
		}, "excludes schema/mysql/0001_initial.sql"},
		{"git sent", func(d *deployment) {
			rules, err := parseDockerignore("!.git\n")
			if err != nil {
				panic(err)
			}
			d.dockerignore = append(d.dockerignore, rules...)
		}, "sends .git/HEAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := loadDeployment(t, map[string]string{})
			tc.mutate(d)
			var msgs []string
			for _, err := range d.check() {
				msgs = append(msgs, err.Error())
			}
			joined := strings.Join(msgs, "\n")
			assert.Contains(t, joined, tc.want, "the checks missed the mistake")
		})
	}
}

func TestInterpolate(t *testing.T) {
	vars := map[string]string{"SET": "v", "EMPTY": ""}
	for _, tc := range []struct{ in, want, err string }{
		{in: "a$$b", want: "a$b"},
		{in: "${SET}", want: "v"},
		{in: "$SET/x", want: "v/x"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${EMPTY-d}", want: ""},
		{in: "${UNSET-d}", want: "d"},
		{in: "${SET:-d}", want: "v"},
		{in: "${UNSET}", want: ""},
		{in: "${UNSET:?need it}", err: "UNSET is required"},
		{in: "${SET", err: "unterminated"},
	} {
		got, err := interpolate(tc.in, vars)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
	}
}

func TestDockerignoreMatching(t *testing.T) {
	rules, err := parseDockerignore("# comment\n.git\n**/*_test.go\nbench\n/docs\n!docs/keep.md\n")
	require.NoError(t, err)
	for path, want := range map[string]bool{
		".git/HEAD":             true,
		"pkg/a/a_test.go":       true,
		"a_test.go":             true,
		"pkg/a/a.go":            false,
		"bench/results/go.txt":  true,
		"docs/contract.md":      true,
		"docs/keep.md":          false,
		"cmd/consumer/bench.go": false,
	} {
		assert.Equal(t, want, excluded(rules, path), path)
	}
}
